"""The nextpnr watcher: its verdicts on logs, its handling of a nextpnr that never ends, and the
ECP5 flow's summary when it stops nextpnr."""

import json
import sys
import time

import pytest

from rtl.bus.skid_buffer import SkidBuffer
from scripts.flow.nextpnr_watch import (
    EXIT_VERDICT,
    RISE_FLOOR,
    RISES_IN_A_ROW,
    STALL_FLOOR,
    STALL_ITERATIONS,
    RouteWatch,
    main,
    packing_utilisation,
)

UTILISATION = ["Info: Device utilisation:", "Info: \t          TRELLIS_IO:       2/    365     0%",
               "Info: \t              DP16KD:     135/    208    64%"]


def _iterations(counts):
    return [f"Info:     iter={i} wires={1000 + i} overused={n} overuse={n} archfail=NA"
            for i, n in enumerate(counts, start=1)]


def _verdict(lines):
    watch = RouteWatch()
    for line in lines:
        watch.feed(line + "\n")
    return watch.verdict


def test_a_converging_router2_run_gets_no_verdict():
    # Falling, with RISES_IN_A_ROW - 1 rises in a row from thousands, then the noisy tail.
    rises = [5000 + 100 * i for i in range(RISES_IN_A_ROW)]
    assert _verdict(_iterations([40_000, 9_000, *rises, 800, 1, 2, 3, 4, 5, 6, 0])) is None


def test_a_diverging_router2_run_does_not_route():
    counts = [40_000, 9_000, 5_399, *(5_399 + 500 * i for i in range(1, RISES_IN_A_ROW + 1))]
    assert _verdict(_iterations(counts)) == {"unroutable": {
        "rule": "rising", "iteration": len(counts), "overused": counts[-1], "lowest": 5_399,
        "lowest_iteration": 3, "rises": RISES_IN_A_ROW}}


def test_a_router2_run_that_stalls_above_the_floor_does_not_route():
    # Up and down around 34,000 wires, never below the lowest count again.
    wobble = [34_100 + (300 if i % 2 else 0) for i in range(STALL_ITERATIONS)]
    counts = [95_000, 50_000, 34_000, *wobble]
    assert _verdict(_iterations(counts[:-1])) is None
    stall = _verdict(_iterations(counts))["unroutable"]
    fields = ("rule", "iteration", "overused", "lowest", "lowest_iteration")
    assert tuple(stall[field] for field in fields) == ("stalled", len(counts), counts[-1], 34_000, 3)
    # Below the floor a stall is a converging run's tail.
    assert _verdict(_iterations([5_000, STALL_FLOOR - 1, *([STALL_FLOOR] * 2 * STALL_ITERATIONS)])) is None


