"""Pipelined conversion of 32-bit integers to floating point."""

from amaranth.hdl import Cat, Const, Mux

from ..registration import Parameterized
from .fp_to_int import conversion_params
from .pipeline import FloatUnit, register_unit
from .rounding import round_aligned
from .shift import count_leading_zeros, normalise_left

__all__ = ["IntegerToFloat"]

_WIDTH = 32


class IntegerToFloat(Parameterized, FloatUnit):
    """Pipelined ``i32``/``u32`` to float conversion, rounding to nearest even.

    The magnitude is normalised by a leading-zero count and rounded by the shared
    rounding core; integers too large for the format (f16) overflow to infinity with
    overflow and inexact. Zero converts to ``+0``.

    Parameters
    ----------
    fmt : str or FloatFormat
        Output format: ``"f32"``, ``"f16"``, ``"bf16"`` or any :class:`FloatFormat`.
    flush_subnormals : bool
        Accepted for a uniform interface; no integer converts to a subnormal.
    integer : str
        ``"i32"`` (two's complement) or ``"u32"``.
    tag_width : int
        Width of the tag carried from ``i`` to ``o`` (0 for none).

    Attributes
    ----------
    i : In(stream.Signature(operand_layout(32, ("a",), tag_width)))
        The integer, in field ``a``.
    o : Out(stream.Signature(result_layout(fmt.width, tag_width)))
        Result and flags (inexact, overflow).
    latency : int
        4 cycles for ``i32`` (magnitude, leading-zero count, normalise, round); 3 for
        ``u32``, which needs no magnitude.

    Throughput is one conversion per cycle (II = 1) while ``o.ready`` is high.
    """

    PARAMS = conversion_params("output format")

    def __init__(self, *, fmt="f32", flush_subnormals=False, integer="i32", tag_width=0):
        self._fmt, self._flush = self._check_common(fmt, flush_subnormals)
        self._signed = integer == "i32"
        super().__init__(input_width=_WIDTH, output_width=self._fmt.width, operands=("a",),
                         tag_width=tag_width, latency=3 + self._signed)

    def _datapath(self, m, pipe):
        fmt = self._fmt
        value = self.i.payload.a
        sign = value[-1] if self._signed else Const(0)
        s = pipe.stage(enabled=self._signed, sign=sign, magnitude=Mux(sign, -value, value)[:_WIDTH])
        s = pipe.stage(s, "sign", "magnitude", shift=count_leading_zeros(s.magnitude))
        # Bit 31 of the magnitude has weight 2**31.
        width = max(_WIDTH, fmt.precision + 2)
        significand = Cat(Const(0, width - _WIDTH), normalise_left(s.magnitude, s.shift))
        s = pipe.stage(s, "sign", significand=significand, exponent=fmt.bias + _WIDTH - 1 - s.shift)
        rounded = round_aligned(fmt, sign=s.sign, exponent=s.exponent, significand=s.significand, sticky=0,
                                flush_subnormals=self._flush)
        pipe.output(result=rounded.bits, flags=rounded.flags)


register_unit(
    "int_to_fp", IntegerToFloat,
    summary="Pipelined i32/u32 to float conversion (round to nearest even).",
    golden="golden.fp.convert:convert",
)
