"""Stream width conversion between a memory bus beat and a vector of lanes."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import NO_DROPS, NO_GOLDEN, Param, Parameterized, check_int, register_block

__all__ = ["StreamWidthConverter"]


class StreamWidthConverter(Parameterized, wiring.Component):
    """Re-packs a stream of ``input_lanes`` elements per transfer into ``output_lanes`` per transfer.

    This is how a 512-bit AXI beat feeds 16 FP32 lanes (equal widths: pure wiring), 4 FP32
    lanes (each beat is split over 4 transfers) or 32 lanes (2 beats are gathered into one
    transfer), and how the lanes go back to beats. Element 0 is the least significant
    ``element_width`` bits of a transfer, as in AXI's little-endian byte lanes, and the
    element order is kept across conversions.

    Parameters
    ----------
    input_width : int
        Input transfer width in bits, a multiple of ``element_width`` (default 512).
    output_width : int
        Output transfer width in bits, a multiple of ``element_width`` (default 512).
        One of the two widths must divide the other.
    element_width : int
        Width of one lane, 1 to 1024 (default 32).

    Attributes
    ----------
    i : In(stream.Signature(data.ArrayLayout(element_width, input_width // element_width)))
    o : Out(stream.Signature(data.ArrayLayout(element_width, output_width // element_width)))

    Notes
    -----
    Latency: 0 cycles for equal widths, 1 cycle otherwise (the wider side is registered).
    Throughput: the narrow side moves 1 transfer per cycle; the wide side 1 per ratio
    cycles. ``i.ready`` depends combinationally on ``o.ready`` when splitting; put a
    :class:`SkidBuffer` in front to break that path.
    """

    PARAMS = (
        Param("input_width", int, 512, "input transfer width in bits", minimum=1, maximum=8192),
        Param("output_width", int, 128, "output transfer width in bits", minimum=1, maximum=8192),
        Param("element_width", int, 32, "lane width in bits", minimum=1, maximum=1024),
    )

    @classmethod
    def check_params(cls, values):
        """Both widths are multiples of ``element_width``, and one divides the other."""
        element_width, input_width, output_width = (values[name] for name in
                                                    ("element_width", "input_width", "output_width"))
        for name, width in (("input_width", input_width), ("output_width", output_width)):
            check_int(name, width, element_width, 8192)
            if width % element_width:
                raise ValueError(f"{name} must be a multiple of element_width={element_width}, not {width}")
        wide, narrow = max(input_width, output_width), min(input_width, output_width)
        if wide % narrow:
            raise ValueError(f"output_width must divide or be a multiple of input_width={input_width}, "
                             f"not {output_width}")

    def __init__(self, *, input_width=512, output_width=512, element_width=32):
        self._ratio = max(input_width, output_width) // min(input_width, output_width)
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(element_width, input_width // element_width))),
            "o": Out(stream.Signature(data.ArrayLayout(element_width, output_width // element_width))),
        })

    @property
    def ratio(self):
        """How many narrow transfers make one wide transfer."""
        return self._ratio

    @property
    def latency(self):
        return 0 if self._ratio == 1 else 1

    def elaborate(self, platform):
        m = Module()
        if self._ratio == 1:
            wiring.connect(m, wiring.flipped(self.i), wiring.flipped(self.o))
        elif self._input_width > self._output_width:
            self._elaborate_split(m)
        else:
            self._elaborate_gather(m)
        return m

    def _elaborate_split(self, m):
        """One wide input is held and sent out as ``ratio`` narrow pieces, lowest first."""
        narrow = self._output_width
        held = Signal(self._input_width)
        piece = Signal(range(self._ratio))
        last_piece = piece == self._ratio - 1

        m.d.comb += self.o.payload.eq(held.word_select(piece, narrow))
        # A new beat may enter in the same cycle the last piece of the previous one leaves.
        m.d.comb += self.i.ready.eq(~self.o.valid | (self.o.ready & last_piece))
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += piece.eq(piece + 1)
            with m.If(last_piece):
                m.d.sync += [piece.eq(0), self.o.valid.eq(0)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [held.eq(self.i.payload), self.o.valid.eq(1), piece.eq(0)]

    def _elaborate_gather(self, m):
        """``ratio`` narrow inputs are collected, lowest first, into one wide output."""
        narrow = self._input_width
        gathered = Signal(self._output_width)
        piece = Signal(range(self._ratio))

        m.d.comb += self.o.payload.eq(gathered)
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [gathered.word_select(piece, narrow).eq(self.i.payload), piece.eq(piece + 1)]
            with m.If(piece == self._ratio - 1):
                m.d.sync += [piece.eq(0), self.o.valid.eq(1)]


register_block(
    "width_converter", StreamWidthConverter, family="bus",
    summary="Splits or gathers stream transfers between a bus beat and a vector of lanes.",
    golden=NO_GOLDEN("plumbing: the output bits are the input bits, regrouped"),
    drops=NO_DROPS,
)
