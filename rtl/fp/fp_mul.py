"""Pipelined IEEE-754 multiplication."""

from amaranth.hdl import Cat, Mux

from .classify import SpecialResult, UnpackedFloat, infinity
from .pipeline import ProductUnit, register_unit
from .product import TiledProduct, partial_count
from .rounding import denormalise, denormalise_shift
from .shift import count_leading_zeros, normalise_left

__all__ = ["FloatMultiplier"]


def _product_top(product, exponent, width):
    """The top ``width`` bits of a product with one leading zero or none, and a sticky bit.

    ``product`` is ``2p`` bits, the product of two normalised significands; ``exponent``
    is the biased exponent of its top bit. Returns ``(significand, exponent, sticky)``
    normalised to the top bit (for a non-zero product).
    """
    top = product[-1]
    shifted = Mux(top, product, Cat(0, product[:-1]))
    return shifted[-width:], exponent - ~top, shifted[:-width].any()


class FloatMultiplier(ProductUnit):
    """Pipelined floating-point multiplier: ``a * b``, rounded to nearest even.

    Subnormal operands are normalised first (leading-zero count, then shift), the
    significands are multiplied as DSP-sized tiles, each a plain ``*`` (see
    :class:`~rtl.fp.product.TiledProduct`), the product is normalised by at most one bit,
    shifted onto the subnormal grid if tiny, and rounded by the shared rounding core.

    Parameters
    ----------
    fmt : str or FloatFormat
        Operand and result format: ``"f32"``, ``"f16"``, ``"bf16"`` or any :class:`FloatFormat`.
    flush_subnormals : bool
        Read subnormal operands as zero and flush subnormal results to zero (with
        underflow and inexact). Removes the operand normaliser and the subnormal shifter.
    dsp_tile : int
        Widest factor one DSP block multiplies, 8 to 64 (18 for ECP5's MULT18X18D). Wider
        significands (f32's 24 bits) are split into tiles whose products are registered
        straight out of the DSPs and added in the next stage, which costs one cycle. A tile
        at least the precision keeps a single ``*``: for f32 on UltraScale+ that takes 2
        DSP48E2 instead of 5, but on ECP5 the DSPs and their adders then share one cycle
        (about 85 MHz instead of 125).
    lut_bits : int
        Low bits of one significand multiplied in LUTs instead of DSPs, 0 (default) to the
        precision (see :class:`~rtl.fp.product.TiledProduct`). With ``dsp_tile=24`` and
        ``lut_bits=7`` an f32 product takes one DSP48E2 on xcup (24x17) and seven LUT rows.
        The result is the same bit for bit; only the mapping changes.
    tag_width : int
        Width of the tag carried from ``i`` to ``o`` (0 for none).

    Attributes
    ----------
    i : In(stream.Signature(operand_layout(fmt.width, ("a", "b"), tag_width)))
        Operands.
    o : Out(stream.Signature(result_layout(fmt.width, tag_width)))
        Result and flags. ``0 * inf`` and signaling NaNs raise invalid; NaN results are
        the canonical quiet NaN.
    latency : int
        6 cycles (count leading zeros, normalise, multiply, product normalise, subnormal
        shift, round); 4 with ``flush_subnormals`` (unpack, multiply, product normalise,
        round). Plus 1 when the product has several partials to add (f32 with the default
        tile: 7, or 5 when flushing; also whenever ``0 < lut_bits < precision``).

    Throughput is one operation per cycle (II = 1) while ``o.ready`` is high.
    """

    OPERANDS = ("a", "b")

    def _latency(self):
        p = self._fmt.precision
        tiled = partial_count(p, p, tile=self._tile, lut_bits=self._lut_bits) > 1
        return (4 if self._flush else 6) + tiled

    def _datapath(self, m, pipe):
        fmt, flush = self._fmt, self._flush
        p = fmt.precision
        a = UnpackedFloat(fmt, self.i.payload.a, flush_subnormals=flush)
        b = UnpackedFloat(fmt, self.i.payload.b, flush_subnormals=flush)
        sign = a.sign ^ b.sign
        invalid_product = (a.is_infinite & b.is_zero) | (a.is_zero & b.is_infinite)
        special = SpecialResult.nan_or(
            fmt, nan=a.is_nan | b.is_nan | invalid_product,
            invalid=a.is_signaling | b.is_signaling | invalid_product,
            active=a.is_infinite | b.is_infinite, bits=infinity(fmt, sign))

        # Stage 1: classify; count the leading zeros of subnormal significands.
        s = pipe.stage(sign=sign, special=special, a=a.significand, b=b.significand,
                       a_exponent=a.exponent, b_exponent=b.exponent,
                       a_shift=0 if flush else count_leading_zeros(a.significand),
                       b_shift=0 if flush else count_leading_zeros(b.significand))

        # Stage 2: normalise subnormal operands (nothing to do when flushing).
        a_significand = normalise_left(s.a, s.a_shift)
        b_significand = normalise_left(s.b, s.b_shift)
        # Biased exponent of the product's top bit: (1.x * 1.y) < 4 has weight 2**1 there.
        exponent = (s.a_exponent - s.a_shift) + (s.b_exponent - s.b_shift) - fmt.bias + 1
        s = pipe.stage(s, "sign", "special", enabled=not flush,
                       a=a_significand, b=b_significand, exponent=exponent)

        # Stage 3: multiply in DSP-sized tiles; stage 4 adds the tiles up when there are several.
        product = TiledProduct(s.a, s.b, tile=self._tile, lut_bits=self._lut_bits)
        s = pipe.stage(s, "sign", "special", "exponent", **product.partials)
        s = pipe.stage(s, "sign", "special", "exponent", enabled=not product.single, product=product.total(s))

        # Stage 4: normalise the product by one bit and keep p + 2 bits and a sticky bit.
        significand, exponent, sticky = _product_top(s.product, s.exponent, p + 2)
        # Both candidate shifts come from the registered exponent, beside the product's top bit.
        shift = Mux(s.product[-1], denormalise_shift(fmt, s.exponent, p + 2, flush_subnormals=flush),
                    denormalise_shift(fmt, s.exponent - 1, p + 2, flush_subnormals=flush))
        # Stage 5 (not when flushing, whose one-bit shift fits in stage 4): shift tiny results
        # onto the subnormal grid.
        s = pipe.stage(s, "sign", "special", enabled=not flush,
                       significand=significand, exponent=exponent, sticky=sticky, shift=shift)
        aligned = denormalise(fmt, exponent=s.exponent, significand=s.significand, sticky=s.sticky,
                              shift=s.shift, flush_subnormals=flush)
        s = pipe.stage(s, "sign", "special", **aligned._asdict())

        # Last stage: round, then let NaN and infinity override.
        pipe.round_stage(fmt, s.special, s, flush_subnormals=flush)


register_unit(
    "fp_mul", FloatMultiplier,
    summary="Pipelined IEEE-754 multiplier (II = 1, round to nearest even, SoftFloat flags).",
    golden="golden.fp.arith:mul",
)
