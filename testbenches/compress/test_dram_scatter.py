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
per whole region beat, one for a partial last beat and one per accepted pair. ``measure_traffic`` writes its
measurements for ``testbenches/compress/bench_compress.py``.
"""

import logging
import types

import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge, with_timeout
from cocotbext.axi.constants import AxiResp

from golden.compress import encode_pairs, scatter_stream, topk_compress
from golden.compress.registers import ERROR_NAMES
from scripts.sim import channel, knobs
from scripts.sim.axi import BurstMonitor, FaultyAxiRam, random_pauses_all
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSource, never, random_pauses, stream_layout, unpack
from scripts.sim.tb import ClockedTB
from testbenches.compress.tb import (
    CLOCK_NS,
    PAUSE_PROBABILITY,
    CutBursts,
    dram_scatter_config,
    errors_layout,
    idle_after_reset,
    random_values,
    traffic_layout,
)

MODULE = __name__
RAM_SIZE = 1 << 20
GUARD_BYTES = 256
RATIOS = (0.001, 0.01, 0.1)
# Which directions fail on the faulty dense beat, per ``axi_fault`` case.
DENSE_FAULT_KINDS = {"dense_read": ("read",), "zero_fill_write": ("read", "write"), "rmw_write": ("write",)}


class DramScatterTB(ClockedTB):
    def __init__(self, dut, *, stall=False, salt=0, dense_faults=(), pair_faults=(),
                 dense_fault_kinds=("read", "write")):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params = params_from_env()
        self.lanes, self.value_format = params["lanes"], params["value_format"]
        self.beat_bytes = params["data_width"] // 8
        self.per_beat = self.beat_bytes // 4
        self.pair_beat_bytes = 8 * self.lanes
        depth = params["rmw_depth"]
        self.dense_ram = FaultyAxiRam(dut, "m_axi_dense_", self.clock, dut.rst, size=RAM_SIZE,
                                      faults=dense_faults, in_flight=depth + params["max_outstanding"] + 2)
        # FaultyAxiRam guards both directions; undo the guard of a direction that must not fail.
        if "write" not in dense_fault_kinds:
            write_if = self.dense_ram.write_if
            write_if._write = types.MethodType(type(write_if)._write, write_if)
        if "read" not in dense_fault_kinds:
            read_if = self.dense_ram.read_if
            read_if._read = types.MethodType(type(read_if)._read, read_if)
        self.pair_ram = FaultyAxiRam(dut, "m_axi_pairs_", self.clock, dut.rst, size=RAM_SIZE,
                                     faults=pair_faults, in_flight=params["max_outstanding"] + 2)
        for ram in (self.dense_ram, self.pair_ram):
            for interface in (ram.read_if, ram.write_if):
                interface.log.setLevel(logging.WARNING)
            if stall:
                ram.set_pause_generators(random_pauses_all(knobs.rng(300 + salt), PAUSE_PROBABILITY))
        outstanding = params["max_outstanding"]
        self.dense_reads = BurstMonitor(dut, "m_axi_dense", self.clock, direction="read",
                                        data_width=8 * self.beat_bytes, max_burst=1, max_outstanding=depth)
        self.dense_writes = BurstMonitor(dut, "m_axi_dense", self.clock, direction="write",
                                         data_width=8 * self.beat_bytes, max_burst=params["max_burst"],
                                         max_outstanding=max(depth, outstanding))
        self.pair_reads = BurstMonitor(dut, "m_axi_pairs", self.clock, direction="read",
                                       data_width=8 * self.pair_beat_bytes, max_burst=params["max_burst"],
                                       max_outstanding=outstanding)
        pause = random_pauses(knobs.rng(100 + salt), PAUSE_PROBABILITY) if stall else never()
        self.cmd = StreamSource(dut, "cmd", self.clock, stream_layout(self.component, "cmd"), pause=pause)
        self.reports = []
        self.w_beats = 0
        self.next_pairs = 0
        self.next_dense = 0
        cocotb.start_soon(self._watch())

    async def _watch(self):
        dut = self.dut
        while True:
            await RisingEdge(self.clock)
            if dut.m_axi_dense__wvalid.value and dut.m_axi_dense__wready.value:
                self.w_beats += 1
            if dut.m_axi_pairs__awvalid.value or dut.m_axi_pairs__wvalid.value:
                raise AssertionError("the pair port drove AW or W")
            if dut.done.value:
                self.reports.append({
                    "errors": unpack(errors_layout(), int(dut.errors.value)),
                    "status": int(dut.status.value),
                    "read_error": int(dut.read_error.value), "write_error": int(dut.write_error.value),
                    "traffic": unpack(traffic_layout(), int(dut.traffic.value)), "cycle": self.cycle,
                })

    def _allocate(self, attribute, nbytes, align):
        offset = getattr(self, attribute)
        span = -(-max(nbytes, 1) // align) * align
        setattr(self, attribute, offset + span + align * 3)
        assert getattr(self, attribute) < RAM_SIZE, "test data overflow the RAM model"
        return offset

    def place(self, rng, words, size):
        """Write the pair words and a garbage-filled dense region with guards; return both addresses."""
        raw = np.asarray(words, np.uint64).astype("<u8").tobytes()
        pairs = self._allocate("next_pairs", len(raw), self.pair_beat_bytes)
        self.pair_ram.write(pairs, raw)
        # The region starts a few beats in, so guards on both sides lie in the same RAM.
        dense = self._allocate("next_dense", 4 * size + 2 * GUARD_BYTES, self.beat_bytes) + GUARD_BYTES
        self.dense_ram.write(dense - GUARD_BYTES, rng.integers(0, 256, 4 * size + 2 * GUARD_BYTES,
                                                              dtype=np.uint8).tobytes())
        return pairs, dense

    async def run(self, rng, words, size, count, promised_sorted, label, *, golden_words=None,
                  check_dense=True):
        """Run one command and check it; return the measured traffic."""
        words = np.asarray(words, np.uint64)
        pairs, dense = self.place(rng, words, size)
        guards = (self.dense_ram.read(dense - GUARD_BYTES, GUARD_BYTES),
                  self.dense_ram.read(dense + 4 * size, GUARD_BYTES))
        seen = words if golden_words is None else golden_words
        expected, errors = scatter_stream(seen, size, value_format=self.value_format, pair_count=count,
                                          sorted_within_chunk=promised_sorted)
        marks = (len(self.reports), self.w_beats, len(self.dense_reads.responses),
                 len(self.dense_writes.bursts), len(self.pair_reads.responses))
        start = self.cycle
        self.cmd.send_nowait({"dense": dense, "size": size, "pairs": pairs, "words": len(words),
                              "count": count, "sorted": int(promised_sorted)})
        beats = -(-4 * size // self.beat_bytes)
        budget = 40 * (len(words) + beats + 50)

        async def finished():
            while len(self.reports) == marks[0]:
                await RisingEdge(self.clock)

        where = f"{label}; {knobs.describe()}"
        try:
            await with_timeout(finished(), budget * CLOCK_NS, "ns")
        except Exception as error:
            raise AssertionError(f"no done within {budget} cycles: {self.port_state()}; {where}") from error
        report = self.reports[marks[0]]
        wanted = {name: getattr(errors, name) for name in ERROR_NAMES}
        assert report["errors"] == wanted, f"errors {report['errors']}, expected {wanted}: {where}"
        assert report["status"] == int(errors.status), f"status {report['status']:#x}: {where}"
        after = (self.dense_ram.read(dense - GUARD_BYTES, GUARD_BYTES),
                 self.dense_ram.read(dense + 4 * size, GUARD_BYTES))
        assert guards == after, f"a guard byte changed: {where}"
        end = dense + beats * self.beat_bytes
        for _, address, length in self.dense_writes.bursts[marks[3]:]:
            assert dense <= address and address + length * self.beat_bytes <= end, \
                f"write burst at {address:#x} of {length} beats outside the region's beats: {where}"
        if check_dense:
            actual = np.frombuffer(self.dense_ram.read(dense, 4 * size), "<u4")
            mismatch = np.flatnonzero(actual != expected.view(np.uint32))
            assert not mismatch.size, (
                f"{mismatch.size} elements differ, first {mismatch[0]}: {actual[mismatch[0]]:#010x} expected "
                f"{expected.view(np.uint32)[mismatch[0]]:#010x}: {where}")
        measured = {
            "cycles": report["traffic"]["cycles"],
            "dense_reads": len(self.dense_reads.responses) - marks[2],
            "dense_writes": self.w_beats - marks[1],
            "pair_reads": len(self.pair_reads.responses) - marks[4],
        }
        assert measured == {**report["traffic"], "cycles": measured["cycles"]}, \
            f"traffic counters {report['traffic']}, monitors {measured}: {where}"
        assert 0 < measured["cycles"] <= report["cycle"] - start, \
            f"cycle counter {measured['cycles']}: {where}"
        if not (report["read_error"] or report["write_error"]):
            received = min(count, len(words))
            accepted = received - errors.out_of_range - errors.unsorted
            promised = {"dense_reads": accepted, "dense_writes": size // self.per_beat
                        + int(size % self.per_beat != 0) + accepted,
                        "pair_reads": -(-len(words) // self.lanes)}
            assert {key: measured[key] for key in promised} == promised, \
                f"beats {measured}, expected {promised}: {where}"
        first_read = [cycle for cycle, _, _ in self.dense_reads.bursts if cycle > start]
        measured.update(size=size, words=len(words), report=report, pairs=int(min(count, len(words))),
                        scatter_cycles=report["cycle"] - first_read[0] if first_read else 0)
        return measured

    def port_state(self):
        """The handshake signals of every port and the beats seen, for a timeout report."""
        dut = self.dut
        names = ["busy", "cmd__valid", "cmd__ready"] + [f"m_axi_{port}__{name}" for port in ("dense", "pairs")
                                                     for name in ("awvalid", "awready", "wvalid", "wready",
                                                                  "bvalid", "arvalid", "arready", "rvalid",
                                                                  "rready")]
        state = {name: int(getattr(dut, name).value) for name in names}
        state.update(w_beats=self.w_beats, dense_r=len(self.dense_reads.responses),
                     dense_ar=len(self.dense_reads.bursts), dense_aw=len(self.dense_writes.bursts),
                     dense_b=len(self.dense_writes.responses), pair_r=len(self.pair_reads.responses))
        return state

    async def finish(self):
        await self.cycles(20)
        assert not self.dut.busy.value, "busy stays high after the last run"
        for monitor in (self.dense_reads, self.dense_writes, self.pair_reads):
            assert not monitor.violations, f"{monitor.violations[:5]}; {knobs.describe()}"


def flat_words(indices, values, value_format):
    return encode_pairs(np.asarray(indices, np.int64), values, value_format=value_format)


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

    Shard size ``NEARTRAIN_VECTORS`` (default 16384); the results are the reply.
    """
    tb = DramScatterTB(dut)
    rng = knobs.rng(41)
    await tb.reset()
    size = knobs.vectors(16384)
    results = []
    for ratio in (*RATIOS, 0.5):
        n = max(1, int(round(ratio * size)))
        indices = np.sort(rng.choice(size, n, replace=False))
        values = random_values(rng, n, tb.value_format)
        measured = await tb.run(rng, flat_words(indices, values, tb.value_format), size, n, True,
                                {"ratio": ratio, "size": size})
        measured.pop("report")
        measured.update(ratio=ratio, beat_bytes=tb.beat_bytes, pair_beat_bytes=tb.pair_beat_bytes,
                        lanes=tb.lanes)
        results.append(measured)
        dut._log.info("bench: %s", measured)
    await tb.finish()
    channel.reply(results)


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
    import gc

    from rtl.compress.dram_scatter import DRAMScatter

    with pytest.raises(ValueError, match="lanes"):
        DRAMScatter(lanes=3)
    with pytest.raises(ValueError, match="data_width"):
        DRAMScatter(data_width=32)
    with pytest.raises(ValueError, match="data_width"):
        DRAMScatter(data_width=384)
    with pytest.raises(ValueError, match="rmw_depth"):
        DRAMScatter(rmw_depth=12)
    with pytest.raises(ValueError, match="rmw_depth"):
        DRAMScatter(rmw_depth=128)
    with pytest.raises(ValueError, match="value_format"):
        DRAMScatter(value_format="bf16")
    gc.collect()  # the half-built components warn now, inside this test's filter
