"""Arithmetic: add, sub, mul, div, fma and sqrt on raw bits (see :mod:`golden.fp` for the rules)."""

import numpy as np

from .core import (
    FLAG_DIVIDE_BY_ZERO,
    FLAG_INVALID,
    ZERO_EXPONENT,
    arith_format,
    as_bits,
    bit_length,
    broadcast,
    finish,
    round_pack,
    unpack,
)

__all__ = ["add", "sub", "mul", "div", "fma", "sqrt"]

_U64 = np.uint64
_ALIGN_MSB = 61


def _operands(fmt, flush, **operands):
    """Check, broadcast and unpack named raw-bit operands; returns the format and Unpacked list."""
    fmt = arith_format(fmt)
    arrays = broadcast(*(as_bits(value, fmt, name) for name, value in operands.items()))
    return fmt, [unpack(bits, fmt, flush) for bits in arrays]


def _nan_cases(fmt, *operands):
    """Special case for NaN operands: canonical NaN, invalid if any operand is signalling."""
    any_nan = np.logical_or.reduce([x.nan for x in operands])
    any_snan = np.logical_or.reduce([x.snan for x in operands])
    return any_nan, fmt.canonical_nan, np.where(any_snan, FLAG_INVALID, 0)


def _signed_inf(fmt, sign):
    return _U64(fmt.positive_infinity) | (sign << _U64(fmt.width - 1))


def _add_exact(sign_x, lsb_x, sig_x, sign_y, lsb_y, sig_y):
    """Add two exact terms ``(-1)**sign * sig * 2**lsb`` (``sig`` below 2**61).

    Returns ``(sign, exp, sig, sticky)`` for :func:`round_pack`. Both terms are aligned with their
    leading one at bit 61; the smaller one is shifted right, and the bits it loses only ever sit
    well below the rounding point (they are lost only when the exponents differ by 2 or more,
    so the sum keeps its leading one at bit 60 or above), so a sticky bit carries them exactly.
    An exact zero sum is +0 unless both terms are -0 (round to nearest).
    """
    terms = []
    for sig in (sig_x, sig_y):
        length = bit_length(sig)
        terms.append((sig << (_ALIGN_MSB + 1 - length).astype(_U64), length))
    (x, length_x), (y, length_y) = terms
    top_x = np.where(sig_x == 0, ZERO_EXPONENT, lsb_x + length_x - 1)
    top_y = np.where(sig_y == 0, ZERO_EXPONENT, lsb_y + length_y - 1)
    x_bigger = (top_x > top_y) | ((top_x == top_y) & (x >= y))
    big, small = np.where(x_bigger, x, y), np.where(x_bigger, y, x)
    top = np.where(x_bigger, top_x, top_y)
    distance = np.abs(top_x - top_y).astype(_U64)
    aligned = small >> distance
    sticky = (small & ((_U64(1) << distance) - _U64(1))) != 0
    subtract = sign_x != sign_y
    # Subtracting a value strictly between aligned and aligned+1 leaves one strictly between
    # (difference - 1) and difference, hence the borrow of the sticky bit.
    total = np.where(subtract, big - aligned - sticky.astype(_U64), big + aligned)
    sign = np.where(x_bigger, sign_x, sign_y)
    sign = np.where((total == 0) & ~sticky, sign_x & sign_y, sign)
    return sign, top - _ALIGN_MSB, total, sticky


def _add(fmt, a, b, flush):
    m = fmt.mantissa_bits
    sign, exp, sig, sticky = _add_exact(a.sign, a.exp - m, a.sig, b.sign, b.exp - m, b.sig)
    bits, flags = round_pack(sign, exp, sig, sticky, fmt, flush)
    inf_minus_inf = a.inf & b.inf & (a.sign != b.sign)
    return finish(bits, flags, fmt, [
        (a.inf, _signed_inf(fmt, a.sign), 0),
        (b.inf, _signed_inf(fmt, b.sign), 0),
        (inf_minus_inf, fmt.canonical_nan, FLAG_INVALID),
        _nan_cases(fmt, a, b),
    ])


def add(a, b, fmt="f32", flush_subnormals=False):
    """Compute ``a + b`` rounded to nearest even.

    Parameters
    ----------
    a, b : array_like of int
        Raw bits of ``fmt`` (uint32 for f32, uint16 for f16/bf16); broadcast together.
    fmt : str or FloatFormat
        ``"f32"``, ``"f16"`` or ``"bf16"``.
    flush_subnormals : bool
        Read subnormal inputs as zero and flush subnormal results to zero.

    Returns
    -------
    bits : numpy.ndarray
        Raw result bits in the format's storage dtype.
    flags : numpy.ndarray of uint8
        SoftFloat exception flags.
    """
    fmt, (a, b) = _operands(fmt, flush_subnormals, a=a, b=b)
    return _add(fmt, a, b, flush_subnormals)


def sub(a, b, fmt="f32", flush_subnormals=False):
    """Compute ``a - b``: :func:`add` with the sign of ``b`` flipped (NaN handling unchanged).

    Parameters and returns are those of :func:`add`.
    """
    fmt, (a, b) = _operands(fmt, flush_subnormals, a=a, b=b)
    return _add(fmt, a, b._replace(sign=b.sign ^ _U64(1)), flush_subnormals)


