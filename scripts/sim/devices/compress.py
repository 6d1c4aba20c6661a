"""Host device of the compress blocks: their testbenches, the scatter rate and the fused-mode traffic.

:class:`CompressTB` is a block's clock, reset, source on ``i`` and sink on ``o``;
:class:`EngineTB` adds ``topk_scatter``'s parameters. :class:`AxiDecompressorTB` is
``topk_axi_decompressor`` reading its pair streams from an ``AxiRam``, every burst monitored.
The pair values, the well-formed Top-K wire streams, the scatter-stream beats of a chunk and the
golden dense beats (:func:`golden.compress.scatter`, :func:`golden.compress.scatter_stream`) are
made here. The sessions ``compress.scatter_throughput`` (one chunk at full rate, every output beat
checked) and ``compress.decompressor_traffic`` (AXI bytes per parameter of fused-mode
decompression) run in a simulation through :func:`run_scatter_throughput` and
:func:`run_decompressor_traffic` (``bench_compress``; the blocks' tests ``throughput`` and
``traffic`` await the same sessions). The other compress tests and their shared pieces are in
``testbenches/compress/``.
"""

import logging

import cocotb
import numpy as np
from amaranth.lib import data
from cocotb.triggers import RisingEdge, with_timeout

from golden.compress import (
    adversarial_indices,
    chunk_count,
    encode_stream,
    group_by_chunk,
    scatter,
    scatter_stream,
    value_dtype,
)
from golden.compress.registers import ERROR_NAMES, error_fields
from golden.fp.vectors import random_operands
from scripts.sim import knobs
from scripts.sim.axi import BurstMonitor, FaultyAxiRam, random_pauses_all
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout, unpack
from scripts.sim.tb import ClockedTB, Scoreboard

__all__ = ["PAUSE_PROBABILITY", "CLOCK_NS", "RATIOS", "AXI_PARAMS", "random_values", "value_bits",
           "padded_beats", "dense_beats", "chunk_beats", "errors_layout", "expect_dense_stream",
           "wait_report", "check_report", "top_k_stream", "stall_salt", "CompressTB", "EngineTB",
           "AxiDecompressorTB", "SESSIONS", "scatter_throughput", "decompressor_traffic",
           "run_scatter_throughput", "run_decompressor_traffic"]

PAUSE_PROBABILITY = 0.35
CLOCK_NS = 10
# Top-K densities the well-formed streams cycle through: 0.1%, 1% and 10%.
RATIOS = (0.001, 0.01, 0.1)

# The 512-bit configuration of a SmartSSD/Alveo memory port: test_axi_decompressor.py runs
# ``topk_axi_decompressor`` on it, and bench_compress.py measures traffic on the same build.
AXI_PARAMS = {"lanes": 8, "banks": 16, "chunk_size": 1024, "out_lanes": 16, "value_format": "f32",
              "max_burst": 16, "max_outstanding": 4}
# The pair streams' RAM model of the decompressor.
DECOMPRESSOR_RAM_SIZE = 1 << 22


def random_values(rng, n, value_format):
    """``n`` pair values in ``value_format``: 30% corner cases (every class), 70% moderate normals.

    The moderate share keeps duplicate chains finite so that their rounding, not a NaN, is compared.
    """
    dtype = value_dtype(value_format)
    corner = random_operands(rng, n, value_format).view(dtype)
    magnitude = np.exp2(rng.integers(-8, 9, n)) * (1 + rng.random(n))
    moderate = (rng.choice([-1.0, 1.0], n) * magnitude).astype(dtype)
    return np.where(rng.random(n) < 0.3, corner, moderate)


def value_bits(values):
    """Raw bit patterns of float32/float16 values, as Python ints."""
    return values.view(np.uint32 if values.dtype == np.float32 else np.uint16).astype(np.int64).tolist()


