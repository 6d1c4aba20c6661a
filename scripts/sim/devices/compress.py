"""Host device of the compress blocks: the stream testbench and the scatter engine's throughput.

:class:`CompressTB` is a block's clock, reset, source on ``i`` and sink on ``o``;
:class:`EngineTB` adds ``topk_scatter``'s parameters. The pair values, the scatter-stream beats
of a chunk and its golden dense beats (:func:`golden.compress.scatter`) are made here. The
session ``compress.scatter_throughput`` (:func:`scatter_throughput`) counts cycles of one chunk
at full rate, every output beat checked; :func:`run_scatter_throughput` runs it in a simulation
(``bench_compress``; the engine's test ``throughput`` awaits the same session). The other
compress tests and their shared pieces are in ``testbenches/compress/``.
"""

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge, with_timeout

from golden.compress import adversarial_indices, scatter, value_dtype
from golden.fp.vectors import random_operands
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB

__all__ = ["PAUSE_PROBABILITY", "CLOCK_NS", "random_values", "value_bits", "padded_beats", "dense_beats",
           "chunk_beats", "stall_salt", "CompressTB", "EngineTB", "SESSIONS", "scatter_throughput",
           "run_scatter_throughput"]

PAUSE_PROBABILITY = 0.35
CLOCK_NS = 10


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
    """``topk_scatter`` in a :class:`CompressTB`, with its parameters as attributes."""

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


SESSIONS = {"scatter_throughput": scatter_throughput}


def run_scatter_throughput(params, kind, pairs):
    """:func:`scatter_throughput` of ``pairs`` pairs of pattern ``kind`` on ``topk_scatter`` built with
    ``params``; returns ``{"kind", "lanes", "banks", "pairs", "steady_cycles", "steady_rate",
    "total_cycles", "total_rate"}``."""
    from scripts.sim.devices import run_session

    return run_session("topk_scatter", "compress.scatter_throughput", {"kind": kind, "pairs": pairs},
                       params=params)
