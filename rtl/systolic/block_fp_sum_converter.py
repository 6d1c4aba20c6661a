"""Scaled conversion of an integer block sum to binary32: ``f32_rne(p * 2^scale)``."""

from amaranth.hdl import Cat, Const, Mux, signed

from ..fp.pipeline import FloatUnit
from ..fp.rounding import round_to_format
from ..fp.shift import count_leading_zeros, normalise_left
from ..registration import check_int

__all__ = ["BlockSumConverter", "SCALE_WIDTH"]

SCALE_WIDTH = 12  # two 9-bit shared exponents plus the mantissa offsets, with room to spare


class BlockSumConverter(FloatUnit):
    """``f32_rne(p * 2^scale)`` for a signed integer ``p``, rounded once as in ``block_fp_gemm``.

    The golden model forms ``ldexp(float64(p), scale)`` (exact) and rounds it to binary32 once;
    here the magnitude of ``p`` is normalised by a leading-zero count and the shared rounding
    core rounds it at the unbounded biased exponent ``127 + (W - 1) - shift + scale``, which covers
    gradual underflow (subnormal and zero results) and overflow to infinity. ``p = 0`` gives +0.

    Parameters
    ----------
    width : int
        Width of the two's complement ``p`` (2 to 64).
    tag_width : int
        Side-band bits carried from ``i`` to ``o``.

    Attributes
    ----------
    i : In(stream.Signature(StructLayout(a: width, b: 12, tag)))
        ``a`` is ``p`` (two's complement), ``b`` the scale (two's complement, 12 bits).
    o : Out(stream.Signature(result_layout(32, tag_width)))
        Raw binary32 result and flags (inexact, underflow, overflow).
    latency : int
        4 (magnitude, leading-zero count, normalise, round); II = 1.
    """

    LATENCY = 4

    def __init__(self, *, width, tag_width=0):
        self._width = check_int("width", width, 2, 64)
        super().__init__(input_width=max(width, SCALE_WIDTH), output_width=32, operands=("a", "b"),
                         tag_width=tag_width, latency=self.LATENCY)

    def _datapath(self, m, pipe):
        width = self._width
        value = self.i.payload.a[:width].as_signed()
        scale = self.i.payload.b[:SCALE_WIDTH].as_signed()
        sign = value[-1]
        # |p| fits width bits even for -2^(width-1) (as an unsigned value).
        s = pipe.stage(sign=sign, magnitude=Mux(sign, -value, value)[:width], scale=scale)
        s = pipe.stage(s, "sign", "magnitude", "scale", shift=count_leading_zeros(s.magnitude))
        significand_width = max(width, 26)  # round_aligned needs precision + 2 bits
        significand = Cat(Const(0, significand_width - width), normalise_left(s.magnitude, s.shift))
        exponent = (Const(127 + width - 1, signed(10)) - s.shift + s.scale).as_signed()
        s = pipe.stage(s, "sign", significand=significand, exponent=exponent)
        rounded = round_to_format("f32", sign=s.sign, exponent=s.exponent, significand=s.significand,
                                  sticky=0, flush_subnormals=False)
        pipe.output(result=rounded.bits, flags=rounded.flags)