def padded_beats(bits, out_lanes):
    """One chunk's dense ``bits`` as output beats, zero-padded: ``{"data": [...], "last": 0/1}`` dicts."""
    beats = -(-len(bits) // out_lanes)
    padded = np.zeros(beats * out_lanes, np.uint32)
    padded[:len(bits)] = bits
    return [{"data": padded[n * out_lanes:(n + 1) * out_lanes].astype(np.int64).tolist(),
             "last": int(n == beats - 1)} for n in range(beats)]


def dense_beats(indices, values, length, out_lanes):
    """The golden output beats of one chunk: ``{"data": [...], "last": 0/1}`` dicts."""
    return padded_beats(scatter(np.asarray(indices, np.int64), values, length).view(np.uint32), out_lanes)


def chunk_beats(rng, indices, values, length, lanes, hole_probability):
    """Scatter-stream beats of one chunk: pairs in slot order with random holes, then ``last``."""
    bits = value_bits(values)
    beats, slots = [], []
    position = 0
    while position < len(indices):
        if rng.random() < hole_probability:
            slots.append({"valid": 0})
        else:
            slots.append({"valid": 1, "index": int(indices[position]), "value": bits[position]})
            position += 1
        if len(slots) == lanes:
            beats.append({"pairs": slots, "last": 0})
            slots = []
    # The chunk end rides on the beat with the final pairs or, at random, on a beat of its own.
    if slots or not beats or rng.random() < 0.5:
        beats.append({"pairs": slots + [{"valid": 0}] * (lanes - len(slots)), "last": 0})
    beats[-1].update(last=1, length=length)
    return beats


def errors_layout():
    """The ``errors`` output as the tests read it: :mod:`golden.compress.registers`, not the RTL's layout."""
    return data.StructLayout(error_fields())


def expect_dense_stream(scoreboard, words, size, promised_sorted, label, *,
                        value_format, chunk_size, out_lanes):
    """Queue on ``scoreboard`` the golden dense beats of one decompressed wire stream; return its errors.

    The golden is :func:`golden.compress.scatter_stream`; each beat is labelled with ``label``
    plus its chunk and beat number.
    """
    dense, errors = scatter_stream(words, size, value_format=value_format, chunk_size=chunk_size,
                                   sorted_within_chunk=promised_sorted)
    bits = dense.view(np.uint32)
    for chunk in range(chunk_count(size, chunk_size)):
        beats = padded_beats(bits[chunk * chunk_size:(chunk + 1) * chunk_size], out_lanes)
        for n, beat in enumerate(beats):
            scoreboard.expect(beat, {**label, "chunk": chunk, "beat": n})
    return errors


async def wait_report(tb, reports, budget):
    """Wait, at most ``budget`` cycles, for a ``done`` report past the first ``reports`` of ``tb.reports``."""
    async def done():
        while len(tb.reports) == reports:
            await RisingEdge(tb.clock)

    await with_timeout(done(), budget * CLOCK_NS, "ns")


def check_report(report, expected, label):
    """A ``done`` report ``(errors, status, ...)`` holds the golden counters and status bits ``expected``."""
    errors, status = report[:2]
    wanted = {name: getattr(expected, name) for name in ERROR_NAMES}
    assert errors == wanted, f"{label}: errors {errors}, expected {wanted}; {knobs.describe()}"
    assert status == int(expected.status), \
        f"{label}: status {status:#x}, expected {int(expected.status):#x}; {knobs.describe()}"


def top_k_stream(rng, size, chunk_size, ratio, value_format, promised_sorted):
    """A well-formed chunked stream of about ``ratio * size`` distinct pairs: (words, indices, values)."""
    n = min(size, max(1, int(round(ratio * size)))) if size else 0
    indices = adversarial_indices("random", n, size, 1, rng) if size else np.zeros(0, np.int64)
    if not promised_sorted:
        rng.shuffle(indices)
    values = random_values(rng, n, value_format)
    indices, values, counts = group_by_chunk(indices, values, size=size, chunk_size=chunk_size,
                                             sort_within_chunk=promised_sorted)
    return encode_stream(indices, values, value_format=value_format, counts=counts), indices, values, counts


def stall_salt(idle, backpressure):
    return 2 * int(idle) + int(backpressure)


class CompressTB(ClockedTB):
    """Clock, reset, a source on ``i`` and a sink on ``o`` with the component's layouts."""

    def __init__(self, dut, *, idle=False, backpressure=False, salt=0):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params_from_env()
        self.source = StreamSource(dut, "i", self.clock, stream_layout(self.component, "i"),
                                   pause=random_pauses(knobs.rng(100 + salt), PAUSE_PROBABILITY)
                                   if idle else never())
        self.sink = StreamSink(dut, "o", self.clock, stream_layout(self.component, "o"),
                               backpressure=random_pauses(knobs.rng(200 + salt), PAUSE_PROBABILITY)
                               if backpressure else never())

    @classmethod
    async def started(cls, dut, idle, backpressure, *, salt):
        """A testbench with the stalls asked for, after its reset, and the test's random generator.

        ``salt`` (plus :func:`stall_salt`) seeds the stall patterns and the generator, so that
        every stall combination of a test draws its own data.
        """
        salt += stall_salt(idle, backpressure)
        tb = cls(dut, idle=idle, backpressure=backpressure, salt=salt)
        rng = knobs.rng(salt)
        await tb.reset()
        return tb, rng

    async def wait_ready(self, limit=1 << 16):
        """Wait (bounded) until the block raises ``i.ready`` after its reset-time buffer clear."""
        for _ in range(limit):
            await RisingEdge(self.clock)
            if self.dut.i__ready.value:
                return
        raise AssertionError("i.ready never rose after reset")


class EngineTB(CompressTB):
    """``topk_scatter`` (or ``topk_chunk_decompressor``, built on it) in a :class:`CompressTB`, with its
    parameters as attributes."""

    def __init__(self, dut, **kwargs):
        super().__init__(dut, **kwargs)
        params = self.params
        self.lanes, self.banks = params["lanes"], params["banks"]
        self.chunk_size, self.out_lanes = params["chunk_size"], params["out_lanes"]
        self.value_format = params["value_format"]


async def scatter_throughput(dut, job):
    """Cycles for one chunk of pairs at full rate; ``job["kind"]`` names the pattern.

    The steady rate counts pairs over the cycles from the first to the last accepted pair beat; the
    total rate also includes the pipeline latency up to the chunk's first output beat.
    """
    tb = EngineTB(dut)
    kind = job["kind"]
    rng = knobs.rng(11)
    await tb.reset()
    await tb.wait_ready()
    length = tb.chunk_size
    pairs = min(job["pairs"], length)  # one chunk holds at most `length` pairs
    if kind != "same_index":  # the other patterns have distinct indices
        pairs = min(pairs, length // tb.banks if kind == "same_bank" else length)
    # "shuffled": distinct uniform indices in random order (banks drawn independently per pair).
    indices = adversarial_indices("random" if kind == "shuffled" else kind, pairs, length, tb.banks, rng)
    if kind == "shuffled":
        rng.shuffle(indices)
    values = random_values(rng, len(indices), tb.value_format)
    expected = dense_beats(indices, values, length, tb.out_lanes)
    beats = chunk_beats(rng, indices, values, length, tb.lanes, hole_probability=0.0)
    accepted = []

    async def watch_input():
        while True:
            await RisingEdge(tb.clock)
            if dut.i__valid.value and dut.i__ready.value:
                accepted.append(tb.cycle)

    cocotb.start_soon(watch_input())
    tb.source.send_many(beats)
    first_output = None
    for n, beat in enumerate(expected):
        received = await with_timeout(tb.sink.recv(), (20 * pairs + 4 * length + 1000) * CLOCK_NS, "ns")
        if first_output is None:
            first_output = tb.cycle
        assert received == beat, f"beat {n}: expected {beat}, got {received}; {knobs.describe()}"
    pair_beats = -(-pairs // tb.lanes)
    # Steady input rate: the pair beats only (the chunk-end beat may be extra), first to last accepted.
    steady_cycles = accepted[pair_beats - 1] - accepted[0] + 1
    result = {"kind": kind, "lanes": tb.lanes, "banks": tb.banks, "pairs": pairs,
              "steady_cycles": steady_cycles, "steady_rate": pairs / steady_cycles,
              "total_cycles": first_output - accepted[0], "total_rate": pairs / (first_output - accepted[0])}
    dut._log.info("throughput: %s", result)
    return result


class AxiDecompressorTB(ClockedTB):
    """``topk_axi_decompressor`` with its ``AxiRam`` (the pair streams), read monitor, command source,
    output sink and scoreboard; counts the writes (there must be none) and the ``done`` reports."""

    def __init__(self, dut, *, stall=False, salt=0, faults=()):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params = params_from_env()
        self.lanes, self.chunk_size = params["lanes"], params["chunk_size"]
        self.out_lanes, self.value_format = params["out_lanes"], params["value_format"]
        self.beat_bytes = 8 * self.lanes
        self.ram = FaultyAxiRam(dut, "m_axi_", self.clock, dut.rst, size=DECOMPRESSOR_RAM_SIZE, faults=faults,
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
        assert self.next_offset < DECOMPRESSOR_RAM_SIZE, "test streams overflow the RAM model"
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
        await self.expect_from(self.sink, self.scoreboard, cycles=6 * size_total // self.out_lanes + 3000,
                               settle=50)
        assert not self.dut.busy.value, "busy stays high after the last transfer"
        assert not self.monitor.violations, f"{self.monitor.violations[:5]}; {knobs.describe()}"


async def decompressor_traffic(dut, job):
    """Measured DRAM bytes per parameter of fused-mode decompression at 0.1 %, 1 % and 10 %.

    One shard of ``job["chunks"]`` chunks per ratio, sorted Top-K pairs; returns a list of one dict
    per ratio (bytes read and written, pairs, cycles, bytes per parameter).
    """
    tb = AxiDecompressorTB(dut)
    rng = knobs.rng(41)
    await tb.reset()
    size = tb.chunk_size * job["chunks"]
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
    return results


SESSIONS = {"scatter_throughput": scatter_throughput, "decompressor_traffic": decompressor_traffic}


def run_scatter_throughput(params, kind, pairs):
    """:func:`scatter_throughput` of ``pairs`` pairs of pattern ``kind`` on ``topk_scatter`` built with
    ``params``; returns ``{"kind", "lanes", "banks", "pairs", "steady_cycles", "steady_rate",
    "total_cycles", "total_rate"}``."""
    from scripts.sim.devices import run_session

    return run_session("topk_scatter", "compress.scatter_throughput", {"kind": kind, "pairs": pairs},
                       params=params)


def run_decompressor_traffic(params, chunks):
    """:func:`decompressor_traffic` of ``chunks`` chunks per ratio on ``topk_axi_decompressor`` built with
    ``params`` (:data:`AXI_PARAMS` in the bench); returns its list of results."""
    from scripts.sim.devices import run_session

    return run_session("topk_axi_decompressor", "compress.decompressor_traffic", {"chunks": chunks},
                       params=params)
