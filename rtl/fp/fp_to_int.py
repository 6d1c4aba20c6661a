"""Pipelined conversion of floating-point values to 32-bit integers."""

from amaranth.hdl import Cat, Const, Mux

from ..registration import Param, Parameterized
from .classify import UnpackedFloat
from .format import FloatFormat
from .interface import FLAG_INEXACT, FLAG_INVALID
from .pipeline import FLUSH_PARAM, FORMAT_NAMES, TAG_PARAM, FloatUnit, register_unit
from .shift import shift_right_sticky

__all__ = ["FloatToInteger", "INTEGER_FORMATS", "conversion_params"]

INTEGER_FORMATS = ("i32", "u32")
_WIDTH = 32


def conversion_params(fmt_help):
    """The registry parameters of a float/integer conversion; ``fmt_help`` says which side ``fmt`` is."""
    return (
        Param("fmt", str, "f32", fmt_help, choices=FORMAT_NAMES, accepts=(FloatFormat,)),
        FLUSH_PARAM,
        Param("integer", str, "i32", "integer format", choices=INTEGER_FORMATS),
        TAG_PARAM,
    )


class FloatToInteger(Parameterized, FloatUnit):
    """Pipelined float to ``i32``/``u32`` conversion, rounding to nearest even.

    The significand is shifted right onto the integer grid with a guard and a sticky bit;
    rounding and the sign are applied by one adder (``-x = ~x + 1``), and the range is
    checked beside it. Out-of-range values and NaNs raise invalid (and nothing else) and
    saturate to SoftFloat's RISC-V values: NaN and too large give ``0x7FFFFFFF``
    (``0xFFFFFFFF`` unsigned), too negative gives ``0x80000000`` (``0`` unsigned, for any
    negative value that does not round to zero). Inexact is raised when the result is
    in range but not exact.

    Parameters
    ----------
    fmt : str or FloatFormat
        Input format: ``"f32"``, ``"f16"``, ``"bf16"`` or any :class:`FloatFormat` with
        precision up to 33.
    flush_subnormals : bool
        Read subnormal inputs as zero.
    integer : str
        ``"i32"`` (two's complement) or ``"u32"``.
    tag_width : int
        Width of the tag carried from ``i`` to ``o`` (0 for none).

    Attributes
    ----------
    i : In(stream.Signature(operand_layout(fmt.width, ("a",), tag_width)))
        The float, in field ``a``.
    o : Out(stream.Signature(result_layout(32, tag_width)))
        The integer's bits and the flags (inexact or invalid).
    latency : int
        3 cycles: shift amount, shift, round and saturate.

    Throughput is one conversion per cycle (II = 1) while ``o.ready`` is high.
    """

    PARAMS = conversion_params("input format")

    def __init__(self, *, fmt="f32", flush_subnormals=False, integer="i32", tag_width=0):
        self._fmt, self._flush = self._check_common(fmt, flush_subnormals)
        self._signed = integer == "i32"
        if self._fmt.precision > _WIDTH + 1:
            raise ValueError(f"fmt must have precision at most {_WIDTH + 1}, not {self._fmt.precision}")
        super().__init__(input_width=self._fmt.width, output_width=_WIDTH, operands=("a",),
                         tag_width=tag_width, latency=3)

    def _datapath(self, m, pipe):
        fmt, signed = self._fmt, self._signed
        a = UnpackedFloat(fmt, self.i.payload.a, flush_subnormals=self._flush)
        # The significand's top bit starts at the window's top, with weight 2**31 (bit 0 of the
        # window is the guard bit), and moves right by 31 - (unbiased exponent).
        distance = (_WIDTH - 1 + fmt.bias) - a.exponent
        s = pipe.stage(sign=a.sign, nan=a.is_nan, too_large=(distance < 0) | a.is_infinite,
                       shift=Mux(distance < 0, 0, distance).as_unsigned(),
                       significand=Cat(Const(0, _WIDTH + 1 - fmt.precision), a.significand))

        shifted, sticky = shift_right_sticky(s.significand, s.shift)
        s = pipe.stage(s, "sign", "nan", "too_large", integer=shifted[1:], guard=shifted[0], sticky=sticky)

        integer, sign = s.integer, s.sign
        round_up = s.guard & (s.sticky | integer[0])
        inexact = s.guard | s.sticky
        if signed:
            # |result| = integer + round_up must stay below 2**31, or equal it when negative.
            top, rest_ones, rest_any = integer[-1], integer[:-1].all(), integer[:-1].any()
            overflow = s.too_large | Mux(sign, top & (rest_any | round_up), top | (rest_ones & round_up))
            saturated = Mux(sign & ~s.nan, 1 << (_WIDTH - 1), (1 << (_WIDTH - 1)) - 1)
            # One adder rounds and negates: -(x + r) = ~x + (1 - r).
            value = (integer ^ sign.replicate(_WIDTH)) + (round_up ^ sign)
        else:
            overflow = s.too_large | (integer.all() & round_up) | (sign & (integer.any() | round_up))
            saturated = Mux(sign & ~s.nan, 0, (1 << _WIDTH) - 1)
            value = integer + round_up
        invalid = s.nan | overflow
        pipe.output(result=Mux(invalid, saturated, value[:_WIDTH]),
                    flags=Mux(invalid, FLAG_INVALID, Mux(inexact, FLAG_INEXACT, 0)))


register_unit(
    "fp_to_int", FloatToInteger,
    summary="Pipelined float to i32/u32 conversion (round to nearest even, RISC-V saturation).",
    golden="golden.fp.convert:convert",
)
