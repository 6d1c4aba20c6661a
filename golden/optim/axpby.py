"""Bit-exact model of the SIMD AXPBY unit, Smart-Infinity's general updater building block (Figure 7).

``y = alpha * a + beta * b`` over vectors ``a`` and ``b`` with scalar coefficients, in
binary32 with round-to-nearest-even. Two operation orders exist, selected by ``fused``
(the RTL block :class:`rtl.optim.axpby.AXPBY` has the same parameter)::

    fused=False:  y = fl(fl(alpha * a) + fl(beta * b))     # two multipliers, one adder
    fused=True:   y = fma(alpha, a, fl(beta * b))          # one multiplier, one fused multiply-add

The unfused order is the textbook AXPBY of the paper's figure (three roundings); the fused
order rounds twice and is the form torch's AVX kernels use for ``add(alpha=)`` and
``lerp`` (see docs/optim_golden.md). NaN results are the canonical quiet NaN
0x7FC00000, as every ``rtl.fp`` unit returns.
"""

import numpy as np

from . import _float32 as binary32

__all__ = ["axpby"]


@binary32.ieee_quiet
def axpby(alpha, a, beta, b, *, fused=False):
    """``alpha * a + beta * b`` in binary32, in the operation order of the module docstring.

    Parameters
    ----------
    alpha, beta : float or numpy.float32
        Coefficients, rounded to binary32 first (``np.float32``).
    a, b : numpy.ndarray
        float32 arrays of one shape; not modified.
    fused : bool, optional
        Use the fused order ``fma(alpha, a, beta * b)``.

    Returns
    -------
    numpy.ndarray
        float32 result with NaNs canonical.

    Raises
    ------
    ValueError
        If ``a`` or ``b`` is not a float32 array or their shapes differ.
    """
    a, b = binary32.checked_arrays(a=a, b=b)
    alpha, beta = np.float32(alpha), np.float32(beta)
    scaled_b = b * beta
    y = binary32.fma(alpha, a, scaled_b) if fused else a * alpha + scaled_b
    return binary32.canonical_nan(np.asarray(y, np.float32))
