"""``topk_axi_decompressor`` (``rtl.compress.axi_decompressor.AXIChunkDecompressor``): cocotb
tests (collected by cocotb) and their pytest runners (at the bottom).

Chunked wire streams (well formed at 0.1 %, 1 % and 10 % density, and corrupted as in
``test_chunk_decompressor``) are written into cocotbext-axi's ``AxiRam`` and decompressed from
there, with random stalls on every AXI channel, on the command stream and on the output. The dense
output and the error counters must equal :func:`golden.compress.scatter_stream` bit for bit. A
monitor counts every AXI beat: the DRAM bytes of fused-mode decompression are *measured* as the
read beats times the beat width, and the test asserts that every beat read lies inside the pair
stream and that nothing is written, i.e. that no dense gradient goes through DRAM. ``traffic``
writes its counts for ``testbenches/compress/bench_compress.py``.
"""

import logging

import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge, with_timeout
from cocotbext.axi.constants import AxiResp

from golden.compress import chunk_count
from scripts.sim import channel, knobs
from scripts.sim.axi import BurstMonitor, FaultyAxiRam, random_pauses_all
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout, unpack
from scripts.sim.tb import ClockedTB, Scoreboard
from testbenches.compress.tb import (
    AXI_PARAMS,
    CLOCK_NS,
    PAUSE_PROBABILITY,
    RATIOS,
    CutBursts,
    check_cleared,
    check_report,
    corrupted_stream,
    errors_layout,
    expect_dense_stream,
    idle_after_reset,
    random_size,
    stall_salt,
    top_k_stream,
    wait_report,
)

MODULE = __name__
RAM_SIZE = 1 << 22
DEFAULT_TRANSFERS = 6
CORRUPTIONS = ("out_of_range", "truncated", "excess", "unsorted", "empty_transfer")


