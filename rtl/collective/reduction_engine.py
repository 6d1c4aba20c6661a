"""The reduction engine: word-wise binary32 addition of two 448-bit lines, one pair per cycle."""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..fp.fp_add import FloatAdder
from ..fp.interface import FLAG_INVALID, FLAG_OVERFLOW
from ..net.packet import LINE_BITS
from ..registration import NO_DROPS, Param, Parameterized, register_block

__all__ = ["ReductionEngine", "engine_input_layout", "engine_output_layout", "LINE_WORDS"]

LINE_WORDS = LINE_BITS // 32  # binary32 words in the data line of a network data packet (14)


def engine_input_layout(tag_width):
    """``{"a": 448, "b": 448, "tag": tag_width}`` (no ``tag`` when 0)."""
    fields = {"a": LINE_BITS, "b": LINE_BITS}
    if tag_width:
        fields["tag"] = tag_width
    return data.StructLayout(fields)


def engine_output_layout(tag_width):
    """``{"sum": 448, "invalid": 1, "overflow": 1, "tag": tag_width}``."""
    fields = {"sum": LINE_BITS, "invalid": 1, "overflow": 1}
    if tag_width:
        fields["tag"] = tag_width
    return data.StructLayout(fields)


class ReductionEngine(Parameterized, wiring.Component):
    """``sum[w] = a[w] + b[w]`` for the 14 binary32 words of two lines, rounded to nearest even.

    Fourteen :class:`rtl.fp.fp_add.FloatAdder` lanes share one stream: a whole 512-bit packet's
    data line is reduced per cycle. NaN results are the canonical quiet NaN ``0x7FC00000``.

    Parameters
    ----------
    tag_width : int
        Side-band bits carried from ``i`` to ``o`` with the line (0 to 64).

    Attributes
    ----------
    i : In(stream.Signature(engine_input_layout(tag_width)))
        The two lines (word 0 in the low 32 bits) and the tag.
    o : Out(stream.Signature(engine_output_layout(tag_width)))
        The sum, and whether any word raised IEEE ``invalid`` (an Inf - Inf or a signaling NaN)
        or ``overflow``.
    latency : int
        6 cycles (the adder's).

    Notes
    -----
    Throughput: one line pair per cycle while ``o.ready`` is high; a low ``o.ready`` with a valid
    output holds the whole pipeline (the ``rtl.fp`` rule), so ``valid`` and the payload hold too.
    """

    PARAMS = (
        Param("tag_width", int, 0, "side-band bits carried with each line", minimum=0, maximum=64),
    )

    LATENCY = FloatAdder.LATENCY

    def __init__(self, *, tag_width=0):
        self.latency = self.LATENCY
        super().__init__({
            "i": In(stream.Signature(engine_input_layout(tag_width))),
            "o": Out(stream.Signature(engine_output_layout(tag_width))),
        })

    def elaborate(self, platform):
        m = Module()
        invalid = overflow = 0
        for word in range(LINE_WORDS):
            lane = FloatAdder(fmt="f32", tag_width=self._tag_width if word == 0 else 0)
            m.submodules[f"lane{word}"] = lane
            bits = slice(32 * word, 32 * word + 32)
            m.d.comb += [
                lane.i.valid.eq(self.i.valid),
                lane.i.payload.a.eq(self.i.payload.a[bits]),
                lane.i.payload.b.eq(self.i.payload.b[bits]),
                lane.o.ready.eq(self.o.ready),
                self.o.payload.sum[bits].eq(lane.o.payload.result),
            ]
            invalid = invalid | (lane.o.payload.flags & FLAG_INVALID).any()
            overflow = overflow | (lane.o.payload.flags & FLAG_OVERFLOW).any()
            if word == 0:
                # Every lane advances on the same condition, so lane 0 speaks for all of them.
                m.d.comb += [self.i.ready.eq(lane.i.ready), self.o.valid.eq(lane.o.valid)]
                if self._tag_width:
                    m.d.comb += [lane.i.payload.tag.eq(self.i.payload.tag),
                                 self.o.payload.tag.eq(lane.o.payload.tag)]
        m.d.comb += [self.o.payload.invalid.eq(invalid), self.o.payload.overflow.eq(overflow)]
        return m


register_block(
    "reduction_engine", ReductionEngine, family="collective",
    drops=NO_DROPS,  # a low o.ready holds the whole pipeline: nothing is discarded
    summary="Global control unit: 14-lane binary32 adder, one 448-bit gradient line pair per cycle.",
    golden="golden.collective.reduction:add_lines",
)
