"""Conversions between float formats and 32-bit integers (see :mod:`golden.fp` for the rules)."""

import numpy as np

from .core import FLAG_INVALID, as_bits, finish, round_pack, shift_right_round, unpack
from .formats import FORMATS, float_format

__all__ = ["INTEGER_FORMATS", "convert"]

_U64 = np.uint64

# Integer formats: (dtype, smallest value, largest value).
INTEGER_FORMATS = {
    "i32": (np.dtype(np.int32), -(1 << 31), (1 << 31) - 1),
    "u32": (np.dtype(np.uint32), 0, (1 << 32) - 1),
}


def _format(name, parameter):
    if isinstance(name, str) and name in INTEGER_FORMATS:
        return name
    try:
        return float_format(name)
    except ValueError:
        choices = sorted(FORMATS) + sorted(INTEGER_FORMATS)
        raise ValueError(f"{parameter} must be one of {choices} or a FloatFormat, not {name!r}") from None


def _integers(x, kind):
    """Check integer operands of ``kind`` and return them as int64."""
    dtype, low, high = INTEGER_FORMATS[kind]
    arr = np.asarray(x)
    if arr.dtype.kind not in "ui":
        raise ValueError(f"x must hold {kind} integers, not dtype {arr.dtype}")
    if arr.dtype.itemsize == 4 and arr.dtype != dtype:
        arr = arr.view(dtype)  # the same 32 bits reinterpreted, as a register would hold them
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < low or arr.max() > high):
        raise ValueError(f"x must hold {kind} integers in [{low}, {high}]")
    return arr


def _float_to_float(x, src, dst, flush):
    a = unpack(as_bits(x, src, "x"), src, flush)
    bits, flags = round_pack(a.sign, a.exp - src.mantissa_bits, a.sig, False, dst, flush)
    return finish(bits, flags, dst, [
        (a.inf, _U64(dst.positive_infinity) | (a.sign << _U64(dst.width - 1)), 0),
        (a.nan, dst.canonical_nan, np.where(a.snan, FLAG_INVALID, 0)),
    ])


def _int_to_float(x, kind, dst, flush):
    values = _integers(x, kind)
    sign = (values < 0).astype(_U64)
    bits, flags = round_pack(sign, np.zeros_like(values), np.abs(values).astype(_U64), False, dst, flush)
    return finish(bits, flags, dst)


def _float_to_int(x, src, kind, flush):
    dtype, low, high = INTEGER_FORMATS[kind]
    a = unpack(as_bits(x, src, "x"), src, flush)
    m = src.mantissa_bits
    # Exponents of 40 and more are out of range for every integer format; capping them keeps the
    # left shift inside 64 bits.
    exp = np.minimum(a.exp, 40)
    whole = a.sig << np.clip(exp - m, 0, None).astype(_U64)
    rounded, inexact = shift_right_round(a.sig, np.clip(m - exp, 1, None))
    exact_integer = exp >= m
    magnitude = np.where(exact_integer, whole, rounded).astype(np.int64)
    inexact &= ~exact_integer
    value = np.where(a.sign == 1, -magnitude, magnitude)
    in_range = ~a.nan & ~a.inf & (value >= low) & (value <= high)
    # Out of range saturates towards the operand's sign; NaN counts as positive (RISC-V).
    saturated = np.where((a.sign == 1) & ~a.nan, low, high)
    result = np.where(in_range, value, saturated)
    flags = np.where(in_range, inexact, 0) | np.where(in_range, 0, FLAG_INVALID)
    return np.asarray(result, dtype=dtype), np.asarray(flags, dtype=np.uint8)


def convert(x, src, dst, flush_subnormals=False):
    """Convert raw values from format ``src`` to format ``dst``.

    Float to float rounds to nearest even (widening is exact); a NaN becomes the canonical NaN
    of ``dst`` (invalid if it was signalling). Integer to float rounds to nearest even. Float to
    integer rounds to nearest even like SoftFloat's ``f32_to_i32(x, round_near_even, exact=True)``:
    inexact if the value was not an integer; NaN, Inf and values that round outside the integer
    range raise invalid only and give the RISC-V saturation values (NaN and +overflow give the
    largest integer, -overflow the smallest, so 0 for u32 and -2**31 for i32).

    Parameters
    ----------
    x : array_like of int
        Raw bits of ``src`` for a float source; for an integer source, integers of that kind
        (32-bit arrays of the other signedness are reinterpreted bit for bit).
    src, dst : str or FloatFormat
        ``"f32"``, ``"f16"``, ``"bf16"``, ``"i32"`` or ``"u32"``; at least one must be a float
        format.
    flush_subnormals : bool
        Read subnormal float inputs as zeros of the same sign and flush subnormal float
        results to zero (with underflow and inexact).

    Returns
    -------
    result : numpy.ndarray
        Raw bits of ``dst`` for a float result; int32 or uint32 values for an integer result.
    flags : numpy.ndarray of uint8
        SoftFloat exception flags.

    Raises
    ------
    ValueError
        If a format is unknown, both are integer formats, or ``x`` does not fit ``src``.
    """
    src, dst = _format(src, "src"), _format(dst, "dst")
    if isinstance(src, str) and isinstance(dst, str):
        raise ValueError(f"src and dst cannot both be integer formats, got {src!r} and {dst!r}")
    if isinstance(src, str):
        return _int_to_float(x, src, dst, flush_subnormals)
    if isinstance(dst, str):
        return _float_to_int(x, src, dst, flush_subnormals)
    return _float_to_float(x, src, dst, flush_subnormals)
