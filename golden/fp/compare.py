"""Comparisons and min/max on raw bits (see :mod:`golden.fp` for the rules)."""

import numpy as np

from .core import FLAG_INVALID, arith_format, as_bits, broadcast, flush_bits, storage_dtype

__all__ = ["eq", "lt", "le", "lt_quiet", "le_quiet", "min", "max"]

_U64 = np.uint64


def _ordered(a, b, fmt, flush):
    """Check and broadcast two operands; returns (fmt, bits a, bits b, keys a, keys b, nan, snan).

    The key is a signed integer whose order is the numeric order of non-NaN values, with both
    zeros mapped to 0, so comparisons reduce to integer comparisons. ``nan``/``snan`` say
    whether either operand is a NaN / signalling NaN.
    """
    fmt = arith_format(fmt)
    a, b = broadcast(as_bits(a, fmt, "a"), as_bits(b, fmt, "b"))
    if flush:
        a, b = flush_bits(a, fmt), flush_bits(b, fmt)
    magnitude_mask = _U64(fmt.sign_mask - 1)
    keys, nans, snans = [], [], []
    for bits in (a, b):
        magnitude = (bits & magnitude_mask).astype(np.int64)
        keys.append(np.where(bits >> _U64(fmt.width - 1) != 0, -magnitude, magnitude))
        nan = magnitude > fmt.positive_infinity
        nans.append(nan)
        snans.append(nan & ((magnitude >> (fmt.mantissa_bits - 1)) & 1 == 0))
    return fmt, a, b, keys[0], keys[1], nans[0] | nans[1], snans[0] | snans[1]


def _compare(a, b, fmt, flush, relation, signalling):
    fmt, _, _, key_a, key_b, nan, snan = _ordered(a, b, fmt, flush)
    invalid = nan if signalling else snan
    return np.asarray(relation(key_a, key_b) & ~nan), np.asarray(invalid * FLAG_INVALID, dtype=np.uint8)


# The numpydoc parameters every function of this module takes.
_PARAMETERS = """Parameters
    ----------
    a, b : array_like of int
        Raw bits of ``fmt``; broadcast together.
    fmt : str or FloatFormat
        ``"f32"``, ``"f16"`` or ``"bf16"``.
    flush_subnormals : bool
        Read subnormal inputs as zeros of the same sign."""

_COMPARISON_DOC = """Compare ``a {symbol} b``{kind}.

    NaN operands compare false. {flags}

    """ + _PARAMETERS + """

    Returns
    -------
    result : numpy.ndarray of bool
    flags : numpy.ndarray of uint8
        Invalid (16) or 0.
    """
_QUIET = "Invalid is raised only by a signalling NaN operand."
_SIGNALLING = "Invalid is raised by any NaN operand, as SoftFloat's f32_lt/f32_le."


def eq(a, b, fmt="f32", flush_subnormals=False):
    return _compare(a, b, fmt, flush_subnormals, np.equal, signalling=False)


def lt(a, b, fmt="f32", flush_subnormals=False):
    return _compare(a, b, fmt, flush_subnormals, np.less, signalling=True)


def le(a, b, fmt="f32", flush_subnormals=False):
    return _compare(a, b, fmt, flush_subnormals, np.less_equal, signalling=True)


def lt_quiet(a, b, fmt="f32", flush_subnormals=False):
    return _compare(a, b, fmt, flush_subnormals, np.less, signalling=False)


def le_quiet(a, b, fmt="f32", flush_subnormals=False):
    return _compare(a, b, fmt, flush_subnormals, np.less_equal, signalling=False)


eq.__doc__ = _COMPARISON_DOC.format(symbol="==", kind=" (quiet; +0 == -0)", flags=_QUIET)
lt.__doc__ = _COMPARISON_DOC.format(symbol="<", kind=" (signalling)", flags=_SIGNALLING)
le.__doc__ = _COMPARISON_DOC.format(symbol="<=", kind=" (signalling)", flags=_SIGNALLING)
lt_quiet.__doc__ = _COMPARISON_DOC.format(symbol="<", kind=" (quiet)", flags=_QUIET)
le_quiet.__doc__ = _COMPARISON_DOC.format(symbol="<=", kind=" (quiet)", flags=_QUIET)


def _min_max(a, b, fmt, flush, take_a_if_less):
    fmt, a, b, key_a, key_b, _, snan = _ordered(a, b, fmt, flush)
    sign_a = (a >> _U64(fmt.width - 1)) != 0
    nan_a = (a & _U64(fmt.sign_mask - 1)) > fmt.positive_infinity
    nan_b = (b & _U64(fmt.sign_mask - 1)) > fmt.positive_infinity
    # On equal keys (equal values, or zeros of either sign) the sign decides: -0 < +0.
    if take_a_if_less:
        take_a = (key_a < key_b) | ((key_a == key_b) & sign_a)
    else:
        take_a = (key_a > key_b) | ((key_a == key_b) & ~sign_a)
    result = np.where((take_a & ~nan_a) | nan_b, a, b)
    result = np.where(nan_a & nan_b, _U64(fmt.canonical_nan), result)
    return np.asarray(result, dtype=storage_dtype(fmt)), np.asarray(snan * FLAG_INVALID, dtype=np.uint8)


_MIN_MAX_DOC = """Return the {which} of ``a`` and ``b``: IEEE 754-2019 {ieee}, as RISC-V {riscv}.

    If exactly one operand is a NaN the result is the other operand; if both are NaN it is the
    canonical NaN. -0 counts as less than +0. A signalling NaN operand raises invalid even when
    the result is a number; nothing else raises a flag. With ``flush_subnormals`` the inputs
    are flushed first, so a subnormal result comes out as a zero of the same sign.

    """ + _PARAMETERS + """

    Returns
    -------
    bits : numpy.ndarray
        Raw result bits in the format's storage dtype.
    flags : numpy.ndarray of uint8
        Invalid (16) or 0.
    """


# min and max shadow the builtins on purpose: golden.fp.min mirrors the IEEE operation name.
def min(a, b, fmt="f32", flush_subnormals=False):
    return _min_max(a, b, fmt, flush_subnormals, take_a_if_less=True)


def max(a, b, fmt="f32", flush_subnormals=False):
    return _min_max(a, b, fmt, flush_subnormals, take_a_if_less=False)


min.__doc__ = _MIN_MAX_DOC.format(which="minimum", ieee="minimumNumber", riscv="fmin")
max.__doc__ = _MIN_MAX_DOC.format(which="maximum", ieee="maximumNumber", riscv="fmax")
