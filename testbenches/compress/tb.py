"""Helpers the compress cocotb tests share: pair values, beat packing, the golden dense chunks.

Not a cocotb test module itself; the compress cocotb modules import it.
"""

import numpy as np
from cocotb.triggers import RisingEdge

from golden.compress import scatter, value_dtype
from golden.fp.vectors import random_operands
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB

__all__ = ["random_values", "value_bits", "dense_beats", "CompressTB", "PAUSE_PROBABILITY", "CLOCK_NS",
           "stall_salt", "CutBursts", "idle_after_reset"]

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


def dense_beats(indices, values, length, out_lanes):
    """The golden output beats of one chunk: ``{"data": [...], "last": 0/1}`` dicts."""
    dense = scatter(np.asarray(indices, np.int64), values, length).view(np.uint32)
    beats = -(-length // out_lanes)
    padded = np.zeros(beats * out_lanes, np.uint32)
    padded[:length] = dense
    return [{"data": padded[n * out_lanes:(n + 1) * out_lanes].astype(np.int64).tolist(),
             "last": int(n == beats - 1)} for n in range(beats)]


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

    async def wait_ready(self, limit=1 << 16):
        """Wait (bounded) until the block raises ``i.ready`` after its reset-time buffer clear."""
        for _ in range(limit):
            await RisingEdge(self.clock)
            if self.dut.i__ready.value:
                return
        raise AssertionError("i.ready never rose after reset")


class CutBursts:
    """Burst monitors seen across a reset (a ``driver`` of ``ClockedTB.reset_mid_transfer``).

    The block's reset is its AXI memory models' reset too (``dut.rst``), as AXI requires: the
    bursts in flight are dropped at both ends. ``clear()`` (reset rising, then falling) records
    in ``cut`` how many were open when it rose and makes the monitors forget them.
    """

    def __init__(self, *monitors):
        self.monitors = monitors
        self.cut = 0

    def clear(self):
        self.cut = max(self.cut, sum(monitor.outstanding for monitor in self.monitors))
        for monitor in self.monitors:
            monitor.outstanding = 0

    def burst_open(self):
        """A burst is open (address taken, its last R beat or its B response not)."""
        return any(monitor.outstanding for monitor in self.monitors)


async def idle_after_reset(tb, ports, cycles=32):
    """Check, for ``cycles`` cycles, that no AXI valid of ``ports`` (prefixes ``m_axi...``) is high."""
    names = [f"{port}__{channel}valid" for port in ports for channel in ("ar", "r", "aw", "w", "b")]
    for _ in range(cycles):
        high = [name for name in names if int(getattr(tb.dut, name).value)]
        assert not high, f"{', '.join(high)} high after the reset (cycle {tb.cycle}); {knobs.describe()}"
        await RisingEdge(tb.clock)
