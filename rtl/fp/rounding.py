"""The rounding core: round to nearest even, pack, and raise the IEEE flags.

Every arithmetic unit ends here. The core is split in two steps so that a unit can put
a pipeline register between them:

1. :func:`denormalise` takes an exact-ish result (a significand, a sticky bit and an
   unbounded exponent) and, when the result is below the normal range, shifts it right
   onto the subnormal grid.
2. :func:`round_aligned` rounds that aligned significand to the format's precision,
   packs it and computes the flags.

:func:`round_to_format` does both in one combinational step, and
:func:`denormalise_shift` works out the shift of step 1 from the exponent alone, so a
unit can compute it one stage earlier and leave only the shifter in step 1's stage.

Conventions shared by all three functions (``p = fmt.precision``):

``significand``
    Unsigned, ``W`` bits. Bit ``W - 1`` has the weight of the hidden bit: the value is
    ``significand * 2**(exponent - fmt.bias - (W - 1))``. :func:`round_aligned` needs
    ``W >= p + 2`` (hidden bit, fraction, guard, and one more bit for the tininess test);
    :func:`denormalise` and :func:`round_to_format` take any width and pad narrower
    significands with zeros at the bottom, e.g. a divider's ``p + 1`` bits (hidden bit,
    fraction, guard) plus sticky.
``exponent``
    The *biased* exponent of bit ``W - 1``, as a signed (or unsigned) value of any
    width. It is unbounded: values below 1 mean the result is tiny, values of
    ``fmt.max_exponent_field`` or more mean it overflows.
``sticky``
    1 when the exact result has set bits below the least significant bit of
    ``significand``.
``flush_subnormals``
    A Python bool. When True, results that are subnormal after rounding become zero of
    the same sign, with underflow and inexact raised. This also removes the
    denormalising shifter from the hardware.

The result is rounded to nearest, ties to even. Tininess is detected after rounding
(as x86 and SoftFloat's default do): underflow is raised when the result is inexact and
would be below ``2**emin`` even if rounded with an unbounded exponent. Overflow returns
infinity with overflow and inexact. Zeros pass through exactly (no flags); NaN and
infinite operands are not this core's business (see :class:`~rtl.fp.classify.SpecialResult`).
"""

from typing import NamedTuple

from amaranth.hdl import Cat, Const, Mux, Value

from .format import float_format
from .shift import shift_right_sticky

__all__ = ["Aligned", "Rounded", "denormalise_shift", "denormalise", "round_aligned", "round_to_format"]


class Aligned(NamedTuple):
    """Output of :func:`denormalise`, input of :func:`round_aligned`."""

    exponent: Value
    significand: Value
    sticky: Value


class Rounded(NamedTuple):
    """A packed result: ``bits`` of the target format and ``flags`` (5 bits, SoftFloat order)."""

    bits: Value
    flags: Value


def _check_width(fmt, significand):
    if len(significand) < fmt.precision + 2:
        raise ValueError(f"significand must be at least precision + 2 = {fmt.precision + 2} bits wide "
                         f"for {fmt.name}, not {len(significand)}")


def _padded(fmt, significand):
    # Zeros below the least significant bit do not change the value.
    significand = Value.cast(significand)
    missing = fmt.precision + 2 - len(significand)
    return Cat(Const(0, missing), significand) if missing > 0 else significand


def denormalise_shift(fmt, exponent, width, *, flush_subnormals):
    """How far :func:`denormalise` shifts, computed from the exponent alone.

    A unit can compute this one stage early (e.g. beside its adder or multiplier) and pass
    it to :func:`denormalise` as ``shift``, which then holds just the shifter.

    Parameters
    ----------
    fmt : FloatFormat or str
        Target format.
    exponent : Value
        The unbounded biased exponent, as in the module docstring.
    width : int
        Width of the significand that will be shifted.
    flush_subnormals : bool
        As for :func:`denormalise`.

    Returns
    -------
    Value
        Without flushing, the unsigned right shift, ``1 - exponent`` for tiny results and
        0 otherwise, saturated at ``max(width, p + 2)``. With flushing, two bits: bit 0 set
        when the result is tiny (exponent below 1), bit 1 when it is below half the
        smallest normal (exponent below 0).
    """
    fmt = float_format(fmt)
    exponent = Value.cast(exponent)
    tiny = exponent < 1
    if flush_subnormals:
        return Cat(tiny, exponent < 0)
    limit = max(width, fmt.precision + 2)
    # Anything from ``limit`` up moves every bit into the sticky bit.
    return Mux(tiny, Mux(exponent < 1 - limit, limit, 1 - exponent), 0).as_unsigned()[:limit.bit_length()]


