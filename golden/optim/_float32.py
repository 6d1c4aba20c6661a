"""Single IEEE binary32 operations on NumPy arrays, shared by the optimizer models.

NumPy's float32 ``+``, ``-``, ``*``, ``/`` and ``np.sqrt`` are each one correctly rounded
IEEE operation (round to nearest, ties to even, subnormals kept), so the models use them
directly. The models call :func:`sqrt` and :func:`fma` through this module (``binary32.sqrt``)
so that a test can swap in torch's square root and show that every other operation matches
torch bit for bit. Two things NumPy lacks are provided here:

* :func:`fma`, a correctly rounded binary32 fused multiply-add ``a * b + c`` (one rounding),
  which is what torch's CPU kernels execute for ``add(alpha=)``, ``lerp`` and ``addcmul``;
* :func:`canonical_nan`, which replaces every NaN by the one quiet NaN that the ``rtl.fp``
  units return, so the golden bits equal the RTL bits even where a NaN appears.
"""

import functools

import numpy as np

from golden.fp.formats import F32

__all__ = ["CANONICAL_NAN_BITS", "ieee_quiet", "sqrt", "fma", "canonical_nan", "checked_arrays"]

CANONICAL_NAN_BITS = F32.canonical_nan
_CANONICAL_NAN = np.uint32(CANONICAL_NAN_BITS).view(np.float32)


def ieee_quiet(function):
    """Decorate ``function`` so NumPy's floating-point warnings are silenced while it runs.

    The models compute with IEEE special values on purpose (Inf - Inf is NaN, 1/0 is Inf);
    the values are what IEEE says, so the warnings are noise. A fresh ``np.errstate`` is
    entered per call because NumPy 2 refuses to re-enter one instance.
    """
    @functools.wraps(function)
    def quiet(*args, **kwargs):
        with np.errstate(all="ignore"):
            return function(*args, **kwargs)
    return quiet


def sqrt(a):
    """Binary32 square root, correctly rounded (``np.sqrt`` on float32 is IEEE ``sqrt``).

    Parameters
    ----------
    a : numpy.ndarray
        float32 operand.

    Returns
    -------
    numpy.ndarray
        float32 result; negative non-zero operands give NaN.
    """
    return np.sqrt(a)


@ieee_quiet
def fma(a, b, c):
    """Binary32 fused multiply-add ``a * b + c`` with a single round-to-nearest-even.

    The product of two binary32 values has at most 48 significant bits and an exponent in
    [-298, 256], so it is exact in binary64. The binary64 sum is then made round-to-odd
    (the exact error of the sum, from Knuth's TwoSum, sets the last bit when the sum was
    inexact); rounding a round-to-odd binary64 value to binary32 is correctly rounded
    because 53 >= 24 + 2, including for subnormal and overflowing results.

    Parameters
    ----------
    a, b, c : numpy.ndarray or numpy.float32
        Binary32 operands; they broadcast against each other.

    Returns
    -------
    numpy.ndarray
        The float32 result (NaN payloads are not meaningful; see :func:`canonical_nan`).
    """
    product = np.multiply(np.asarray(a, np.float64), np.asarray(b, np.float64))
    addend = np.asarray(c, np.float64)
    total = product + addend
    # TwoSum: total + error == product + addend exactly (no overflow is possible here).
    addend_part = total - product
    error = (product - (total - addend_part)) + (addend - addend_part)
    # Infinite or NaN sums give a NaN error; those need no sticky bit.
    inexact = np.isfinite(error) & (error != 0)
    last_bit_even = (total.view(np.uint64) & np.uint64(1)) == 0
    sticky = np.nextafter(total, np.copysign(np.inf, error))
    rounded_to_odd = np.where(inexact & last_bit_even, sticky, total)
    return rounded_to_odd.astype(np.float32)


def canonical_nan(values):
    """Replace every NaN in ``values`` by the canonical quiet NaN ``0x7FC00000``.

    Every ``rtl.fp`` unit returns that NaN, and an operation with a NaN operand always
    returns NaN, so canonicalising a model's outputs once is the same as doing it after
    every operation.

    Parameters
    ----------
    values : numpy.ndarray
        A float32 array.

    Returns
    -------
    numpy.ndarray
        A float32 array with the same non-NaN elements.
    """
    return np.where(np.isnan(values), _CANONICAL_NAN, values).astype(np.float32, copy=False)


def checked_arrays(**arrays):
    """Check that every keyword argument is a float32 array and all have the same shape.

    Parameters
    ----------
    **arrays : numpy.ndarray
        The named operands of a model, e.g. ``param=..., grad=...``.

    Returns
    -------
    list of numpy.ndarray
        The arrays, in keyword order.

    Raises
    ------
    ValueError
        If an operand is not a float32 ``numpy.ndarray`` or its shape differs from the first.
    """
    shape = None
    for name, array in arrays.items():
        if not isinstance(array, np.ndarray) or array.dtype != np.float32:
            kind = getattr(array, "dtype", type(array).__name__)
            raise ValueError(f"{name} must be a float32 numpy array, not {kind}")
        if shape is None:
            shape = array.shape
        elif array.shape != shape:
            raise ValueError(f"{name} must have the shape {shape} of the other operands, not {array.shape}")
    return list(arrays.values())
