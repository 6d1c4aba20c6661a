"""``topk_dram_scatter`` (``rtl.compress.dram_scatter.DRAMScatter``), the paper mode: cocotb tests
(collected by cocotb) and their pytest runners (at the bottom).

Each run places a flat pair stream in one cocotbext-axi ``AxiRam`` (the pair port) and a dense region,
filled with random garbage and surrounded by random guard bytes, in another (the dense port). After
``done`` the region must equal :func:`golden.compress.scatter_stream` (flat stream, ``pair_count`` =
the command's ``count``) bit for bit, the counters and status bits must match, and every guard byte
must be unchanged (no write outside ``[dense, dense + 4 * size)``, to the byte). Monitors check every
AXI burst (INCR, no 4 KB crossing, in-flight limits, R never stalled) and count every beat; the
block's own ``traffic`` counters must equal those counts, and the beats must equal what the design
promises: ``ceil(words / lanes)`` pair beats, one dense read per accepted pair, and one write beat
per whole region beat, one for a partial last beat and one per accepted pair. The testbench
:class:`DramScatterTB` is the host device :mod:`scripts.sim.devices.compress_dram`'s;
``measure_traffic`` awaits its session, whose measurements ``testbenches/compress/bench_compress.py``
tabulates.
"""


import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge
from cocotbext.axi.constants import AxiResp

from golden.compress import topk_compress
from scripts.sim import knobs
from scripts.sim.devices.compress_dram import GUARD_BYTES, DramScatterTB, dram_scatter_traffic, flat_words
from scripts.sim.runner import params_from_env, run_cocotb
from scripts.sim.stream import unpack
from testbenches.compress.tb import (
    CutBursts,
    check_rejected,
    dram_scatter_config,
    errors_layout,
    idle_after_reset,
    random_values,
    traffic_layout,
)

MODULE = __name__
RATIOS = (0.001, 0.01, 0.1)
# Which directions fail on the faulty dense beat, per ``axi_fault`` case.
DENSE_FAULT_KINDS = {"dense_read": ("read",), "zero_fill_write": ("read", "write"), "rmw_write": ("write",)}


def topk_pairs(rng, size, ratio, value_format):
    """Realistic pairs: ``golden.compress.topk_compress`` of a random gradient (ascending indices)."""
    grad = (rng.standard_normal(size) * np.exp2(rng.integers(-6, 6, size))).astype(np.float32)
    return topk_compress(grad, ratio=ratio, block=1024, value_format=value_format)


