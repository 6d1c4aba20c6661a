"""Harnesses of particular blocks: the AXI burst planner's rules and the credit counter's bounds."""

from amaranth.hdl import Assert, C, Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.axi import PAGE_BYTES
from rtl.bus.axi_burst_planner import AXIBurstPlanner
from rtl.optim.credit import credit_depth, credited_pipeline

from .harnesses import queue_harness, stream_harness

__all__ = ["burst_planner_harness", "CreditedDelay", "credit_harness"]


def burst_planner_harness(*, planner=AXIBurstPlanner, **params):
    """The planner's bursts cover each command exactly once, in order, by the AXI4 burst rules.

    A model in the harness keeps the next expected address and the beats still uncovered
    of the command taken last, so every burst is checked against what is left of it.

    Parameters
    ----------
    planner : type
        The component class (a broken variant in the tests).
    **params
        ``address_width``, ``data_width``, ``max_burst``, ``length_width``.
    """
    max_burst, data_width = params["max_burst"], params["data_width"]
    planner = planner(**params)
    m, _inputs, _outputs = stream_harness(planner)
    cmd, burst = planner.cmd, planner.burst
    address_width = len(cmd.payload.address)
    beat_bytes_log2 = (data_width // 8).bit_length() - 1
    expect = Signal(address_width)
    left = Signal(len(cmd.payload.length))
    with m.If(cmd.valid & cmd.ready):
        m.d.comb += Assert(left == 0, "a command is taken only once the previous one is covered")
        m.d.sync += [expect.eq(Cat(C(0, beat_bytes_log2), cmd.payload.address[beat_bytes_log2:])),
                     left.eq(cmd.payload.length)]
    address, beats = burst.payload.address, burst.payload.beats
    span = beats << beat_bytes_log2
    m.d.comb += [
        Assert(planner.busy == (left != 0), "busy exactly while a command is not covered"),
        Assert(burst.valid == (left != 0), "a burst is offered exactly while a command is not covered"),
    ]
    with m.If(burst.valid):
        m.d.comb += [
            Assert(address == expect, "each burst starts where the previous ended (in order, once)"),
            Assert((beats >= 1) & (beats <= max_burst), "1 <= beats <= max_burst"),
            Assert(beats <= left, "no burst goes past the end of its command"),
            Assert(burst.payload.final == (beats == left), "final marks the burst that ends the command"),
            Assert(address[:12] + span <= PAGE_BYTES, "no burst crosses a 4 KB boundary"),
        ]
    with m.If(burst.valid & burst.ready):
        m.d.sync += [expect.eq(expect + span), left.eq(left - beats)]
    return m


class CreditedDelay(wiring.Component):
    """A ``latency``-cycle delay line that cannot stall, behind :func:`credited_pipeline`.

    The simplest pipeline the optimizer datapaths use the credit FIFO for: its result is its
    input, so the tracked token shows whether the credit counter ever lets the FIFO overflow.

    Parameters
    ----------
    width : int
        Payload width in bits.
    latency : int
        Pipeline depth in cycles.
    """

    def __init__(self, *, width=4, latency=2):
        self._latency = latency
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width))})

    def elaborate(self, platform):
        m = Module()
        _issue, result = credited_pipeline(m, i=self.i, o=self.o, latency=self._latency)
        stage = self.i.payload
        for index in range(self._latency):
            delayed = Signal.like(stage, name=f"stage_{index + 1}")
            m.d.sync += delayed.eq(stage)
            stage = delayed
        m.d.comb += result.eq(stage)
        return m


def credit_harness(*, latency, width=2):
    """The credit counter neither under- nor overflows and never refuses an input with credit left.

    The credits are the FIFO entries not promised to a result in flight: the harness asserts
    that ``i.ready`` is high exactly while fewer than ``credit_depth(latency)`` results are
    in flight or queued, and the tracked token that no result is ever dropped (an
    overflowing FIFO would drop one) or invented (an underflow would).
    """
    block = CreditedDelay(width=width, latency=latency)
    return queue_harness(block, capacity=credit_depth(latency), valid_when_held=False)
