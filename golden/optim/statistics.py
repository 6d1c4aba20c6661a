"""Gradient statistics mode and the non-finite status of update mode.

Mixed-precision training needs two facts about the whole gradient before it may update
(Smart-Infinity Section IV-C): whether any element is NaN or Inf (the loss scaler then
skips the step and lowers the scale) and the global squared norm (for gradient clipping).
In statistics mode the updater streams the binary32 gradient (after widening, see
:func:`golden.optim.gradient_to_f32`) and reports ``(nan_count, inf_count, sum_of_squares)``.

The sum of squares is exact. A finite binary32 value is ``M * 2**E`` with an integer
significand ``M < 2**24`` and ``E`` in [-149, 104]; its square ``M**2 * 2**(2E)`` is an
integer multiple of ``2**-298`` below ``2**256``. The RTL adds these squares into a
fixed-point (Kulisch) accumulator of :data:`ACCUMULATOR_WIDTH` = 586 bits: 298 fraction bits
(the smallest square, of the smallest subnormal, is its least significant bit) and 288
integer bits (squares are below ``2**256`` and up to ``2**32`` of them are added). Nothing is
ever rounded, so the result does not depend on the number of lanes, the chunking or the
order, and partial accumulators merge by integer addition. With the biased exponent field
``e`` and fraction ``f``, a square enters the accumulator as ``M**2 << (2 * max(e, 1) - 2)``
where ``M = f + 2**23`` for ``e >= 1`` and ``M = f`` for subnormals. NaN and Inf elements
are counted, not squared. The host reads the exact integer and, for convenience, the value
rounded once to binary64 (round to nearest even).

Update mode has one sticky status bit, :data:`STATUS_NONFINITE_GRADIENT`: it is set when
any element of the incoming gradient, after widening to binary32 and before ``grad_scale``,
is NaN or Inf (exponent field all ones). The update itself is not suppressed; its outputs
follow IEEE arithmetic (a NaN gradient gives a NaN parameter) and the host discards the step.
"""

import math
from typing import NamedTuple

import numpy as np

__all__ = ["ACCUMULATOR_FRACTION_BITS", "ACCUMULATOR_INTEGER_BITS", "ACCUMULATOR_WIDTH",
           "MAX_STATISTICS_ELEMENTS", "STATUS_NONFINITE_GRADIENT", "GradientStatistics",
           "gradient_statistics", "nonfinite_gradient"]

ACCUMULATOR_FRACTION_BITS = 298
MAX_STATISTICS_ELEMENTS = 1 << 32
# Squares are below 2**256; adding 2**32 of them needs 32 more carry bits.
ACCUMULATOR_INTEGER_BITS = 256 + 32
ACCUMULATOR_WIDTH = ACCUMULATOR_INTEGER_BITS + ACCUMULATOR_FRACTION_BITS

STATUS_NONFINITE_GRADIENT = 1 << 0

_EXPONENT_BUCKETS = 254  # max(e, 1) - 1 for the finite biased exponents 0..254
# Squares (< 2**48) are summed per exponent as three 16-bit slices in binary64, which stays
# exact while a slice's sum is below 2**53, i.e. for fewer than 2**37 elements.
_SLICE_BITS = 16
_SLICES = 3


class GradientStatistics(NamedTuple):
    """Result of statistics mode.

    Attributes
    ----------
    nan_count : int
        Number of NaN elements.
    inf_count : int
        Number of +Inf or -Inf elements.
    sum_of_squares : float
        The exact sum of the squares of the finite elements, rounded once to binary64.
    accumulator : int
        The exact sum in units of ``2**-ACCUMULATOR_FRACTION_BITS`` (the RTL's register).
    """

    nan_count: int
    inf_count: int
    sum_of_squares: float
    accumulator: int


def _float32_fields(grad, name):
    """Check ``grad`` is a float32 array and return its flattened (exponent, fraction) fields."""
    if not isinstance(grad, np.ndarray) or grad.dtype != np.float32:
        raise ValueError(f"{name} must be a float32 numpy array, not {getattr(grad, 'dtype', grad)!r}")
    bits = grad.reshape(-1).view(np.uint32)
    return (bits >> np.uint32(23)) & np.uint32(0xFF), bits & np.uint32(0x7FFFFF)


def gradient_statistics(grad_f32):
    """Statistics mode: NaN count, Inf count and the exact sum of squares.

    Parameters
    ----------
    grad_f32 : numpy.ndarray
        float32 gradient, at most :data:`MAX_STATISTICS_ELEMENTS` elements.

    Returns
    -------
    GradientStatistics
        ``(nan_count, inf_count, sum_of_squares, accumulator)``; see the module docstring.

    Raises
    ------
    ValueError
        If ``grad_f32`` is not a float32 array or has more than 2**32 elements.
    """
    exponent, fraction = _float32_fields(grad_f32, "grad_f32")
    if exponent.size > MAX_STATISTICS_ELEMENTS:
        raise ValueError(f"grad_f32 must have at most 2**32 elements, not {exponent.size}")
    special = exponent == 0xFF
    nan_count = int(np.count_nonzero(special & (fraction != 0)))
    inf_count = int(np.count_nonzero(special & (fraction == 0)))
    finite = ~special
    exponent, fraction = exponent[finite], fraction[finite]
    significand = np.where(exponent > 0, fraction | np.uint32(1 << 23), fraction).astype(np.uint64)
    square = significand * significand
    bucket = np.maximum(exponent, 1).astype(np.intp) - 1
    slice_sums = [
        np.bincount(bucket, minlength=_EXPONENT_BUCKETS,
                    weights=((square >> np.uint64(_SLICE_BITS * i)) & np.uint64(0xFFFF)).astype(np.float64))
        for i in range(_SLICES)
    ]
    accumulator = 0
    for b in np.flatnonzero(np.any(slice_sums, axis=0)):
        bucket_sum = sum(int(slice_sums[i][b]) << (_SLICE_BITS * i) for i in range(_SLICES))
        accumulator += bucket_sum << (2 * int(b))
    # float(int) rounds to nearest even; the power-of-two scaling is exact (result >= 2**-298).
    sum_of_squares = math.ldexp(float(accumulator), -ACCUMULATOR_FRACTION_BITS)
    return GradientStatistics(nan_count, inf_count, sum_of_squares, accumulator)


def nonfinite_gradient(grad_f32):
    """Whether update mode sets :data:`STATUS_NONFINITE_GRADIENT` for this gradient.

    Parameters
    ----------
    grad_f32 : numpy.ndarray
        float32 gradient after widening (before ``grad_scale``).

    Returns
    -------
    bool
        True if any element is NaN or Inf.

    Raises
    ------
    ValueError
        If ``grad_f32`` is not a float32 array.
    """
    exponent, _fraction = _float32_fields(grad_f32, "grad_f32")
    return bool(np.any(exponent == 0xFF))
