"""Shared cocotb testbench parts of the optim family: the kernels' counted lane converters.

:class:`LaneConverterTB` drives ``counted_gearbox`` and ``counted_width_converter`` (clock,
reset, a source on ``i`` and a sink on ``o`` with the stalls of :data:`STALLS`, and a
:class:`PortMonitor` on both ports); each test file adds its lengths and its checks.
"""

import cocotb
from cocotb.triggers import RisingEdge

from golden.bus import random_words
from scripts.sim import knobs
from scripts.sim.runner import params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses
from scripts.sim.tb import ClockedTB, hex_of

__all__ = ["DEFAULT_TENSORS", "STALLS", "SETTLE", "ceil_div", "reproduce", "PortMonitor", "LaneConverterTB"]

# Random tensor lengths per stall pattern without NEARTRAIN_VECTORS.
DEFAULT_TENSORS = 100

# (idle probability on the input, backpressure probability on the output) per stall pattern.
STALLS = {"none": (0.0, 0.0), "idle": (0.4, 0.0), "backpressure": (0.0, 0.4), "both": (0.3, 0.5)}
# Cycles the junk beat is held on the input, and the port watched, after a tensor or a reset.
SETTLE = 8


def ceil_div(a, b):
    return -(-a // b)


def reproduce():
    """The knobs that reproduce a failure, for every assertion message."""
    return knobs.describe(DEFAULT_TENSORS)


class PortMonitor:
    """Counts the handshakes on ``i`` and ``o`` and checks that an offered output is held until taken.

    ``edges`` counts rising edges; ``last_output`` is the edge of the latest output transfer.
    Edges in reset are skipped. A driver of :meth:`ClockedTB.reset_mid_transfer`: ``clear()``
    forgets a held output (which the reset may drop) and restarts ``since_clear``, the
    (inputs, outputs) counted since, so that after a reset it counts from the first edge out of it.
    """

    def __init__(self, dut, clock):
        self.dut = dut
        self.edges = self.inputs = self.outputs = self.last_output = 0
        self.since_clear = (0, 0)
        self.violations = []
        self._held = None
        self._task = cocotb.start_soon(self._run(clock))

    def clear(self):
        self._held = None
        self.since_clear = (0, 0)

    async def _run(self, clock):
        dut = self.dut
        while True:
            await RisingEdge(clock)
            self.edges += 1
            if dut.rst.value:
                self._held = None
                continue
            valid, ready = int(dut.o__valid.value), int(dut.o__ready.value)
            payload = int(dut.o__payload.value) if valid else None
            if self._held is not None and (not valid or payload != self._held):
                self.violations.append(f"edge {self.edges}: output {hex_of(self._held)} offered and not "
                                       f"taken, then valid={valid} payload={hex_of(payload)}")
            self._held = payload if valid and not ready else None
            if valid and ready:
                self.outputs += 1
                self.last_output = self.edges
            took = int(dut.i__valid.value) & int(dut.i__ready.value)
            self.inputs += took
            self.since_clear = (self.since_clear[0] + took, self.since_clear[1] + (valid and ready))


class LaneConverterTB(ClockedTB):
    """A converter of ``p`` words per input transfer to ``q`` per output transfer, ``word`` bits each.

    ``stall`` names the pattern of :data:`STALLS`; ``salt`` separates the random streams of the
    tests of one simulation.
    """

    def __init__(self, dut, *, word, stall="none", salt=0):
        super().__init__(dut)
        params = params_from_env()
        self.word = word
        self.p = params["input_width"] // word
        self.q = params["output_width"] // word
        idle, backpressure = STALLS[stall]
        self.source = StreamSource(dut, "i", self.clock,
                                   pause=random_pauses(knobs.rng(100 + salt), idle) if idle else never())
        self.sink = StreamSink(dut, "o", self.clock,
                               backpressure=random_pauses(knobs.rng(200 + salt), backpressure)
                               if backpressure else never())
        self.monitor = PortMonitor(dut, self.clock)
        dut.start.value = 0
        dut.count.value = 0

    def shape(self):
        return f"p={self.p} q={self.q} word={self.word}"

    def beats(self, rng, words):
        """The input transfers of ``words``, the last one filled up with random junk words."""
        padded = list(words) + random_words(rng, self.p, self.word)
        return [sum(padded[b * self.p + j] << (j * self.word) for j in range(self.p))
                for b in range(ceil_div(len(words), self.p))]

    def words_of(self, output, valid):
        """The first ``valid`` words (at most ``q``) of an output transfer."""
        mask = (1 << self.word) - 1
        return [(output >> (j * self.word)) & mask for j in range(min(self.q, valid))]
