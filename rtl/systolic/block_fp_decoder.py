"""Block floating point conversion out of the array: one block back to binary32 per transfer."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream
from amaranth.lib.wiring import In, Out

from ..fp.shift import count_leading_zeros, normalise_left
from ..registration import NO_DROPS, register_block
from .block_fp_encoder import BlockFloatCodec, encoded_layout

__all__ = ["BlockFloatDecoder"]

_BIAS = 127
_MIN_SHARED, _MAX_SHARED = -126, 127


class BlockFloatDecoder(BlockFloatCodec):
    """Decode block floating point to binary32, as :func:`golden.systolic.from_block_fp`.

    Each element is ``mantissa * 2^scale`` with ``scale = exponent - (mantissa_bits - 2)``, which is
    exact in binary32 for every encoder output: with ``p`` the position of the mantissa's top bit,
    the biased exponent is ``E = p + scale + 127``; ``E >= 1`` gives a normal (the mantissa
    normalised below the hidden bit), ``E <= 0`` a subnormal whose fraction is the mantissa shifted
    left by ``scale + 149 >= 0``. Zero decodes to +0.0. The one input outside the encoder's symmetric
    range, ``-2^(mantissa_bits - 1)`` with exponent 127, is ``-2^128``, which binary32 rounds to
    -inf, as the model's cast does.

    An exponent outside -126 .. 127 is not an encoding (decoding it could need rounding): it sets
    ``invalid`` and the block decodes to +0.0. The ``invalid`` bit of the input (from
    :class:`~.block_fp_encoder.BlockFloatEncoder`) is passed on the same way.

    Parameters
    ----------
    block, mantissa_bits : int
        The format, as for :class:`~.block_fp_encoder.BlockFloatEncoder` (1 to 64; 2 to 24).

    Attributes
    ----------
    i : In(stream.Signature(StructLayout(exponent: signed(9), mantissas: ArrayLayout(signed(mantissa_bits),
        block), invalid: 1)))
        The encoder's output layout.
    o : Out(stream.Signature(StructLayout(values: ArrayLayout(unsigned(32), block), invalid: 1)))
        Raw binary32 bits in the order of ``i``.

    Notes
    -----
    Latency 3 (sign, magnitude and leading zeros; the exponent, the candidate encodings and the
    range compares; the choice among them), one block per cycle (II = 1). An elastic pipeline: a
    stage loads whenever it is empty or its content moves on, so ``i.ready`` follows ``o.ready``
    combinationally and ``o.valid`` never waits for ``o.ready``.
    """

    @staticmethod
    def _ports(block, mantissa_bits):
        return {"i": In(stream.Signature(encoded_layout(block, mantissa_bits))),
                "o": Out(stream.Signature(data.StructLayout({"values": data.ArrayLayout(unsigned(32), block),
                                                             "invalid": 1})))}

    def elaborate(self, platform):
        m = Module()
        bits = self._mantissa_bits
        # Three elastic stages: each loads when it is empty or its content moves on.
        load3 = ~self.o.valid | self.o.ready
        valid1, valid2 = Signal(), Signal()
        load2 = ~valid2 | load3
        m.d.comb += self.i.ready.eq(~valid1 | load2)

        # Stage 1: each mantissa's sign, magnitude and leading zeros; the block's error bit, and from
        # its scale the biased exponent of a top bit at position bits - 1 and the subnormal shift.
        # (In one cycle with stage 2 the path from the input through the negation, the count, the
        # exponent and its range checks to the output was the block's ECP5 critical path, 90.1 MHz.)
        exponent = self.i.payload.exponent
        element = data.StructLayout({"sign": 1, "magnitude": unsigned(bits),  # 2^(bits-1) needs all bits
                                     "leading": range(bits + 1)})
        held = Signal(data.ArrayLayout(element, self._block))
        scale = exponent - (bits - 2)
        top_biased = Signal(signed(11))  # scale + (bits - 1) + 127: E for leading = 0
        # E = top_biased - leading >= 255 (infinite) and >= 1 (normal), as bounds on `leading`.
        infinite_within = Signal(signed(11))
        normal_within = Signal(signed(11))
        subnormal_shift = Signal(unsigned(5))  # scale + 149; below 23 whenever E <= 0
        invalid = Signal()
        with m.If(self.i.ready):
            m.d.sync += [valid1.eq(self.i.valid), top_biased.eq(scale + (bits - 1 + _BIAS)),
                         infinite_within.eq(scale + (bits - 1 + _BIAS - 255)),
                         normal_within.eq(scale + (bits - 1 + _BIAS - 1)),
                         subnormal_shift.eq(scale + 149),
                         invalid.eq(self.i.payload.invalid | (exponent < _MIN_SHARED)
                                    | (exponent > _MAX_SHARED))]
        for index in range(self._block):
            mantissa = self.i.payload.mantissas[index]
            magnitude = Signal(unsigned(bits), name=f"magnitude_{index}")
            m.d.comb += magnitude.eq(Mux(mantissa[-1], -mantissa, mantissa))
            with m.If(self.i.ready):
                m.d.sync += held[index].eq(Cat(mantissa[-1], magnitude, count_leading_zeros(magnitude)))

        # Stage 2: the biased exponent, the normal and subnormal encodings, and which of them (or
        # zero, or infinity) applies; stage 3 only chooses. (With the choice in stage 2 the path
        # from a registered bound through the compares and the 32-bit choice to the output was
        # the block's ECP5 critical path, 118.7 MHz.)
        choice = data.StructLayout({"zero": 1, "infinite": 1, "normal": 1, "sign": 1,
                                    "normal_bits": 31, "subnormal_bits": 23})
        chosen = Signal(data.ArrayLayout(choice, self._block))
        invalid2 = Signal()
        with m.If(load2):
            m.d.sync += [valid2.eq(valid1), invalid2.eq(invalid)]
        for index in range(self._block):
            sign, magnitude, leading = held[index].sign, held[index].magnitude, held[index].leading
            biased = Signal(signed(11), name=f"biased_{index}")  # p + scale + 127, p = bits - 1 - leading
            m.d.comb += biased.eq(top_biased - leading)
            # Normal: the top bit becomes the hidden bit; the bits below it lead the fraction.
            normalised = normalise_left(magnitude, leading)
            fraction = Cat(Const(0, 23 - (bits - 1)), normalised[:bits - 1]) if bits > 1 else Const(0, 23)
            # Subnormal (biased <= 0): the value is magnitude * 2^(scale + 149) times the LSB 2^-149;
            # the shift is below 23 whenever biased <= 0.
            with m.If(load2):
                m.d.sync += chosen[index].eq(Cat(magnitude == 0, leading <= infinite_within,
                                                 leading <= normal_within, sign, Cat(fraction, biased[:8]),
                                                 (magnitude << subnormal_shift)[:23]))

        # Stage 3: zero, infinite, normal or subnormal; an invalid block decodes to +0.0.
        with m.If(load3):
            m.d.sync += [self.o.valid.eq(valid2), self.o.payload.invalid.eq(invalid2)]
            for index in range(self._block):
                c = chosen[index]
                infinite = Cat(Const(0, 23), Const(0xFF, 8), c.sign)
                normal = Cat(c.normal_bits, c.sign)
                subnormal = Cat(c.subnormal_bits, Const(0, 8), c.sign)
                m.d.sync += self.o.payload.values[index].eq(
                    Mux(invalid2 | c.zero, 0, Mux(c.infinite, infinite, Mux(c.normal, normal, subnormal))))
        return m


register_block(
    "block_fp_decoder", BlockFloatDecoder, family="systolic",
    summary="Block floating point (shared exponent, integer mantissas) back to binary32, as golden.",
    golden="golden.systolic.block_fp:from_block_fp",
    drops=NO_DROPS,
)
