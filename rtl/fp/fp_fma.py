"""Pipelined IEEE-754 fused multiply-add."""

from amaranth.hdl import Cat, Const, Mux

from .classify import SpecialResult, UnpackedFloat, infinity
from .pipeline import ProductUnit, register_unit
from .product import TiledProduct
from .rounding import denormalise, denormalise_shift
from .shift import (
    add_or_subtract,
    block_leading_zeros,
    combine_block_leading_zeros,
    count_leading_zeros,
    normalise_left,
    shift_right_sticky,
)

__all__ = ["FloatFusedMultiplyAdd"]

# Shifters wider than this take two stages (coarse then by the low _FINE_SHIFT_BITS).
_ONE_STAGE_SHIFT = 64
_FINE_SHIFT_BITS = 4

# Window bits below the product: guard, round and sticky for the addend's lost bits, enough
# even when a subnormal factor leaves the product with leading zeros.
_LOW_BITS = 3
# Bits between the product and the addend placed above it, so that a product too small to
# matter there only acts as a sticky bit.
_GAP_BITS = 2


def _split(amount, split):
    """``(coarse, fine)`` parts of a shift amount, or the whole amount and 0."""
    if not split:
        return amount, Const(0, 0)
    return Cat(Const(0, _FINE_SHIFT_BITS), amount[_FINE_SHIFT_BITS:]), amount[:_FINE_SHIFT_BITS]


def _top_offset(fmt):
    # The product's top bit (window bit 2p + _LOW_BITS - 1) has biased exponent
    # a.exponent + b.exponent - bias + 1; the window's top bit has p + _GAP_BITS more, and
    # that is where the addend's hidden bit sits before it is shifted right by `distance`.
    return fmt.precision + _GAP_BITS + 1 - fmt.bias


