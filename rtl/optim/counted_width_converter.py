"""Width conversion between bus beats and lane vectors for a tensor of known length."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import NO_DROPS, NO_GOLDEN, Param, Parameterized, register_block

__all__ = ["CountedWidthConverter", "COUNT_WIDTH"]

COUNT_WIDTH = 32


class CountedWidthConverter(Parameterized, wiring.Component):
    """Splits or gathers a stream whose length, counted on the narrow side, is known per run.

    A tensor of ``n`` elements arrives as ``ceil(n / per_beat)`` bus beats and leaves as
    ``ceil(n / lanes)`` lane vectors (or the other way round), and neither count need be a
    multiple of the other. This converter is told, at ``start``, how many transfers the
    narrow side carries (``count``); the wide side then carries ``ceil(count / ratio)``:

    * splitting (input wider): each input becomes ``ratio`` outputs, lowest bits first,
      except that outputs beyond ``count`` are dropped from the last input;
    * gathering (output wider): ``ratio`` inputs make one output, the first in the lowest
      bits, except that the last output is sent once the ``count``-th input arrives (its
      missing pieces keep stale bits, which the consumer masks);
    * equal widths: a wire (``count`` is ignored).

    So a reader that delivers exactly the beats of a tensor and a consumer that takes
    exactly its lane vectors stay in step, run after run.

    Parameters
    ----------
    input_width, output_width : int
        Transfer widths in bits, 1 to 8192; one must divide the other.

    Attributes
    ----------
    i : In(stream.Signature(input_width))
    o : Out(stream.Signature(output_width))
    count : In(32)
        Narrow-side transfers of the run, sampled at ``start``; at least 1.
    start : In(1)
        Begins a run: loads ``count`` and drops any partial state. Not while transfers flow.

    Notes
    -----
    Latency: 1 cycle (the wider side is registered); 0 for equal widths. Throughput: one
    narrow transfer per cycle. When splitting, ``i.ready`` depends on ``o.ready``.
    """

    PARAMS = (
        Param("input_width", int, 512, "input transfer width in bits", minimum=1, maximum=8192),
        Param("output_width", int, 128, "output transfer width in bits", minimum=1, maximum=8192),
    )

    def __init__(self, *, input_width=512, output_width=128):
        wide, narrow = max(input_width, output_width), min(input_width, output_width)
        if wide % narrow:
            raise ValueError(f"output_width must divide or be a multiple of input_width={input_width}, "
                             f"not {output_width}")
        self._ratio = wide // narrow
        super().__init__({
            "i": In(stream.Signature(input_width)),
            "o": Out(stream.Signature(output_width)),
            "count": In(COUNT_WIDTH),
            "start": In(1),
        })

    @property
    def ratio(self):
        return self._ratio

    @property
    def splits(self):
        return self._input_width > self._output_width

    @property
    def latency(self):
        return 0 if self._ratio == 1 else 1

    throughput = 1

    def elaborate(self, platform):
        m = Module()
        if self._ratio == 1:
            wiring.connect(m, wiring.flipped(self.i), wiring.flipped(self.o))
            return m
        remaining = Signal(COUNT_WIDTH)
        piece = Signal(range(self._ratio))
        # A ratio that is not a power of two leaves codes of `piece` unused: select by
        # comparisons there, as a word_select case over `piece` would be incomplete.
        exact = not self._ratio & (self._ratio - 1)

        def select(value, width):
            if exact:
                return value.word_select(piece, width)
            chosen = value.word_select(0, width)
            for k in range(1, self._ratio):
                chosen = Mux(piece == k, value.word_select(k, width), chosen)
            return chosen

        # The last narrow transfer of a wide one: the ratio is reached or the run ends.
        closes = (piece == self._ratio - 1) | (remaining == 1)
        if self.splits:
            held = Signal(self._input_width)
            release = Signal()
            m.d.comb += [
                self.o.payload.eq(select(held, self._output_width)),
                release.eq(self.o.valid & self.o.ready & closes),
                self.i.ready.eq(~self.o.valid | release),
            ]
            with m.If(self.o.valid & self.o.ready):
                m.d.sync += [remaining.eq(remaining - 1), piece.eq(piece + 1)]
                with m.If(closes):
                    m.d.sync += [piece.eq(0), self.o.valid.eq(0)]
            with m.If(self.i.valid & self.i.ready):
                m.d.sync += [held.eq(self.i.payload), self.o.valid.eq(1), piece.eq(0)]
        else:
            gathered = Signal(self._output_width)
            m.d.comb += [self.o.payload.eq(gathered), self.i.ready.eq(~self.o.valid | self.o.ready)]
            with m.If(self.o.valid & self.o.ready):
                m.d.sync += self.o.valid.eq(0)
            with m.If(self.i.valid & self.i.ready):
                if exact:
                    m.d.sync += gathered.word_select(piece, self._input_width).eq(self.i.payload)
                else:
                    for k in range(self._ratio):
                        with m.If(piece == k):
                            m.d.sync += gathered.word_select(k, self._input_width).eq(self.i.payload)
                m.d.sync += [remaining.eq(remaining - 1), piece.eq(piece + 1)]
                with m.If(closes):
                    m.d.sync += [piece.eq(0), self.o.valid.eq(1)]
        with m.If(self.start):
            m.d.sync += [remaining.eq(self.count), piece.eq(0), self.o.valid.eq(0)]
        return m


register_block(
    "counted_width_converter", CountedWidthConverter, family="optim",
    summary="Beat <-> lane-vector width converter that trims or pads the last transfer of a counted run.",
    golden=NO_GOLDEN("plumbing: the output bits are the input bits, regrouped"),
    drops=NO_DROPS,
)
