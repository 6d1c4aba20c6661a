"""Unpacking and classification of floating-point operands, and special-case results.

Every unit starts with :class:`UnpackedFloat` on its raw operand bits and ends by
choosing between its rounded datapath result and a :class:`SpecialResult` (NaN,
infinity or an exact zero decided from the operand classes alone).
"""

from amaranth.hdl import Cat, Const, Mux, Value

from .format import float_format
from .interface import FLAG_INVALID

__all__ = ["UnpackedFloat", "FloatClass", "SpecialResult", "infinity", "zero", "canonical_nan"]


class UnpackedFloat:
    """The fields and class of one operand, as combinational expressions.

    Parameters
    ----------
    fmt : FloatFormat or str
        Format of ``bits``.
    bits : Value
        Raw encoding, ``fmt.width`` bits.
    flush_subnormals : bool
        Read subnormal encodings as zero of the same sign.

    Attributes
    ----------
    sign : Value
        Sign bit.
    exponent : Value
        Effective biased exponent, ``fmt.exponent_bits`` wide: the exponent field, or 1
        for zeros and subnormals so that ``significand * 2**(exponent - bias - mantissa_bits)``
        is the value of every finite operand.
    significand : Value
        ``fmt.precision`` bits: the hidden bit (set for normal numbers) above the fraction.
        Zero for zeros, and for subnormals when flushing.
    is_zero, is_subnormal, is_infinite, is_nan, is_signaling, is_finite : Value
        Class bits; ``is_subnormal`` is never set when flushing.
    canonical_bits : Value
        The encoding of the value as read: ``bits``, with subnormals replaced by zeros of
        the same sign when flushing.
    """

    def __init__(self, fmt, bits, *, flush_subnormals):
        fmt = float_format(fmt)
        bits = Value.cast(bits)
        self.format = fmt
        self.bits = bits
        m = fmt.mantissa_bits
        fraction = bits[:m]
        field = bits[m:m + fmt.exponent_bits]
        self.sign = bits[-1]
        self.fraction = fraction

        exponent_zero = field == 0
        exponent_ones = field == fmt.max_exponent_field
        fraction_zero = fraction == 0

        self.exponent = field | exponent_zero
        # The encoding as read: subnormals become zeros of the same sign when flushing.
        self.canonical_bits = bits
        if flush_subnormals:
            self.canonical_bits = Cat(Mux(exponent_zero, 0, fraction), field, self.sign)
        if flush_subnormals:
            self.is_zero = exponent_zero
            self.is_subnormal = Const(0)
            self.significand = Mux(exponent_zero, 0, Cat(fraction, 1))
        else:
            self.is_zero = exponent_zero & fraction_zero
            self.is_subnormal = exponent_zero & ~fraction_zero
            self.significand = Cat(fraction, ~exponent_zero)
        self.is_infinite = exponent_ones & fraction_zero
        self.is_nan = exponent_ones & ~fraction_zero
        self.is_signaling = self.is_nan & ~fraction[m - 1]
        self.is_finite = ~exponent_ones

    @property
    def classes(self):
        """The sign and class bits alone, as a :class:`FloatClass` to carry through registers."""
        return FloatClass(**{name: getattr(self, name) for name in FloatClass.FIELDS})

    @property
    def magnitude(self):
        """The encoding without its sign: orders finite magnitudes like unsigned integers.

        Subnormals are not flushed here: flushed subnormals and zeros compare in either order.
        """
        return self.bits[:-1]

    @property
    def flushed_magnitude(self):
        """:attr:`magnitude` of the value as read (zero for flushed subnormals)."""
        return self.canonical_bits[:-1]


class FloatClass:
    """The sign and class bits of an operand (the attributes of :class:`UnpackedFloat` named
    in :data:`FIELDS`), so that special cases can be decided a stage after unpacking."""

    FIELDS = ("sign", "is_zero", "is_infinite", "is_nan", "is_signaling")

    def __init__(self, **fields):
        for name in self.FIELDS:
            setattr(self, name, fields[name])

    def map_values(self, function):
        """A copy with ``function(value, name)`` applied to each field (used for pipelining)."""
        return FloatClass(**{name: function(getattr(self, name), name) for name in self.FIELDS})


def infinity(fmt, sign):
    """The encoding of infinity with the given sign."""
    fmt = float_format(fmt)
    return Cat(Const(fmt.positive_infinity, fmt.width - 1), sign)


def zero(fmt, sign):
    """The encoding of zero with the given sign."""
    fmt = float_format(fmt)
    return Cat(Const(0, fmt.width - 1), sign)


def canonical_nan(fmt):
    """The quiet NaN every unit returns for a NaN result."""
    fmt = float_format(fmt)
    return Const(fmt.canonical_nan, fmt.width)


class SpecialResult:
    """A result decided from the operand classes, which overrides the datapath.

    Parameters
    ----------
    active : Value
        1 when this result is used instead of the rounded one.
    bits : Value
        The result encoding.
    flags : Value or int
        Exception flags to report with it.
    """

    def __init__(self, active, bits, flags=0):
        self.active = Value.cast(active)
        self.bits = Value.cast(bits)
        self.flags = Value.cast(flags)

    @classmethod
    def nan_or(cls, fmt, *, nan, invalid, active, bits):
        """NaN (with ``invalid`` as its flag) when ``nan``, else ``bits`` when ``active``.

        ``invalid`` may only be set together with ``nan``.
        """
        return cls(nan | active, Mux(nan, canonical_nan(fmt), bits), Mux(invalid, FLAG_INVALID, 0))

    def map_values(self, function):
        """A copy with ``function(value, name)`` applied to each field (used for pipelining)."""
        return SpecialResult(function(self.active, "active"), function(self.bits, "bits"),
                             function(self.flags, "flags"))

    def select(self, bits, flags):
        """Return ``(bits, flags)``: this result when active, else the given ones."""
        return Mux(self.active, self.bits, bits), Mux(self.active, self.flags, flags)