def test_rises_under_the_floor_do_not_count():
    counts = [50, 10, *(10 + (RISE_FLOOR - 1) * i // RISES_IN_A_ROW for i in range(1, RISES_IN_A_ROW + 1))]
    assert _verdict(_iterations(counts)) is None
    assert _verdict(_iterations([*counts, 10 + RISE_FLOOR])) is not None


def test_a_placer_that_gives_up_is_a_verdict():
    message = "Unable to find legal placement for all cells, design is probably at utilisation limit."
    assert _verdict([*UTILISATION, "", "Info: Running main analytical placer.", f"ERROR: {message}"]) == {
        "unplaceable": {"message": message}}
    assert _verdict(["ERROR: Max frequency for clock not met"]) is None  # other errors stay errors


def test_packing_over_the_device_is_too_large_and_within_it_is_not():
    assert _verdict([*UTILISATION, ""]) is None
    assert _verdict([*UTILISATION, "Info: \t        TRELLIS_COMB:   95523/  83640   114%", ""]) == {
        "too_large": {"cell": "TRELLIS_COMB", "used": 95_523, "available": 83_640}}
    # The verdict concerns the utilisation table only: a later line of the same shape is not one.
    assert _verdict([*UTILISATION, "", "Info: \t        TRELLIS_COMB:   95523/  83640   114%"]) is None


def test_the_utilisation_table_is_read_from_the_log_up_to_its_end():
    log = "\n".join([*UTILISATION, "", "Info: \t        TRELLIS_COMB:   95523/  83640   114%"])
    assert packing_utilisation(log) == {"TRELLIS_IO": (2, 365), "DP16KD": (135, 208)}
    assert packing_utilisation("Info: Max frequency for clock 'clk': 50.00 MHz") == {}


def _fake_nextpnr(folder, lines, *, then_hang):
    """A stand-in for nextpnr that writes ``lines`` into its ``--log`` file, then hangs or fails."""
    script = folder / "fake-nextpnr"
    body = "".join(f"log.write({line + chr(10)!r})\nlog.flush()\n" for line in lines)
    script.write_text(f"#!{sys.executable}\nimport sys, time\n"
                      "log = open(sys.argv[sys.argv.index('--log') + 1], 'w')\n" + body
                      + ("time.sleep(600)\n" if then_hang else "sys.exit(7)\n"))
    script.chmod(0o755)
    return str(script)


def test_the_watcher_stops_a_nextpnr_that_would_run_on(tmp_path):
    counts = [40_000, 5_000, *(5_000 + 1_000 * i for i in range(1, RISES_IN_A_ROW + 1))]
    nextpnr = _fake_nextpnr(tmp_path, _iterations(counts), then_hang=True)
    started = time.monotonic()
    command = [str(tmp_path / "verdict.json"), nextpnr, "--log", str(tmp_path / "top.tim")]
    assert main(command, poll_seconds=0.05) == EXIT_VERDICT
    assert time.monotonic() - started < 60  # stopped, not waited for
    assert json.loads((tmp_path / "verdict.json").read_text())["unroutable"]["overused"] == counts[-1]


def test_the_watcher_passes_nextpnr_exit_status_on_without_a_verdict(tmp_path):
    nextpnr = _fake_nextpnr(tmp_path, _iterations([40_000, 0]), then_hang=False)
    command = [str(tmp_path / "verdict.json"), nextpnr, "--log", str(tmp_path / "top.tim")]
    assert main(command, poll_seconds=0.05) == 7
    assert not (tmp_path / "verdict.json").exists()


def test_the_watcher_needs_the_log_file(tmp_path):
    with pytest.raises(SystemExit, match="no --log FILE"):
        main([str(tmp_path / "verdict.json"), "nextpnr-ecp5", "--quiet"])


def test_the_flow_reports_a_block_that_packs_over_the_device(tmp_path, monkeypatch):
    from boards import boards
    from scripts.cli.boards import format_bitstream_summary
    from scripts.flow import bitstream

    nextpnr = _fake_nextpnr(tmp_path, [*UTILISATION, "Info: \t        TRELLIS_COMB:   95523/  83640   114%"],
                            then_hang=True)
    environment = bitstream.yowasp_environment
    monkeypatch.setattr(bitstream, "yowasp_environment", lambda: {**environment(), "NEXTPNR_ECP5": nextpnr})
    board = boards()["ulx3s-85f"]
    summary = bitstream.build_bitstream(SkidBuffer(width=4), board=board, output=tmp_path / "build")
    assert summary["too_large"] == "too large for the LFE5U-85F after packing (TRELLIS_COMB 95,523 > 83,640)"
    assert summary["fmax"] == {} and summary["bitstream"] is None
    # nextpnr's counts after packing, from the log (a stopped run writes no report).
    assert summary["utilisation"] == {"LUT4": {"used": 95_523, "available": 83_640},
                                      "EBR": {"used": 135, "available": 208}}
    assert summary["too_large"] in format_bitstream_summary("skid_buffer", summary)[0]


def test_the_cli_says_why_there_is_no_bitstream_and_fails(tmp_path, monkeypatch, capsys):
    from scripts.cli import main
    from scripts.flow import bitstream

    counts = [40_000, 5_000, 6_000, 7_000, 8_000, 9_000]
    # The placer's estimate, which a stopped run must not report as its Fmax.
    estimate = "Info: Max frequency for clock '$glbnet$clk': 51.46 MHz (FAIL at 125.00 MHz)"
    nextpnr = _fake_nextpnr(tmp_path, [estimate, *_iterations(counts)], then_hang=True)
    environment = bitstream.yowasp_environment
    monkeypatch.setattr(bitstream, "yowasp_environment", lambda: {**environment(), "NEXTPNR_ECP5": nextpnr})
    assert main(["bitstream", "skid_buffer", "--set", "width=4", "-o", str(tmp_path / "build")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert not any(line.startswith("Fmax") for line in lines)
    first = lines[0]
    assert first == ("skid_buffer width=4 on ulx3s-85f (LFE5U-85F): does not route (router2: 5,000 wires "
                     "overused at iteration 2, then up 4 iterations in a row to 9,000 at iteration 6)")


def test_a_nextpnr_failure_without_a_verdict_is_still_an_error(tmp_path, monkeypatch):
    from boards import boards
    from scripts.flow import bitstream

    nextpnr = _fake_nextpnr(tmp_path, ["ERROR: no BELs remaining"], then_hang=False)
    environment = bitstream.yowasp_environment
    monkeypatch.setattr(bitstream, "yowasp_environment", lambda: {**environment(), "NEXTPNR_ECP5": nextpnr})
    with pytest.raises(bitstream.BitstreamError, match="the ECP5 build failed; log: "):
        bitstream.build_bitstream(SkidBuffer(width=4), board=boards()["ulx3s-85f"], output=tmp_path / "b")
