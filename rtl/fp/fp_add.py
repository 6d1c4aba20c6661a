"""Pipelined IEEE-754 addition and subtraction."""

from amaranth.hdl import Cat, Const, Mux

from ..registration import Param, Parameterized
from .classify import SpecialResult, UnpackedFloat, infinity
from .pipeline import FLUSH_PARAM, FORMAT_PARAM, TAG_PARAM, FloatUnit, register_unit
from .shift import (
    add_or_subtract,
    block_leading_zeros,
    combine_block_leading_zeros,
    normalise_left,
    one_hot_from_top,
    shift_right_sticky,
)

__all__ = ["FloatAdder"]

# Guard, round and sticky positions below the significand during alignment.
_GUARD_BITS = 3
# Stage 3 counts leading zeros in blocks of 2**_COUNT_BLOCK_BITS bits, stage 4 combines them.
_COUNT_BLOCK_BITS = 2


class FloatAdder(Parameterized, FloatUnit):
    """Pipelined floating-point adder: ``a + b`` (or ``a - b``), rounded to nearest even.

    The operands are swapped so the larger magnitude comes first, the smaller is aligned
    with guard, round and sticky bits, added or subtracted, normalised by a leading-zero
    count that stops at the subnormal boundary (a subnormal sum is always exact), and
    rounded by :func:`~rtl.fp.rounding.round_aligned`.

    Parameters
    ----------
    fmt : str or FloatFormat
        Operand and result format: ``"f32"``, ``"f16"``, ``"bf16"`` or any :class:`FloatFormat`.
    flush_subnormals : bool
        Read subnormal operands as zero and flush subnormal results to zero (with
        underflow and inexact).
    subtract : bool
        Compute ``a - b`` instead of ``a + b``.
    tag_width : int
        Width of the tag carried from ``i`` to ``o`` (0 for none).

    Attributes
    ----------
    i : In(stream.Signature(operand_layout(fmt.width, ("a", "b"), tag_width)))
        Operands.
    o : Out(stream.Signature(result_layout(fmt.width, tag_width)))
        Result and exception flags (inexact, underflow, overflow, invalid). NaN results
        are the canonical quiet NaN; ``inf - inf`` and signaling NaNs raise invalid.
    latency : int
        6 cycles: swap, align, add (and count the leading zeros of each 4-bit block of the
        sum), combine the block counts, normalise, round.

    Throughput is one operation per cycle (II = 1) while ``o.ready`` is high; a low
    ``o.ready`` with a valid output holds the whole pipeline.
    """

    PARAMS = (
        FORMAT_PARAM,
        FLUSH_PARAM,
        Param("subtract", bool, False, "compute a - b instead of a + b"),
        TAG_PARAM,
    )

    LATENCY = 6

    def __init__(self, *, fmt="f32", flush_subnormals=False, subtract=False, tag_width=0):
        self._fmt, self._flush = self._check_common(fmt, flush_subnormals)
        super().__init__(input_width=self._fmt.width, output_width=self._fmt.width, operands=("a", "b"),
                         tag_width=tag_width, latency=self.LATENCY)

    def _datapath(self, m, pipe):
        fmt, flush = self._fmt, self._flush
        p, e = fmt.precision, fmt.exponent_bits
        payload = self.i.payload
        b_bits = Cat(payload.b[:-1], ~payload.b[-1]) if self._subtract else payload.b
        a = UnpackedFloat(fmt, payload.a, flush_subnormals=flush)
        b = UnpackedFloat(fmt, b_bits, flush_subnormals=flush)

        # Stage 1: order the operands by magnitude, so the sum is never negative.
        swap = b.magnitude > a.magnitude
        # Both exponent differences are formed beside the compare, so that the swap only
        # chooses one: no subtraction behind the compare's carry chain.
        a_minus_b = (a.exponent - b.exponent)[:e]
        b_minus_a = (b.exponent - a.exponent)[:e]
        big_exponent = Mux(swap, b.exponent, a.exponent)
        big_sign = Mux(swap, b.sign, a.sign)
        effective_subtract = a.sign ^ b.sign
        opposite_infinities = a.is_infinite & b.is_infinite & effective_subtract
        special = SpecialResult.nan_or(
            fmt, nan=a.is_nan | b.is_nan | opposite_infinities,
            invalid=a.is_signaling | b.is_signaling | opposite_infinities,
            active=a.is_infinite | b.is_infinite, bits=infinity(fmt, big_sign))
        s = pipe.stage(
            big_sign=big_sign, big_exponent=big_exponent, effective_subtract=effective_subtract,
            big_significand=Mux(swap, b.significand, a.significand),
            small_significand=Mux(swap, a.significand, b.significand),
            distance=Mux(swap, b_minus_a, a_minus_b),
            # An exact zero sum is -0 only when both addends are -0 (round to nearest).
            zero_sign=a.sign & b.sign, special=special)

        # Stage 2: align the smaller significand; the sticky bit joins the lowest position.
        shifted, sticky = shift_right_sticky(Cat(Const(0, _GUARD_BITS), s.small_significand), s.distance)
        s = pipe.stage(s, "big_sign", "big_exponent", "effective_subtract", "zero_sign", "special",
                       big=Cat(Const(0, _GUARD_BITS), s.big_significand), small=shifted | sticky)

        # Stage 3: add or subtract, and count the leading zeros of each 4-bit block of the sum.
        width = p + _GUARD_BITS
        total, _ = add_or_subtract(s.big, s.small, s.effective_subtract)
        # The leading-zero count is capped so that the exponent stops at the subnormal scale:
        # the top bit of ``total`` (the carry) has biased exponent big_exponent + 1. The cap is
        # decoded beside the adder. Counting in 4-bit blocks behind the adder leaves stage 4
        # only the choice of the first non-zero block (the full count there was the
        # critical path).
        cap = one_hot_from_top(width + 1, s.big_exponent)
        s = pipe.stage(s, "big_sign", "big_exponent", "zero_sign", "special", total=total,
                       **block_leading_zeros(total | cap, _COUNT_BLOCK_BITS))

        # Stage 4: combine the block counts into the leading-zero count. It is meaningless only
        # when ``total`` is zero, which normalises to zero whatever the shift (the exponent of a
        # zero significand is ignored by rounding).
        shift, _ = combine_block_leading_zeros(s, width + 1, _COUNT_BLOCK_BITS)
        s = pipe.stage(s, "total", "big_exponent", "special", shift=shift,
                       sign=Mux(s.total == 0, s.zero_sign, s.big_sign))

        # Stage 5: normalise.
        s = pipe.stage(s, "sign", "special", significand=normalise_left(s.total, s.shift),
                       exponent=s.big_exponent + 1 - s.shift)

        # Stage 6: round, then let NaN and infinity override.
        pipe.round_output(fmt, s.special, sign=s.sign, exponent=s.exponent, significand=s.significand,
                          sticky=0, flush_subnormals=flush)


register_unit(
    "fp_add", FloatAdder,
    summary="Pipelined IEEE-754 adder or subtractor (II = 1, round to nearest even, SoftFloat flags).",
    golden="golden.fp.arith:add",
)