def denormalise(fmt, *, exponent, significand, sticky, flush_subnormals, shift=None):
    """Move a result below the normal range onto the subnormal grid.

    Parameters
    ----------
    fmt : FloatFormat or str
        Target format.
    exponent, significand, sticky
        As in the module docstring. ``significand`` must be normalised (bit ``W - 1`` set)
        whenever ``exponent >= 2``; at ``exponent <= 1`` leading zeros are allowed, and a
        zero significand gives a zero result.
    flush_subnormals : bool
        When True only a one-bit shift is built (at ``exponent == 0`` the result may still
        round up to the smallest normal); anything smaller is collapsed into the sticky bit,
        which :func:`round_aligned` then flushes to zero.
    shift : Value, optional
        :func:`denormalise_shift` of this exponent and significand width, computed earlier;
        computed here when omitted.

    Returns
    -------
    Aligned
        ``exponent`` saturated to ``fmt.exponent_bits`` unsigned bits (``max_exponent_field``
        for any overflowing value), the shifted ``significand`` (at least ``p + 2`` bits;
        bit ``W - 1`` clear when shifted, and then the exponent no longer matters) and the
        updated ``sticky``: ready for :func:`round_aligned`, possibly after a pipeline
        register.
    """
    fmt = float_format(fmt)
    exponent = Value.cast(exponent)
    significand = _padded(fmt, significand)
    sticky = Value.cast(sticky)
    if shift is None:
        shift = denormalise_shift(fmt, exponent, len(significand), flush_subnormals=flush_subnormals)
    shift = Value.cast(shift)
    if flush_subnormals:
        tiny, below_half = shift[0], shift[1]
        shifted = Mux(below_half, 0, Mux(tiny, significand >> 1, significand))
        lost = Mux(below_half, significand.any(), tiny & significand[0])
    else:
        shifted, lost = shift_right_sticky(significand, shift)
    # Saturating the exponent to the field's width here turns the overflow test of
    # round_aligned into an equality. (A shifted result ignores its exponent.)
    top = fmt.max_exponent_field
    clamped = Mux(exponent >= top, top, exponent[:fmt.exponent_bits])
    return Aligned(clamped, shifted, sticky | lost)


def round_aligned(fmt, *, sign, exponent, significand, sticky, flush_subnormals):
    """Round, pack and flag a significand that is already on the format's grid.

    Parameters
    ----------
    fmt : FloatFormat or str
        Target format.
    sign : Value
        Sign of the result (also of a zero or flushed result).
    exponent : Value
        Biased exponent of bit ``W - 1`` when that bit is set; values of
        ``fmt.max_exponent_field`` or more overflow. Ignored when bit ``W - 1`` is clear:
        the significand is then a subnormal (or zero) on the ``2**emin`` scale.
    significand : Value
        ``W >= p + 2`` bits, hidden-bit position at bit ``W - 1``.
    sticky : Value
        Set bits exist below the significand.
    flush_subnormals : bool
        Flush results that are subnormal after rounding to zero.

    Returns
    -------
    Rounded
        ``bits`` (``fmt.width`` wide) and ``flags`` (inexact, underflow, overflow).
    """
    fmt = float_format(fmt)
    exponent = Value.cast(exponent)
    significand = Value.cast(significand)
    _check_width(fmt, significand)
    p, m, e = fmt.precision, fmt.mantissa_bits, fmt.exponent_bits
    width = len(significand)

    normal = significand[width - 1]
    fraction = significand[width - p:width - 1]
    guard = significand[width - p - 1]
    rest = significand[:width - p - 1].any() | sticky
    inexact = guard | rest
    round_up = guard & (rest | fraction[0])

    # A carry out of the fraction increments the exponent field, which is exactly the
    # IEEE encoding of the rounded value (including subnormal -> smallest normal).
    field = Mux(normal, exponent[:e], 0)
    word = (Cat(fraction, field) + round_up)[:m + e]
    # Overflow and flushing are decided beside the incrementer, not behind it.
    carry = round_up & fraction.all()
    top = fmt.max_exponent_field
    if not exponent.shape().signed and len(exponent) <= e:
        # A saturated exponent (from denormalise) reaches the top field only by equality.
        huge = exponent == top
    else:
        huge = exponent >= top
    overflow = normal & (huge | ((exponent == top - 1) & carry))

    # Below 2**emin, and not rounding up to it when rounded at full precision.
    tiny = ~normal & ~significand[width - p - 2:width - 1].all()
    underflow = tiny & inexact
    if flush_subnormals:
        # A non-zero value below 2**emin that does not round up to it ends up subnormal.
        flushed = ~normal & ~carry & (significand.any() | sticky)
    else:
        flushed = Const(0)

    magnitude = Mux(overflow, Const(fmt.positive_infinity, m + e), Mux(flushed, 0, word))
    flags = Cat(inexact | overflow | flushed, underflow | flushed, overflow, Const(0, 2))
    return Rounded(Cat(magnitude, sign), flags)


def round_to_format(fmt, *, sign, exponent, significand, sticky, flush_subnormals):
    """:func:`denormalise` then :func:`round_aligned`, combinationally.

    Parameters and return value are those of the two steps; see the module docstring.
    """
    aligned = denormalise(fmt, exponent=exponent, significand=significand, sticky=sticky,
                          flush_subnormals=flush_subnormals)
    return round_aligned(fmt, sign=sign, exponent=aligned.exponent, significand=aligned.significand,
                         sticky=aligned.sticky, flush_subnormals=flush_subnormals)
