"""Shared pieces of the bit-exact float model: operand checks, unpacking, rounding and packing.

Every operation in :mod:`golden.fp` unpacks its operands with :func:`unpack`, computes an exact
(or exact-plus-sticky) integer result, and hands it to :func:`round_pack`, which is the only
place where rounding, overflow, underflow and flushing happen.
"""

from typing import NamedTuple

import numpy as np

from .formats import (
    FLAG_DIVIDE_BY_ZERO,
    FLAG_INEXACT,
    FLAG_INVALID,
    FLAG_OVERFLOW,
    FLAG_UNDERFLOW,
    FloatFormat,
    float_format,
)

__all__ = ["FLAG_INEXACT", "FLAG_UNDERFLOW", "FLAG_OVERFLOW", "FLAG_DIVIDE_BY_ZERO", "FLAG_INVALID",
           "F64", "Unpacked", "arith_format", "storage_dtype", "as_bits", "broadcast", "bit_length",
           "shift_right_round", "unpack", "round_pack", "flush_bits", "finish"]

# Only used to read NumPy float64 values in from_float; not an operation format.
F64 = FloatFormat("f64", 11, 52)

# Exponent given to zero significands so that a zero always loses a magnitude comparison and
# aligns to nothing; far below any reachable exponent yet far from int64 overflow.
ZERO_EXPONENT = -(1 << 40)

# round_pack normalises every significand so that its leading one sits at this bit. 61 leaves
# the top two bits free for the carries of add and fma.
_NORMAL_MSB = 61

_U64 = np.uint64


class Unpacked(NamedTuple):
    """An array of floats split into fields.

    For finite non-zero values ``value = (-1)**sign * sig * 2**(exp - mantissa_bits)`` with
    ``sig`` normalised to ``[2**mantissa_bits, 2**(mantissa_bits + 1))``, subnormals included
    (their ``exp`` is below ``emin``). Zeros have ``sig == 0`` and ``exp == ZERO_EXPONENT``.
    The ``sig``/``exp`` of Inf and NaN lanes are harmless placeholders.
    """

    sign: np.ndarray
    exp: np.ndarray
    sig: np.ndarray
    zero: np.ndarray
    inf: np.ndarray
    nan: np.ndarray
    snan: np.ndarray


def arith_format(fmt):
    """Return the :class:`FloatFormat` for an arithmetic operation.

    Parameters
    ----------
    fmt : str or FloatFormat
        ``"f32"``, ``"f16"``, ``"bf16"`` or a format with precision at most 24.

    Returns
    -------
    FloatFormat

    Raises
    ------
    ValueError
        If ``fmt`` is unknown or too wide for the 64-bit integer datapath of fma, div and sqrt.
    """
    fmt = float_format(fmt)
    if fmt.precision > 24:
        raise ValueError(f"fmt must have precision <= 24 for arithmetic, not {fmt.precision} ({fmt.name})")
    return fmt


def storage_dtype(fmt):
    """The unsigned NumPy dtype that holds the raw bits of ``fmt``."""
    for dtype in (np.uint16, np.uint32, np.uint64):
        if fmt.width <= 8 * np.dtype(dtype).itemsize:
            return np.dtype(dtype)
    raise ValueError(f"fmt width must be at most 64 bits, not {fmt.width}")


def as_bits(x, fmt, name):
    """Check raw-bit operands and return them as a uint64 array.

    Parameters
    ----------
    x : array_like of int
        Raw encodings. Unsigned arrays of any width that fits, signed arrays of exactly the
        format's width (reinterpreted), or non-negative Python/NumPy integers.
    fmt : FloatFormat
        The format the bits encode.
    name : str
        Parameter name used in error messages.

    Returns
    -------
    numpy.ndarray of uint64

    Raises
    ------
    ValueError
        If ``x`` is not integer or holds values outside ``[0, 2**fmt.width)``.
    """
    arr = np.asarray(x)
    if arr.dtype.kind not in "ui":
        raise ValueError(f"{name} must hold raw {fmt.name} bits as integers, not dtype {arr.dtype}")
    if arr.dtype.kind == "i" and arr.dtype.itemsize * 8 == fmt.width:
        arr = arr.view(storage_dtype(fmt))
    elif arr.size and (arr.dtype.kind == "i" or arr.dtype.itemsize * 8 > fmt.width):
        if arr.min() < 0 or int(arr.max()) >> fmt.width:
            raise ValueError(f"{name} must hold raw {fmt.name} bits in [0, 2**{fmt.width})")
    return arr.astype(_U64)


