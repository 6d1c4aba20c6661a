"""The multiply and accumulate units of a systolic PE, for each element type.

Every unit has the fixed-latency ``i``/``o`` stream contract of :mod:`rtl.fp.interface`, so a PE
wires a multiplier into an adder the same way for every element and ties ``o.ready`` high
(no enable logic inside). The float elements reuse :class:`~rtl.fp.fp_add.FloatAdder` (f32
accumulation), :class:`~rtl.fp.fp_mul.FloatMultiplier` (f32 products) and
:class:`~.widening_multiplier.WideningMultiplier` (f16/bf16 products in f32); int8 has the two
one-stage integer units below.
"""

from dataclasses import dataclass

from amaranth.hdl import signed, unsigned

from ..fp.fp_add import FloatAdder
from ..fp.fp_mul import FloatMultiplier
from ..fp.pipeline import FloatUnit
from ..registration import check_choice
from .widening_multiplier import WideningMultiplier

__all__ = ["ELEMENTS", "Arithmetic", "arithmetic", "IntegerMultiplier", "IntegerAdder"]

ELEMENTS = ("f32", "f16", "bf16", "int8")


class IntegerMultiplier(FloatUnit):
    """int8 x int8 -> int32 product, one register stage (a DSP's multiplier register).

    Same ports as the FP units: ``i`` carries raw 8-bit two's complement ``a`` and ``b``, ``o``
    the product sign-extended to 32 bits (flags always 0). Latency 1, II = 1.
    """

    def __init__(self, *, tag_width=0):
        super().__init__(input_width=8, output_width=32, operands=("a", "b"), tag_width=tag_width, latency=1)

    def _datapath(self, m, pipe):
        # The signed 16-bit product is sign-extended into the 32-bit result field.
        pipe.output(result=self.i.payload.a.as_signed() * self.i.payload.b.as_signed(), flags=0)


class IntegerAdder(FloatUnit):
    """32-bit two's complement addition, wrapping modulo 2^32. Latency 1, II = 1."""

    def __init__(self, *, tag_width=0):
        super().__init__(input_width=32, output_width=32, operands=("a", "b"), tag_width=tag_width, latency=1)

    def _datapath(self, m, pipe):
        pipe.output(result=(self.i.payload.a + self.i.payload.b)[:32], flags=0)


@dataclass(frozen=True)
class Arithmetic:
    """What a PE needs to know about one element type.

    Attributes
    ----------
    element : str
    operand_shape : Shape
        Raw operand bits (signed for int8).
    accumulator_shape : Shape
        Raw binary32 bits, or int32.
    multiply_latency, add_latency : int
        Register stages of the two units.
    """

    element: str
    operand_shape: object
    accumulator_shape: object
    multiply_latency: int
    add_latency: int

    def multiplier(self, tag_width):
        if self.element == "int8":
            return IntegerMultiplier(tag_width=tag_width)
        if self.element == "f32":
            return FloatMultiplier(fmt="f32", tag_width=tag_width)
        return WideningMultiplier(fmt=self.element, tag_width=tag_width)

    def adder(self, tag_width):
        if self.element == "int8":
            return IntegerAdder(tag_width=tag_width)
        return FloatAdder(fmt="f32", tag_width=tag_width)


def arithmetic(element):
    """The :class:`Arithmetic` of ``element`` ("f32", "f16", "bf16" or "int8")."""
    check_choice("element", element, ELEMENTS)
    if element == "int8":
        return Arithmetic(element, signed(8), signed(32), 1, 1)
    width = 32 if element == "f32" else 16
    unit = FloatMultiplier(fmt="f32") if element == "f32" else WideningMultiplier(fmt=element)
    unit._MustUse__silence = True  # built only to read its latency
    return Arithmetic(element, unsigned(width), unsigned(32), unit.latency, FloatAdder.LATENCY)
