"""Classification of raw bits and conversion between raw bits and NumPy floats."""

import enum

import numpy as np

from .convert import _float_to_float
from .core import F64, as_bits
from .formats import BF16, F16, F32, float_format

__all__ = ["FloatClass", "classify", "to_float", "from_float"]

_U64 = np.uint64


class FloatClass(enum.IntEnum):
    """Value classes, numbered like the bits of the RISC-V ``fclass`` result.

    ``1 << classify(bits, fmt)`` is therefore exactly what ``fclass`` returns.
    """

    NEG_INF = 0
    NEG_NORMAL = 1
    NEG_SUBNORMAL = 2
    NEG_ZERO = 3
    POS_ZERO = 4
    POS_SUBNORMAL = 5
    POS_NORMAL = 6
    POS_INF = 7
    SIGNALING_NAN = 8
    QUIET_NAN = 9


def classify(bits, fmt):
    """Classify raw encodings.

    Parameters
    ----------
    bits : array_like of int
        Raw bits of ``fmt``.
    fmt : str or FloatFormat
        ``"f32"``, ``"f16"`` or ``"bf16"``.

    Returns
    -------
    numpy.ndarray of uint8
        :class:`FloatClass` values.
    """
    fmt = float_format(fmt)
    bits = as_bits(bits, fmt, "bits")
    m = fmt.mantissa_bits
    field = (bits >> _U64(m)) & _U64(fmt.max_exponent_field)
    frac = bits & _U64((1 << m) - 1)
    top = field == fmt.max_exponent_field
    # Classes of positive values; a negative value's class mirrors it around the zeros.
    small = np.where(frac == 0, FloatClass.POS_ZERO, FloatClass.POS_SUBNORMAL)
    positive = np.select([field == 0, ~top], [small, FloatClass.POS_NORMAL], FloatClass.POS_INF)
    negative = bits >> _U64(fmt.width - 1) != 0
    classes = np.where(negative, FloatClass.NEG_INF + FloatClass.POS_INF - positive, positive)
    quiet = (frac >> _U64(m - 1)) != 0
    nan_class = np.where(quiet, FloatClass.QUIET_NAN, FloatClass.SIGNALING_NAN)
    return np.where(top & (frac != 0), nan_class, classes).astype(np.uint8)


def to_float(bits, fmt):
    """Reinterpret raw bits as NumPy floats (exact, NaN payloads kept).

    Parameters
    ----------
    bits : array_like of int
        Raw bits of ``fmt``.
    fmt : str or FloatFormat
        ``"f32"`` or ``"bf16"`` (both give float32; bf16 is the top half of an f32) or ``"f16"``
        (gives float16).

    Returns
    -------
    numpy.ndarray of float32 or float16
    """
    fmt = _numpy_format(fmt)
    bits = as_bits(bits, fmt, "bits")
    if fmt == F16:
        return bits.astype(np.uint16).view(np.float16)
    return (bits << _U64(32 - fmt.width)).astype(np.uint32).view(np.float32)


def from_float(values, fmt):
    """Round NumPy floats to raw bits of ``fmt`` (nearest even, once, from the float64 value).

    Overflow gives Inf, NaN gives the canonical NaN; flags are dropped (use :func:`golden.fp.convert`
    on raw bits when they matter).

    Parameters
    ----------
    values : array_like of float
        Values; anything NumPy converts exactly to float64.
    fmt : str or FloatFormat
        ``"f32"``, ``"f16"`` or ``"bf16"``.

    Returns
    -------
    numpy.ndarray
        Raw bits (uint32 for f32, uint16 for f16 and bf16).
    """
    fmt = _numpy_format(fmt)
    with np.errstate(invalid="ignore"):  # widening a signalling NaN trips the FPU's invalid flag
        doubles = np.asarray(values, dtype=np.float64)
    bits, _ = _float_to_float(doubles.view(np.uint64), F64, fmt, flush=False)
    return bits


def _numpy_format(fmt):
    fmt = float_format(fmt)
    if fmt not in (F32, F16, BF16):
        raise ValueError(f"fmt must be one of 'f32', 'f16', 'bf16' for NumPy values, not {fmt.name!r}")
    return fmt