def broadcast(*arrays):
    """Broadcast operand arrays to one shape (read-only views)."""
    return np.broadcast_arrays(*arrays)


def bit_length(x):
    """Vectorised ``int.bit_length`` of a uint64 array, as int64 (0 for 0)."""
    x = np.asarray(x, dtype=_U64)
    # Each 32-bit half converts to float64 exactly, so frexp's exponent is its exact bit length.
    _, high = np.frexp((x >> _U64(32)).astype(np.float64))
    _, low = np.frexp((x & _U64(0xFFFFFFFF)).astype(np.float64))
    return np.where(x >> _U64(32) != 0, high.astype(np.int64) + 32, low.astype(np.int64))


def shift_right_round(sig, shift, sticky=False):
    """Shift right and round to nearest, ties to even.

    Parameters
    ----------
    sig : numpy.ndarray of uint64
        Significands.
    shift : numpy.ndarray of int64
        Right shift amounts, at least 1; amounts of 64 and more shift everything out.
    sticky : numpy.ndarray of bool or bool
        True where the exact value lies strictly between ``sig`` and ``sig + 1``.

    Returns
    -------
    rounded : numpy.ndarray of uint64
        ``sig * 2**-shift`` rounded to an integer (it may carry into a new top bit).
    inexact : numpy.ndarray of bool
        True where bits were lost.
    """
    shift = shift.astype(_U64)
    kept = sig >> shift
    half = (sig >> (shift - _U64(1))) & _U64(1)
    # NumPy defines shifts of 64 or more as 0, so the mask below becomes all ones there.
    rest = ((sig & ((_U64(1) << (shift - _U64(1))) - _U64(1))) != 0) | sticky
    round_up = (half != 0) & (rest | ((kept & _U64(1)) != 0))
    return kept + round_up.astype(_U64), (half != 0) | rest


def unpack(bits, fmt, flush):
    """Split raw bits into an :class:`Unpacked`.

    Parameters
    ----------
    bits : numpy.ndarray of uint64
        Raw encodings of ``fmt``.
    fmt : FloatFormat
        Operand format.
    flush : bool
        Read subnormals as zeros of the same sign.

    Returns
    -------
    Unpacked
    """
    m = fmt.mantissa_bits
    sign = bits >> _U64(fmt.width - 1)
    field = ((bits >> _U64(m)) & _U64(fmt.max_exponent_field)).astype(np.int64)
    frac = bits & _U64((1 << m) - 1)
    special = field == fmt.max_exponent_field
    nan = special & (frac != 0)
    snan = nan & ((frac >> _U64(m - 1)) == 0)
    subnormal = (field == 0) & (frac != 0)
    if flush:
        frac = np.where(subnormal, _U64(0), frac)
        subnormal = np.zeros_like(subnormal)
    zero = (field == 0) & (frac == 0)
    # Normalise subnormals so every finite non-zero significand has its leading one at bit m.
    lead = np.where(subnormal, m + 1 - bit_length(frac), 0)
    sig = np.where(field > 0, frac | _U64(1 << m), frac << lead.astype(_U64))
    exp = np.where(subnormal, fmt.emin - lead, field - fmt.bias)
    exp = np.where(zero, ZERO_EXPONENT, np.where(special, 0, exp))
    sig = np.where(special, _U64(1 << m), sig)
    return Unpacked(sign, exp, sig, zero, special & ~nan, nan, snan)


