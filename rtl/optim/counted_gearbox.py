"""Width conversion between bus beats and lane vectors when neither width divides the other."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import NO_DROPS, NO_GOLDEN, Param, Parameterized, register_block
from .counted_width_converter import COUNT_WIDTH

__all__ = ["CountedGearbox"]


class CountedGearbox(Parameterized, wiring.Component):
    """Regroups a tensor of known length from ``p``-word transfers into ``q``-word transfers.

    The general form of :class:`~rtl.optim.counted_width_converter.CountedWidthConverter`,
    for widths where neither divides the other (for example 2-word 64-bit beats and 3-lane
    vectors). The tensor has ``count`` words (elements), sampled at ``start``; it arrives as
    ``ceil(count / p)`` input transfers and leaves as ``ceil(count / q)`` output transfers,
    words in order, the first word of a transfer in its lowest bits:

    * the words of the last input beyond ``count`` are dropped (trimmed);
    * the last output is sent once the ``count``-th word has arrived; its words beyond
      ``count`` are stale (padded), which the consumer masks or strobes off;
    * after ``count`` words no further input is taken (``i.ready`` stays low) until the
      next ``start``; a ``count`` of 0 moves nothing.

    So a reader that delivers exactly the beats of a tensor and a consumer that takes
    exactly its lane vectors stay in step, run after run, as with the divisible converter.

    The words sit in a buffer of ``p + q`` words, oldest at word 0. An output takes the
    ``q`` lowest words and shifts the rest down by ``q`` (a two-way choice per word); an
    input is written just above the words that stay (one of ``q + 1`` positions).

    Parameters
    ----------
    input_width, output_width : int
        Transfer widths in bits, 1 to 8192, each a multiple of ``word_width``.
    word_width : int
        Element width in bits, 1 to 64 (32, or 16 for 16-bit gradients and copies).

    Attributes
    ----------
    i : In(stream.Signature(input_width))
    o : Out(stream.Signature(output_width))
    count : In(32)
        Words of the run, sampled at ``start``.
    start : In(1)
        Begins a run: loads ``count`` and empties the buffer. Not while transfers flow.

    Notes
    -----
    Latency: 1 cycle (the buffer is registered; ``o`` comes from registers only).
    Throughput: one transfer per cycle on the side with fewer words per transfer, so the
    full rate of both sides (the buffer never runs dry or full while both sides flow).
    ``i.ready`` depends on ``o.ready`` (an input is taken while an output leaves).
    """

    PARAMS = (
        Param("input_width", int, 64, "input transfer width in bits", minimum=1, maximum=8192),
        Param("output_width", int, 96, "output transfer width in bits", minimum=1, maximum=8192),
        Param("word_width", int, 32, "element width in bits", minimum=1, maximum=64),
    )

    def __init__(self, *, input_width=64, output_width=96, word_width=32):
        self._word = word_width
        for name, width in (("input_width", input_width), ("output_width", output_width)):
            if width % word_width:
                raise ValueError(f"{name} must be a multiple of word_width={word_width}, not {width}")
        self._p, self._q = input_width // word_width, output_width // word_width
        super().__init__({
            "i": In(stream.Signature(input_width)),
            "o": Out(stream.Signature(output_width)),
            "count": In(COUNT_WIDTH),
            "start": In(1),
        })

    latency = 1
    throughput = 1

    def elaborate(self, platform):
        m = Module()
        w, p, q = self._word, self._p, self._q
        capacity = p + q
        buffer = Signal(capacity * w)
        fill = Signal(range(capacity + 1))       # valid words, from word 0 up
        remaining = Signal(COUNT_WIDTH)          # words of the run not yet taken in
        out_fire, in_fire = Signal(), Signal()
        base = Signal(range(capacity + 1))       # words that stay after this cycle's output
        taken_in = Signal(range(p + 1))          # words of this input within the run

        full_out = fill >= q
        m.d.comb += [
            # A whole output, or the run's last partial one once every word has arrived.
            self.o.valid.eq(full_out | ((fill != 0) & (remaining == 0))),
            self.o.payload.eq(buffer[:q * w]),
            out_fire.eq(self.o.valid & self.o.ready),
            # The last output empties the buffer (its stale words leave with it).
            base.eq(Mux(out_fire, Mux(full_out, fill - q, 0), fill)),
            self.i.ready.eq((remaining != 0) & (base <= q)),
            in_fire.eq(self.i.valid & self.i.ready),
            taken_in.eq(Mux(remaining < p, remaining, p)),
        ]
        for k in range(capacity):
            word = Mux(out_fire, buffer.word_select(k + q, w), buffer.word_select(k, w)) \
                if k + q < capacity else buffer.word_select(k, w)
            # Input word j lands at position base + j; base is at most q while taking one.
            for position in range(max(0, k - p + 1), min(q, k) + 1):
                word = Mux(in_fire & (base == position), self.i.payload.word_select(k - position, w), word)
            m.d.sync += buffer.word_select(k, w).eq(word)
        with m.If(self.start):
            m.d.sync += [remaining.eq(self.count), fill.eq(0)]
        with m.Else():
            # The count after an input is computed beside the handshake, which only chooses it: the
            # subtraction after the handshake's decision was the block's ECP5 path (111.8 MHz).
            after_input = Signal.like(remaining)
            m.d.comb += after_input.eq(Mux(remaining < p, 0, remaining - p))
            m.d.sync += [fill.eq(base + Mux(in_fire, taken_in, 0)),
                         remaining.eq(Mux(in_fire, after_input, remaining))]
        return m


register_block(
    "counted_gearbox", CountedGearbox, family="optim",
    summary="Beat <-> lane-vector gearbox for any two widths, trimming or padding the last transfer of a "
            "counted run.",
    golden=NO_GOLDEN("plumbing: the output bits are the input bits, regrouped"),
    drops=NO_DROPS,
)
