"""Pipelined f16/bf16 x f16/bf16 -> f32 multiplication: the product of a systolic PE."""

from amaranth.hdl import Cat, Const, Mux, Signal, signed

from ..fp.classify import SpecialResult, UnpackedFloat, infinity, zero
from ..fp.format import F32, float_format
from ..fp.pipeline import TAG_PARAM, FloatUnit
from ..fp.rounding import denormalise, denormalise_shift, round_aligned
from ..fp.shift import count_leading_zeros, normalise_left
from ..registration import NO_DROPS, Param, Parameterized, register_block

__all__ = ["WideningMultiplier", "WIDENING_FORMATS"]

WIDENING_FORMATS = ("f16", "bf16")


class WideningMultiplier(Parameterized, FloatUnit):
    """``f32(a) * f32(b)`` rounded to nearest even, for 16-bit operands.

    This is the product :func:`golden.systolic.gemm` defines for f16 and bf16 elements. The
    significands (11 or 8 bits) are multiplied as they are, so one small DSP (or LUTs) does
    the work of the 24 x 24 multiplier that widening first would need. An f16 product is
    always an exact f32 normal (its significand has at most 22 bits and its magnitude lies
    in [2^-48, 2^32)), so the f16 unit has no rounding logic. A bf16 product can overflow to
    infinity or fall into the f32 subnormal range; it goes through the shared rounding core.

    Parameters
    ----------
    fmt : {"f16", "bf16"}
        Operand format.
    tag_width : int
        Width of the tag carried from ``i`` to ``o`` (0 for none).

    Attributes
    ----------
    i : In(stream.Signature(operand_layout(16, ("a", "b"), tag_width)))
        Operands, raw bits.
    o : Out(stream.Signature(result_layout(32, tag_width)))
        Raw binary32 result and flags (invalid for ``0 * inf`` and signaling NaNs; bf16 also
        inexact, underflow, overflow). NaN results are the canonical quiet NaN.
    latency : int
        f16: 2 (multiply; normalise and pack). bf16: 3 (multiply; normalise; shift onto the
        subnormal grid and round).

    Throughput is one operation per cycle (II = 1) while ``o.ready`` is high.
    """

    PARAMS = (
        Param("fmt", str, "f16", "operand format", choices=WIDENING_FORMATS),
        TAG_PARAM,
    )

    def __init__(self, *, fmt="f16", tag_width=0):
        self._fmt = float_format(fmt)
        # Every product of two f16 values is an exact f32 normal or zero; bf16 products are not.
        self._exact = fmt == "f16"
        super().__init__(input_width=self._fmt.width, output_width=F32.width, operands=("a", "b"),
                         tag_width=tag_width, latency=2 if self._exact else 3)

    def _datapath(self, m, pipe):
        fmt = self._fmt
        a = UnpackedFloat(fmt, self.i.payload.a, flush_subnormals=False)
        b = UnpackedFloat(fmt, self.i.payload.b, flush_subnormals=False)
        sign = a.sign ^ b.sign
        invalid_product = (a.is_infinite & b.is_zero) | (a.is_zero & b.is_infinite)
        infinite = a.is_infinite | b.is_infinite
        special = SpecialResult.nan_or(
            F32, nan=a.is_nan | b.is_nan | invalid_product,
            invalid=a.is_signaling | b.is_signaling | invalid_product,
            active=infinite | a.is_zero | b.is_zero,
            bits=Mux(infinite, infinity(F32, sign), zero(F32, sign)))
        # Biased f32 exponent of the top bit of the 2p-bit product: significand * 2^(e - bias - m)
        # per operand (UnpackedFloat), so the top bit weighs 2^(ea + eb - 2 bias + 1).
        exponent = Signal(signed(12))
        m.d.comb += exponent.eq(a.exponent + b.exponent + (F32.bias + 1 - 2 * fmt.bias))

        # Stage 1: the significand product (one DSP or a LUT multiplier).
        s = pipe.stage(sign=sign, special=special, exponent=exponent,
                       product=a.significand * b.significand)

        # Stage 2: normalise; only subnormal operands leave more than one leading zero.
        shift = count_leading_zeros(s.product)
        significand = normalise_left(s.product, shift)
        exponent = s.exponent - shift
        if self._exact:
            width = len(significand)
            bits = Cat(Const(0, F32.mantissa_bits - (width - 1)), significand[:width - 1], exponent[:8],
                       s.sign)
            result, flags = s.special.select(bits, 0)
            pipe.output(result=result, flags=flags)
            return
        s = pipe.stage(s, "sign", "special", significand=significand, exponent=exponent,
                       shift=denormalise_shift(F32, exponent, F32.precision + 2, flush_subnormals=False))

        # Stage 3: move tiny products onto the subnormal grid, round, let specials override.
        aligned = denormalise(F32, exponent=s.exponent, significand=s.significand, sticky=0,
                              flush_subnormals=False, shift=s.shift)
        rounded = round_aligned(F32, sign=s.sign, exponent=aligned.exponent, significand=aligned.significand,
                                sticky=aligned.sticky, flush_subnormals=False)
        result, flags = s.special.select(*rounded)
        pipe.output(result=result, flags=flags)


register_block(
    "widening_multiplier", WideningMultiplier, family="systolic",
    summary="Pipelined f16/bf16 multiplier with an f32 result (the systolic PE's product).",
    golden="golden.systolic.numerics:gemm",
    drops=NO_DROPS,
)