class FloatFusedMultiplyAdd(ProductUnit):
    """Pipelined fused multiply-add: ``a * b + c`` with a single rounding to nearest even.

    The exact product (DSP-sized tiles, as in :class:`~rtl.fp.fp_mul.FloatMultiplier`)
    stays at a fixed place in a ``3p + 5`` bit window while the addend ``c`` is aligned
    against it, in the same cycles as the multiplication; an addend more than ``p + 2``
    bits above the product is kept at the top and the product then only acts as a sticky
    bit. The sum, or the positive difference, is normalised with a leading-zero count, cut
    to ``p + 2`` bits plus a sticky bit and rounded by the shared rounding core. Subnormal
    factors need no normalising: the window keeps enough bits below the product.

    Parameters
    ----------
    fmt, flush_subnormals, dsp_tile, lut_bits, tag_width
        As for :class:`~rtl.fp.fp_mul.FloatMultiplier`: the format, flushing subnormal operands
        and results, the widest factor one DSP block multiplies, the low bits of one
        significand multiplied in LUTs (the latency does not change), the tag's width.

    Attributes
    ----------
    i : In(stream.Signature(operand_layout(fmt.width, ("a", "b", "c"), tag_width)))
        Operands.
    o : Out(stream.Signature(result_layout(fmt.width, tag_width)))
        Result and flags. ``0 * inf`` raises invalid even when ``c`` is a quiet NaN (as
        SoftFloat does), as do ``inf - inf`` and signaling NaNs; NaN results are the
        canonical quiet NaN. An exact zero result is ``-0`` only when ``a * b`` and ``c``
        are both ``-0``.
    latency : int
        8 cycles: unpack, compare exponents and multiply, align the addend and add the
        product tiles, add, count leading zeros, normalise, subnormal shift, round. One less
        with ``flush_subnormals``. Three more when the window is wider than 64 bits, which
        then takes two steps each to align, add and normalise: f32 takes 11 (10 when
        flushing), f16 and bf16 take 8 (7 when flushing).

    Throughput is one operation per cycle (II = 1) while ``o.ready`` is high.
    """

    OPERANDS = ("a", "b", "c")

    @property
    def _split_shifts(self):
        # A window wider than one stage's shifter aligns, adds and normalises in two steps each.
        return 3 * self._fmt.precision + _LOW_BITS + _GAP_BITS + 1 > _ONE_STAGE_SHIFT

    def _latency(self):
        return 8 - self._flush + 3 * self._split_shifts

    def _datapath(self, m, pipe):
        fmt, flush = self._fmt, self._flush
        p = fmt.precision
        window = 3 * p + _LOW_BITS + _GAP_BITS
        payload = self.i.payload
        a = UnpackedFloat(fmt, payload.a, flush_subnormals=flush)
        b = UnpackedFloat(fmt, payload.b, flush_subnormals=flush)
        c = UnpackedFloat(fmt, payload.c, flush_subnormals=flush)

        # Stage 1: unpack and start on the exponents; the addend's exponent is offset here so
        # that each comparison in stage 2 is a single subtraction.
        top_offset = _top_offset(fmt)
        s = pipe.stage(
            a_class=a.classes, b_class=b.classes, c_class=c.classes,
            a=a.significand, b=b.significand, c=c.significand,
            exponent_sum=a.exponent + b.exponent, addend_reference=c.exponent - top_offset,
            addend_limit=c.exponent - top_offset + window + 1, addend_carry_exponent=c.exponent + 1)
        a, b, c = s.a_class, s.b_class, s.c_class

        # Stage 2: decide the special cases and multiply in DSP-sized tiles; meanwhile compare
        # the exponents. A much larger addend, or a zero product, stays at the top of the
        # window (a zero addend never does: the product's place must stay exact); one too far
        # below leaves only a sticky bit.
        product_sign = a.sign ^ b.sign
        product_zero = a.is_zero | b.is_zero
        invalid_product = (a.is_infinite & b.is_zero) | (a.is_zero & b.is_infinite)
        product_infinite = (a.is_infinite | b.is_infinite) & ~a.is_nan & ~b.is_nan & ~invalid_product
        opposite_infinities = product_infinite & c.is_infinite & (product_sign ^ c.sign)
        special = SpecialResult.nan_or(
            fmt, nan=a.is_nan | b.is_nan | c.is_nan | invalid_product | opposite_infinities,
            invalid=a.is_signaling | b.is_signaling | c.is_signaling | invalid_product | opposite_infinities,
            active=product_infinite | c.is_infinite,
            bits=infinity(fmt, Mux(product_infinite, product_sign, c.sign)))

        product = TiledProduct(s.a, s.b, tile=self._tile, lut_bits=self._lut_bits)
        distance = s.exponent_sum - s.addend_reference
        addend_on_top = ~c.is_zero & (product_zero | (distance < 0))
        stays = addend_on_top | (distance < 0)
        s = pipe.stage(
            s, "c", **product.partials, product_sign=product_sign, addend_sign=c.sign, special=special,
            # Registered early: it steers every bit of the adder in stage 4.
            subtract=product_sign ^ c.sign,
            distance=distance[:window.bit_length()], stays=stays,
            too_far=~stays & (s.exponent_sum - s.addend_limit >= 0),
            # The exponent of the sum's top bit (the carry of an addition).
            carry_exponent=Mux(addend_on_top, s.addend_carry_exponent, s.exponent_sum + (top_offset + 1)))

        # Stage 3: add the product tiles up and align the addend; its lost bits join the
        # window's lowest bit. A window too wide for one stage of shifting finishes in stage 3b.
        coarse, fine = _split(s.distance, self._split_shifts)
        placed = Cat(Const(0, window - p), s.c)
        shifted, lost = shift_right_sticky(placed, coarse)
        s = pipe.stage(s, "product_sign", "addend_sign", "subtract", "special", "carry_exponent",
                       product=product.total(s),
                       addend=Mux(s.stays, placed, Mux(s.too_far, 0, shifted)),
                       lost=Mux(s.stays, 0, Mux(s.too_far, s.c.any(), lost)),
                       fine_shift=Mux(s.stays | s.too_far, 0, fine))
        shifted, lost = shift_right_sticky(s.addend, s.fine_shift)
        s = pipe.stage(s, "product_sign", "addend_sign", "subtract", "special", "carry_exponent", "product",
                       enabled=self._split_shifts, addend=shifted | lost | s.lost)

        # Stage 4: add, or subtract both ways; a wide window picks the positive difference
        # in stage 4b, away from the carry chains.
        placed = Cat(Const(0, _LOW_BITS), s.product, Const(0, window - _LOW_BITS - 2 * p))
        forward, no_borrow = add_or_subtract(placed, s.addend, s.subtract)
        s = pipe.stage(s, "special", "carry_exponent", "product_sign", "addend_sign",
                       enabled=self._split_shifts, forward=forward,
                       backward=(s.addend - placed)[:window + 1], negative=s.subtract & ~no_borrow,
                       # An exact zero is -0 only when both terms are -0 (round to nearest).
                       zero_sign=s.product_sign & s.addend_sign)
        s = pipe.stage(s, "special", "carry_exponent", "zero_sign",
                       magnitude=Mux(s.negative, s.backward, s.forward),
                       sign=Mux(s.negative, s.addend_sign, s.product_sign))

        # Stage 5: count leading zeros; a wide window counts per block here and combines the
        # counts in stage 6.
        width = window + 1
        if self._split_shifts:
            s = pipe.stage(s, "special", "carry_exponent", "magnitude", "sign", "zero_sign",
                           **block_leading_zeros(s.magnitude, _FINE_SHIFT_BITS))
            shift, zero = combine_block_leading_zeros(s, width, _FINE_SHIFT_BITS)
        else:
            shift, zero = count_leading_zeros(s.magnitude), s.magnitude == 0
            s = pipe.stage(s, "special", "carry_exponent", "magnitude", "sign", "zero_sign",
                           shift=shift, zero=zero)
            shift, zero = s.shift, s.zero

        # Stage 6: normalise and keep p + 2 bits. A wide window shifts by whole blocks here and
        # finishes in stage 6b; the sticky bit masks what the last shift drops, beside it.
        kept = p + 2
        low_width = width - kept
        coarse, fine = _split(shift, True) if self._split_shifts else (Const(0, 1), shift)
        s = pipe.stage(s, "special", enabled=self._split_shifts,
                       magnitude=normalise_left(s.magnitude, coarse), fine_shift=fine,
                       exponent=s.carry_exponent - shift, sign=Mux(zero, s.zero_sign, s.sign))
        low_mask = Const((1 << low_width) - 1, width) >> s.fine_shift
        s = pipe.stage(s, "sign", "special", "exponent",
                       significand=normalise_left(s.magnitude, s.fine_shift)[low_width:],
                       sticky=(s.magnitude & low_mask).any(),
                       subnormal_shift=denormalise_shift(fmt, s.exponent, kept, flush_subnormals=flush))

        # Stage 7 (not when flushing, whose one-bit shift fits in the last stage): shift tiny
        # results onto the subnormal grid.
        aligned = denormalise(fmt, exponent=s.exponent, significand=s.significand, sticky=s.sticky,
                              shift=s.subnormal_shift, flush_subnormals=flush)
        if not flush:
            s = pipe.stage(s, "sign", "special", **aligned._asdict())
            aligned = s

        # Last stage: round, then let NaN and infinity override.
        pipe.round_output(fmt, s.special, sign=s.sign, exponent=aligned.exponent,
                          significand=aligned.significand, sticky=aligned.sticky, flush_subnormals=flush)


register_unit(
    "fp_fma", FloatFusedMultiplyAdd,
    summary="Pipelined IEEE-754 fused multiply-add a * b + c (II = 1, single rounding, SoftFloat flags).",
    golden="golden.fp.arith:fma",
)