def adversarial_cases(rng, tb):
    """(label, words, size, count, sorted): index patterns that stress the hazard table, and bad input."""
    fmt, e = tb.value_format, tb.per_beat
    cases = []

    def add(label, indices, size, *, count=None, promised_sorted=False, values=None):
        indices = np.asarray(indices, np.int64)
        values = random_values(rng, len(indices), fmt) if values is None else values
        words = flat_words(indices, values, fmt)
        cases.append((label, words, size, len(words) if count is None else count, promised_sorted))

    size = int(rng.integers(1000, 3000))
    beat = int(rng.integers(0, size // e))
    add("one_beat", beat * e + rng.integers(0, e, 60), size)
    add("one_index", np.full(40, int(rng.integers(0, size))), size, promised_sorted=True)
    start = int(rng.integers(0, size - 200))
    add("consecutive", np.arange(start, start + 200), size, promised_sorted=True)
    add("random_duplicates", rng.integers(0, size, 300), size)
    tail_size = int(rng.integers(1, e)) if e > 1 else 1
    add("shorter_than_a_beat", rng.integers(0, tail_size, 20), tail_size)
    bad = rng.integers(0, size, 120)
    far = rng.random(120) < 0.3
    bad[far] = rng.integers(size, 1 << 32, int(far.sum()), dtype=np.int64)
    bad[-1] = size  # the first index out of range
    add("out_of_range", bad, size)
    add("excess", rng.integers(0, size, 80), size, count=50)
    add("missing", rng.integers(0, size, 30), size, count=45)
    add("unsorted_promised_sorted", rng.integers(0, size, 100), size, promised_sorted=True)
    add("empty", [], size)
    add("empty_but_declared", [], size, count=7)
    add("size_zero", rng.integers(0, 50, 10), 0)
    return cases


@cocotb.test()
@cocotb.parametrize(stall=[False, True])
async def scatter_bit_exact(dut, stall):
    """Top-K pairs at 0.1 %, 1 % and 10 %, adversarial index patterns and bad input, bit-exact in DRAM."""
    salt = int(stall)
    tb = DramScatterTB(dut, stall=stall, salt=salt)
    rng = knobs.rng(20 + salt)
    await tb.reset()
    for n in range(knobs.vectors(len(RATIOS), limit=30)):  # whole runs of 1500..4000 parameters
        ratio = RATIOS[n % len(RATIOS)]
        size = int(rng.integers(1500, 4000))
        indices, values = topk_pairs(rng, size, ratio, tb.value_format)
        await tb.run(rng, flat_words(indices, values, tb.value_format), size, len(indices), True,
                     {"ratio": ratio, "size": size})
    for label, words, size, count, promised_sorted in adversarial_cases(rng, tb):
        await tb.run(rng, words, size, count, promised_sorted, {"case": label, "size": size})
    await tb.finish()


async def _fault_run(dut, where):
    """One run with an AXI error at ``where`` (see ``axi_fault``): it ends, flagged, guards intact."""
    rng = knobs.rng(31)
    params = params_from_env()
    fmt = params["value_format"]
    size = int(rng.integers(1500, 3000))
    indices = np.sort(rng.choice(size, 200, replace=False))
    values = random_values(rng, 200, fmt)
    words = flat_words(indices, values, fmt)
    pair_beat_bytes = 8 * params["lanes"]
    beat_bytes = params["data_width"] // 8
    # Each RAM's first allocation is at offset 0 (pairs) and GUARD_BYTES (dense region).
    first_bad = int(rng.integers(0, -(-len(words) // params["lanes"])))
    golden_words = None
    kwargs = {}
    if where == "pairs":
        bad = first_bad * pair_beat_bytes
        kwargs["pair_faults"] = [(bad, bad + pair_beat_bytes, AxiResp.SLVERR)]
        golden_words = words.copy()
        golden_words[first_bad * params["lanes"]:] = 0   # the reader's documented zero fill
    else:
        element = int(indices[int(rng.integers(0, len(indices)))])
        address = GUARD_BYTES + element * 4 // beat_bytes * beat_bytes
        fault = (address, address + beat_bytes, AxiResp.DECERR)
        kwargs["dense_fault_kinds"] = DENSE_FAULT_KINDS[where]
        if where != "rmw_write":
            kwargs["dense_faults"] = [fault]
    tb = DramScatterTB(dut, **kwargs)
    await tb.reset()
    if where == "rmw_write":
        async def arm():
            # Reads start only after the zero fill, so from then on the beat fails on RMW writes only.
            while not tb.dense_reads.bursts:
                await RisingEdge(tb.clock)
            tb.dense_ram.faults.append(fault)

        cocotb.start_soon(arm())
    measured = await tb.run(rng, words, size, len(words), True, {"fault": where}, golden_words=golden_words,
                            check_dense=False)
    report = measured["report"]
    flags = (report["read_error"], report["write_error"])
    wanted = (1, 0) if where in ("pairs", "dense_read") else (0, 1)
    assert flags == wanted, f"{where}: error flags {flags}, expected {wanted}; {knobs.describe()}"
    await tb.finish()


@cocotb.test()
@cocotb.parametrize(where=["pairs", "dense_read", "zero_fill_write", "rmw_write"])
async def axi_fault(dut, where):
    """SLVERR/DECERR on the pair stream, an RMW read, the zero fill or an RMW write: flagged, the run ends."""
    await _fault_run(dut, where)


@cocotb.test()
async def measure_traffic(dut):
    """Pairs per cycle and DRAM bytes per parameter at 0.1 %, 1 %, 10 % (random sorted indices), no stalls.

    The session :func:`scripts.sim.devices.compress_dram.dram_scatter_traffic` that
    ``bench_compress`` runs, on a shard of ``NEARTRAIN_VECTORS`` elements (default 16384); every
    run checked bit for bit.
    """
    await dram_scatter_traffic(dut, {"size": knobs.vectors(16384)})


@cocotb.test()
async def reset_mid_run(dut):
    """Reset while bursts are open (zero fill, pair reads or RMWs), under stalls; the next run equals golden.

    The reset is the block's and its two ``AxiRam``s' (``dut.rst``), as AXI requires. Each round
    starts a run of Top-K pairs with pauses on every AXI channel and on the command, and raises
    reset at a random cycle at which a burst is open (it is cut): zero-fill writes, pair reads
    or RMW reads and writes, as the cycle falls. Then no AXI valid may rise until the next
    command; ``busy``, the error flags, the counters and the traffic counters read 0; and a
    new run (``DramScatterTB.run``) must leave exactly the golden dense region, counters and
    traffic (beats equal to the monitors' and to what the run promises, so nothing of the cut
    run comes back), guards intact, within its cycle bound.
    """
    tb = DramScatterTB(dut, stall=True, salt=5)
    rng = knobs.rng(60)
    cut = CutBursts(tb.dense_reads, tb.dense_writes, tb.pair_reads)
    await tb.reset()
    for round_ in range(4):
        size = int(rng.integers(1500, 4000))
        indices, values = topk_pairs(rng, size, 0.1, tb.value_format)
        words = flat_words(indices, values, tb.value_format)
        pairs, dense = tb.place(rng, words, size)
        tb.cmd.send_nowait({"dense": dense, "size": size, "pairs": pairs, "words": len(words),
                            "count": len(words), "sorted": 1})
        cut.cut = 0
        # Early rounds cut the zero fill, later ones the scatter.
        after = (1, 30) if round_ % 2 == 0 else (size // tb.per_beat + 50, size // tb.per_beat + 400)
        await tb.reset_mid_transfer(rng, after=after, drivers=[tb.cmd, cut], until=cut.burst_open)
        assert cut.cut, f"round {round_}: no burst open at the reset; {knobs.describe()}"
        await idle_after_reset(tb, ["m_axi_dense", "m_axi_pairs"])
        errors = unpack(errors_layout(), int(dut.errors.value))
        traffic = unpack(traffic_layout(), int(dut.traffic.value))
        flags = [int(getattr(dut, name).value) for name in ("busy", "status", "read_error", "write_error")]
        assert not any(errors.values()) and not any(traffic.values()) and not any(flags), (
            f"round {round_}: counters {errors}, traffic {traffic}, busy/status/errors {flags} after the "
            f"reset; {knobs.describe()}")
        size = int(rng.integers(1000, 3000))
        indices, values = topk_pairs(rng, size, 0.01 if round_ % 2 else 0.1, tb.value_format)
        await tb.run(rng, flat_words(indices, values, tb.value_format), size, len(indices), True,
                     {"round": round_, "after": "reset", "size": size})
    await tb.finish()


# ---- pytest runners ----


CONFIGS = [
    dram_scatter_config(1, 128, "f16", rmw_depth=4),
    dram_scatter_config(4, 512, "f32"),
    pytest.param(dram_scatter_config(8, 512, "f16"), marks=pytest.mark.slow),
    pytest.param(dram_scatter_config(16, 1024, "f32", rmw_depth=32), marks=pytest.mark.slow),
]


def _id(params):
    return "L{lanes}-D{data_width}-{value_format}-R{rmw_depth}".format(**params)


@pytest.mark.parametrize("params", CONFIGS, ids=_id)
@pytest.mark.parametrize("testcase", ["scatter_bit_exact", "axi_fault"])
def test_dram_scatter(params, testcase):
    run_cocotb("topk_dram_scatter", MODULE, params=params, testcase=testcase)


@pytest.mark.parametrize("params", CONFIGS, ids=_id)
def test_dram_scatter_reset(params):
    """Reset in the middle of runs, with bursts open (``reset_mid_run``)."""
    run_cocotb("topk_dram_scatter", MODULE, params=params, testcase="reset_mid_run")


@pytest.mark.filterwarnings("ignore::amaranth.hdl._ir.UnusedElaboratable")
def test_parameters_are_validated():
    from rtl.compress.dram_scatter import DRAMScatter

    check_rejected(DRAMScatter, [
        ({"lanes": 3}, "lanes"),
        ({"data_width": 32}, "data_width"),
        ({"data_width": 384}, "data_width"),
        ({"rmw_depth": 12}, "rmw_depth"),
        ({"rmw_depth": 128}, "rmw_depth"),
        ({"value_format": "bf16"}, "value_format"),
    ])