class AxiDecompressorTB(ClockedTB):
    def __init__(self, dut, *, stall=False, salt=0, faults=()):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params = params_from_env()
        self.lanes, self.chunk_size = params["lanes"], params["chunk_size"]
        self.out_lanes, self.value_format = params["out_lanes"], params["value_format"]
        self.beat_bytes = 8 * self.lanes
        self.ram = FaultyAxiRam(dut, "m_axi_", self.clock, dut.rst, size=RAM_SIZE, faults=faults,
                                in_flight=params["max_outstanding"] + 2)
        for interface in (self.ram.read_if, self.ram.write_if):
            interface.log.setLevel(logging.WARNING)
        pause = PAUSE_PROBABILITY if stall else 0
        if stall:
            self.ram.set_pause_generators(random_pauses_all(knobs.rng(300 + salt), pause))
        self.monitor = BurstMonitor(dut, "m_axi", self.clock, direction="read",
                                    data_width=8 * self.beat_bytes, max_burst=params["max_burst"],
                                    max_outstanding=params["max_outstanding"])
        self.cmd = StreamSource(dut, "cmd", self.clock, stream_layout(self.component, "cmd"),
                                pause=random_pauses(knobs.rng(100 + salt), pause) if stall else never())
        self.sink = StreamSink(dut, "o", self.clock, stream_layout(self.component, "o"),
                               backpressure=random_pauses(knobs.rng(200 + salt), pause) if stall else never())
        self.scoreboard = Scoreboard("topk_axi_decompressor o")
        self.reports = []
        self.write_cycles = 0   # cycles with AWVALID or WVALID high
        self.write_beats = 0    # W handshakes
        self.next_offset = 0
        cocotb.start_soon(self._watch())

    async def _watch(self):
        layout = errors_layout()
        dut = self.dut
        while True:
            await RisingEdge(self.clock)
            if dut.m_axi__awvalid.value or dut.m_axi__wvalid.value:
                self.write_cycles += 1
            if dut.m_axi__wvalid.value and dut.m_axi__wready.value:
                self.write_beats += 1
            if dut.done.value:
                self.reports.append((unpack(layout, int(dut.errors.value)), int(dut.status.value),
                                     self.monitor.cycle))

    def place(self, words):
        """Write ``words`` into the RAM at the next free beat-aligned offset (4 KB-crossing allowed)."""
        offset = self.next_offset
        raw = np.asarray(words, np.uint64).astype("<u8").tobytes()
        self.ram.write(offset, raw)
        span = -(-len(raw) // self.beat_bytes) * self.beat_bytes
        self.next_offset = offset + span + self.beat_bytes * (1 + len(words) % 5)
        assert self.next_offset < RAM_SIZE, "test streams overflow the RAM model"
        return offset, span

    def expect(self, words, size, promised_sorted, label):
        return expect_dense_stream(self.scoreboard, words, size, promised_sorted, label,
                                   value_format=self.value_format, chunk_size=self.chunk_size,
                                   out_lanes=self.out_lanes)

    async def transfer(self, words, size, promised_sorted, label, *, golden_words=None):
        """Place, decompress and check one stream; return its measured AXI traffic.

        ``golden_words`` is what the decompressor is expected to see (``words`` unless a read fault
        turns part of the stream into zeros).
        """
        offset, span = self.place(words)
        expected = self.expect(words if golden_words is None else golden_words, size, promised_sorted, label)
        bursts, reports = len(self.monitor.bursts), len(self.reports)
        writes, write_cycles = self.write_beats, self.write_cycles
        self.cmd.send_nowait({"address": offset, "words": len(words), "size": size,
                              "sorted": int(promised_sorted)})
        budget = 12 * (len(words) + chunk_count(size, self.chunk_size) + 100) + 4 * size // self.out_lanes
        await wait_report(self, reports, budget)
        check_report(self.reports[reports], expected, label)
        # Traffic of this transfer: every read burst inside the stream's beats, no write at all.
        read_beats = 0
        for _, address, beats in self.monitor.bursts[bursts:]:
            assert offset <= address and address + beats * self.beat_bytes <= offset + span, \
                f"{label}: read burst at {address:#x} of {beats} beats outside the pair stream " \
                f"[{offset:#x}, {offset + span:#x}); {knobs.describe()}"
            read_beats += beats
        stream_beats = span // self.beat_bytes
        assert read_beats == stream_beats, \
            f"{label}: {read_beats} beats read for a {stream_beats}-beat stream; {knobs.describe()}"
        written = self.write_beats - writes
        assert written == 0 and self.write_cycles == write_cycles, \
            f"{label}: the decompressor drove AW/W ({written} W beats); {knobs.describe()}"
        return {"size": size, "words": len(words), "read_bytes": read_beats * self.beat_bytes,
                "write_bytes": written * self.beat_bytes}

    async def drain(self, size_total):
        async def receive():
            for _ in range(self.scoreboard.pending):
                self.scoreboard.check(await self.sink.recv())

        await with_timeout(receive(), (6 * size_total // self.out_lanes + 3000) * CLOCK_NS, "ns")
        await self.cycles(50)
        while not self.sink.empty():
            self.scoreboard.check(self.sink.queue.popleft())
        self.scoreboard.check_complete()
        assert not self.dut.busy.value, "busy stays high after the last transfer"
        assert not self.monitor.violations, f"{self.monitor.violations[:5]}; {knobs.describe()}"


@cocotb.test()
@cocotb.parametrize(stall=[False, True])
async def streams_from_memory(dut, stall):
    """Well-formed and corrupted streams read over AXI: bit-exact output and counters, reads only."""
    salt = stall_salt(stall, stall)
    tb = AxiDecompressorTB(dut, stall=stall, salt=salt)
    rng = knobs.rng(20 + salt)
    await tb.reset()
    total = 0
    for n in range(knobs.vectors(DEFAULT_TRANSFERS, limit=60)):
        ratio = RATIOS[n % len(RATIOS)]
        size = random_size(rng, tb.chunk_size, int(rng.integers(1, 4)))
        promised_sorted = bool(n % 2)
        words, *_ = top_k_stream(rng, size, tb.chunk_size, ratio, tb.value_format, promised_sorted)
        await tb.transfer(words, size, promised_sorted, {"transfer": n, "ratio": ratio, "size": size})
        total += size
    for n, kind in enumerate(CORRUPTIONS):
        size = random_size(rng, tb.chunk_size, int(rng.integers(1, 4)))
        words, promised_sorted = corrupted_stream(rng, kind, size, tb.chunk_size, tb.value_format)
        await tb.transfer(words, size, promised_sorted, {"corruption": n, "kind": kind, "size": size})
        total += size
    await tb.drain(total)
    assert dut.read_error.value == 0


@cocotb.test()
async def read_fault(dut):
    """A SLVERR in the pair stream: flagged, the rest reads as zero words, nothing hangs."""
    rng = knobs.rng(31)
    params = params_from_env()
    chunk_size, lanes = params["chunk_size"], params["lanes"]
    size = random_size(rng, chunk_size, 3)
    words, *_ = top_k_stream(rng, size, chunk_size, 0.1, params["value_format"], False)
    beat_bytes = 8 * lanes
    beats = -(-len(words) // lanes)
    first_bad = int(rng.integers(0, beats))
    # The stream is placed at offset 0 (the first transfer of this test).
    faults = [(first_bad * beat_bytes, (first_bad + 1) * beat_bytes, AxiResp.SLVERR)]
    tb = AxiDecompressorTB(dut, faults=faults)
    await tb.reset()
    seen = words.copy()
    seen[first_bad * lanes:] = 0  # the reader delivers zeros from the first failing beat on
    await tb.transfer(words, size, False, {"fault_beat": first_bad, "size": size}, golden_words=seen)
    await tb.drain(size)
    assert dut.read_error.value == 1 and dut.read_error_resp.value == int(AxiResp.SLVERR), \
        f"read_error={dut.read_error.value} resp={dut.read_error_resp.value}; {knobs.describe()}"


@cocotb.test()
async def traffic(dut):
    """Measured DRAM bytes per parameter of fused-mode decompression at 0.1 %, 1 % and 10 %.

    One shard of ``NEARTRAIN_VECTORS`` chunks (default 16) per ratio, sorted Top-K pairs; results to
    the reply.
    """
    tb = AxiDecompressorTB(dut)
    rng = knobs.rng(41)
    await tb.reset()
    size = tb.chunk_size * knobs.vectors(16)
    results = []
    for ratio in RATIOS:
        words, indices, *_ = top_k_stream(rng, size, tb.chunk_size, ratio, tb.value_format, True)
        start = tb.cycle
        measured = await tb.transfer(words, size, True, {"ratio": ratio, "size": size})
        await tb.drain(size)
        measured.update(ratio=ratio, pairs=len(indices), chunk_size=tb.chunk_size, beat_bytes=tb.beat_bytes,
                        cycles=tb.cycle - start, bytes_per_param=measured["read_bytes"] / size)
        results.append(measured)
        dut._log.info("traffic: %s", measured)
    channel.reply(results)


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset while read bursts are open, under stalls; the next transfer equals golden, alone.

    The reset is the block's and its ``AxiRam``'s (``dut.rst``), as AXI requires. Each round
    starts a multi-chunk transfer with pauses on every AXI channel, on the command and on the
    output, and raises reset at a random cycle at which a read burst is open (it is cut).
    Then no AXI valid may rise until the next command; ``read_error``, the counters and the
    status bits read 0; and a new transfer must give exactly its golden dense chunks and
    counters, reading exactly its stream's beats (no burst of the cut transfer comes back)
    and writing nothing, within a cycle bound, with ``busy`` falling.
    """
    tb = AxiDecompressorTB(dut, stall=True, salt=9)
    rng = knobs.rng(50)
    cut = CutBursts(tb.monitor)
    await tb.reset()
    for round_ in range(3):
        size = random_size(rng, tb.chunk_size, 4)
        words, *_ = top_k_stream(rng, size, tb.chunk_size, 0.1, tb.value_format, True)
        offset, _ = tb.place(words)
        tb.cmd.send_nowait({"address": offset, "words": len(words), "size": size, "sorted": 1})
        cut.cut = 0
        await tb.reset_mid_transfer(rng, after=(1, 40), drivers=[tb.cmd, tb.sink, cut], until=cut.burst_open)
        assert cut.cut, f"round {round_}: no read burst open at the reset; {knobs.describe()}"
        await idle_after_reset(tb, ["m_axi"])
        check_cleared(dut, f"round {round_}", "read_error")
        size = random_size(rng, tb.chunk_size, int(rng.integers(1, 4)))
        words, *_ = top_k_stream(rng, size, tb.chunk_size, RATIOS[round_], tb.value_format, False)
        await tb.transfer(words, size, False, {"round": round_, "after": "reset", "size": size})
        await tb.drain(size)


# ---- pytest runners ----

@pytest.mark.parametrize("testcase", ["streams_from_memory", "read_fault"])
def test_axi_decompressor(testcase):
    run_cocotb("topk_axi_decompressor", MODULE, params=AXI_PARAMS, testcase=testcase)


def test_axi_decompressor_reset():
    """Reset in the middle of transfers, with read bursts open (``reset_mid_transfer``)."""
    run_cocotb("topk_axi_decompressor", MODULE, params=AXI_PARAMS, testcase="reset_mid_transfer")