def mul(a, b, fmt="f32", flush_subnormals=False):
    """Compute ``a * b`` rounded to nearest even; ``0 * Inf`` is invalid.

    Parameters and returns are those of :func:`add`.
    """
    fmt, (a, b) = _operands(fmt, flush_subnormals, a=a, b=b)
    m = fmt.mantissa_bits
    sign = a.sign ^ b.sign
    bits, flags = round_pack(sign, a.exp + b.exp - 2 * m, a.sig * b.sig, False, fmt, flush_subnormals)
    return finish(bits, flags, fmt, [
        (a.zero | b.zero, sign << _U64(fmt.width - 1), 0),
        (a.inf | b.inf, _signed_inf(fmt, sign), 0),
        ((a.inf & b.zero) | (a.zero & b.inf), fmt.canonical_nan, FLAG_INVALID),
        _nan_cases(fmt, a, b),
    ])


def div(a, b, fmt="f32", flush_subnormals=False):
    """Compute ``a / b`` rounded to nearest even.

    A finite non-zero ``a`` over zero gives a signed Inf with divide-by-zero; ``0/0`` and
    ``Inf/Inf`` are invalid. Parameters and returns are those of :func:`add`.
    """
    fmt, (a, b) = _operands(fmt, flush_subnormals, a=a, b=b)
    # p + 2 extra quotient bits give at least p + 2 significant bits, enough for round_pack.
    extra = fmt.precision + 2
    divisor = np.where(b.zero, _U64(1), b.sig)
    quotient, remainder = np.divmod(a.sig << _U64(extra), divisor)
    sign = a.sign ^ b.sign
    bits, flags = round_pack(sign, a.exp - b.exp - extra, quotient, remainder != 0, fmt, flush_subnormals)
    zero = sign << _U64(fmt.width - 1)
    infinity = _signed_inf(fmt, sign)
    return finish(bits, flags, fmt, [
        (a.zero | b.inf, zero, 0),
        (b.zero, infinity, FLAG_DIVIDE_BY_ZERO),
        (a.inf, infinity, 0),
        ((a.zero & b.zero) | (a.inf & b.inf), fmt.canonical_nan, FLAG_INVALID),
        _nan_cases(fmt, a, b),
    ])


def fma(a, b, c, fmt="f32", flush_subnormals=False):
    """Compute ``a * b + c`` with a single rounding.

    ``Inf * 0`` is invalid even when ``c`` is a quiet NaN (SoftFloat's behaviour), and
    ``Inf - Inf`` between the product and ``c`` is invalid. The product is exact (at most 48
    bits) and the sum is exact plus a sticky bit, so everything stays in uint64 lanes.

    Parameters and returns are those of :func:`add`, with a third operand ``c`` broadcast
    together with ``a`` and ``b``.
    """
    fmt, (a, b, c) = _operands(fmt, flush_subnormals, a=a, b=b, c=c)
    m = fmt.mantissa_bits
    product_sign = a.sign ^ b.sign
    sign, exp, sig, sticky = _add_exact(product_sign, a.exp + b.exp - 2 * m, a.sig * b.sig,
                                        c.sign, c.exp - m, c.sig)
    bits, flags = round_pack(sign, exp, sig, sticky, fmt, flush_subnormals)
    product_inf = a.inf | b.inf
    inf_times_zero = (a.inf & b.zero) | (a.zero & b.inf)
    return finish(bits, flags, fmt, [
        (product_inf, _signed_inf(fmt, product_sign), 0),
        (c.inf, _signed_inf(fmt, c.sign), 0),
        (product_inf & c.inf & (product_sign != c.sign), fmt.canonical_nan, FLAG_INVALID),
        _nan_cases(fmt, a, b, c),
        (inf_times_zero, fmt.canonical_nan, FLAG_INVALID),
    ])


def _isqrt(n):
    """Floor square root of a uint64 array whose values are below 2**53, with the remainder."""
    root = np.floor(np.sqrt(n.astype(np.float64))).astype(_U64)
    # The float estimate is within one of the true root; step each way until exact.
    root = np.where(root * root > n, root - _U64(1), root)
    root = np.where((root + _U64(1)) * (root + _U64(1)) <= n, root + _U64(1), root)
    return root, n - root * root


def sqrt(a, fmt="f32", flush_subnormals=False):
    """Compute the square root of ``a`` rounded to nearest even.

    ``sqrt(-0) = -0``; any other negative input, ``-Inf`` included, is invalid.

    Parameters and returns are those of :func:`add`, with the one operand ``a`` (results are
    never subnormal, so ``flush_subnormals`` only reads subnormal inputs as zero).
    """
    fmt, (a,) = _operands(fmt, flush_subnormals, a=a)
    m = fmt.mantissa_bits
    scale = a.exp - m
    odd = scale & 1
    # 2*half_extra >= p + 3 extra radicand bits give a root of at least p + 2 significant bits.
    half_extra = (fmt.precision + 4) // 2
    radicand = (a.sig << odd.astype(_U64)) << _U64(2 * half_extra)
    root, remainder = _isqrt(radicand)
    bits, flags = round_pack(_U64(0), (scale - odd) // 2 - half_extra, root, remainder != 0, fmt,
                             flush_subnormals)
    negative = (a.sign == 1) & ~a.zero
    return finish(bits, flags, fmt, [
        (a.zero, a.sign << _U64(fmt.width - 1), 0),
        (a.inf, fmt.positive_infinity, 0),
        (negative, fmt.canonical_nan, FLAG_INVALID),
        _nan_cases(fmt, a),
    ])