def round_pack(sign, exp, sig, sticky, fmt, flush):
    """Round an exact result to ``fmt`` and encode it, with IEEE flags.

    Rounding is to nearest, ties to even; tininess is detected after rounding; overflow gives
    Inf with overflow and inexact. With ``flush``, a non-zero result whose rounded encoding is
    subnormal becomes a zero of the same sign and raises underflow and inexact.

    Parameters
    ----------
    sign : numpy.ndarray of uint64
        Sign bits (0 or 1); zero results keep this sign.
    exp : numpy.ndarray of int64
        Exponent of the significand's least significant bit.
    sig : numpy.ndarray of uint64
        Integer significand; the value is ``(sig + d) * 2**exp`` with ``d`` below.
    sticky : numpy.ndarray of bool or bool
        Where True, ``0 < d < 1`` (bits were lost below ``sig``), else ``d == 0``. Where True,
        ``sig`` must have at least ``fmt.precision + 1`` significant bits.
    fmt : FloatFormat
        Result format.
    flush : bool
        Flush subnormal results to zero.

    Returns
    -------
    bits : numpy.ndarray of uint64
        Encoded results.
    flags : numpy.ndarray of uint8
        SoftFloat flag bits.
    """
    m, p = fmt.mantissa_bits, fmt.precision
    length = bit_length(sig)
    left = np.clip(_NORMAL_MSB + 1 - length, 0, None)
    right = np.clip(length - _NORMAL_MSB - 1, 0, None)
    sticky = sticky | ((sig & ((_U64(1) << right.astype(_U64)) - _U64(1))) != 0)
    sig = (sig >> right.astype(_U64)) << left.astype(_U64)
    # A zero significand must pack as zero whatever exponent came with it.
    exp = np.where(sig == 0, ZERO_EXPONENT, exp + right - left)
    msb = exp + _NORMAL_MSB
    lsb = np.maximum(msb, fmt.emin) - m
    kept, inexact = shift_right_round(sig, lsb - exp, sticky)
    biased = np.minimum(lsb + m + fmt.bias - 1, fmt.max_exponent_field).astype(_U64)
    # A carry out of the significand bumps the exponent field by itself, and the hidden bit of a
    # normal result adds the last 1 to the field, so no case analysis is needed here.
    mag = (biased << _U64(m)) + kept
    overflow = mag >= _U64(fmt.positive_infinity)
    mag = np.where(overflow, _U64(fmt.positive_infinity), mag)
    # Tiny after rounding: below 2**emin even when rounded to p bits with unbounded exponent. In
    # the binade just below 2**emin only a run of p+1 leading ones rounds up to 2**emin.
    all_ones = (sig >> _U64(_NORMAL_MSB - p)) == _U64((1 << (p + 1)) - 1)
    tiny = (msb < fmt.emin - 1) | ((msb == fmt.emin - 1) & ~all_ones)
    flags = (inexact * FLAG_INEXACT | (tiny & inexact) * FLAG_UNDERFLOW
             | overflow * (FLAG_OVERFLOW | FLAG_INEXACT)).astype(np.uint8)
    if flush:
        flushed = (mag != 0) & (mag < _U64(1 << m))
        mag = np.where(flushed, _U64(0), mag)
        flags = flags | (flushed * (FLAG_UNDERFLOW | FLAG_INEXACT)).astype(np.uint8)
    return mag | (sign << _U64(fmt.width - 1)), flags


def flush_bits(bits, fmt):
    """Replace subnormal encodings by zeros of the same sign (uint64 in, uint64 out)."""
    subnormal = ((bits >> _U64(fmt.mantissa_bits)) & _U64(fmt.max_exponent_field)) == 0
    return np.where(subnormal, bits & _U64(fmt.sign_mask), bits)


def finish(bits, flags, fmt, special_cases=()):
    """Apply special-case overrides and cast to the storage dtype.

    Parameters
    ----------
    bits : numpy.ndarray of uint64
        Results of the finite path.
    flags : numpy.ndarray of uint8
        Flags of the finite path.
    fmt : FloatFormat
        Result format.
    special_cases : iterable of (mask, bits, flags)
        Applied in order, so later entries win; ``bits`` and ``flags`` may be scalars or arrays.

    Returns
    -------
    bits : numpy.ndarray
        Results in ``storage_dtype(fmt)``.
    flags : numpy.ndarray of uint8
    """
    for mask, case_bits, case_flags in special_cases:
        bits = np.where(mask, np.asarray(case_bits, dtype=_U64), bits)
        flags = np.where(mask, np.asarray(case_flags, dtype=np.uint8), flags)
    # NumPy turns 0-d results into scalars along the way; callers always get arrays.
    return np.asarray(bits, dtype=storage_dtype(fmt)), np.asarray(flags, dtype=np.uint8)
