"""Value formats of the compressed gradient pairs.

The GPU sends pair values as float32 (``"f32"``) or float16 (``"f16"``). The FPGA widens float16
values to float32 before accumulating; the widening is exact, so every later rounding happens in
the float32 adder and nowhere else.
"""

import numpy as np

from golden.fp.formats import F32

__all__ = ["VALUE_FORMATS", "CANONICAL_NAN_F32", "value_dtype", "widen_to_f32", "canonicalise_nan"]

VALUE_FORMATS = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16)}

CANONICAL_NAN_F32 = F32.canonical_nan


def value_dtype(value_format):
    """Return the NumPy dtype of a pair value format.

    Parameters
    ----------
    value_format : str
        ``"f32"`` or ``"f16"``.

    Returns
    -------
    numpy.dtype
        ``float32`` or ``float16``.

    Raises
    ------
    ValueError
        If ``value_format`` is not one of the names above.
    """
    try:
        return VALUE_FORMATS[value_format]
    except (KeyError, TypeError):
        raise ValueError(f"value_format must be one of {sorted(VALUE_FORMATS)}, "
                         f"not {value_format!r}") from None


def widen_to_f32(values):
    """Check that pair values are float32 or float16 and return them as float32.

    Parameters
    ----------
    values : array_like
        One-dimensional float32 or float16 values.

    Returns
    -------
    numpy.ndarray
        The values as float32; float16 inputs are widened exactly.

    Raises
    ------
    ValueError
        If ``values`` is not one-dimensional or has another dtype (a float64 array would need a
        rounding step the hardware does not have).
    """
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"values must be one-dimensional, not {values.ndim}-dimensional")
    if values.dtype not in VALUE_FORMATS.values():
        raise ValueError(f"values must have dtype float32 or float16, not {values.dtype}")
    return values.astype(np.float32)


def canonicalise_nan(dense):
    """Replace every NaN in a float32 array by the canonical quiet NaN, in place.

    NumPy propagates NaN payloads and signs the x86 way; the RTL adders return one canonical NaN.
    Once an element is NaN every later add keeps it NaN, so canonicalising the final array gives the
    same bits as canonicalising after every add.

    Parameters
    ----------
    dense : numpy.ndarray
        A float32 array, modified in place.

    Returns
    -------
    numpy.ndarray
        ``dense`` itself.
    """
    dense.view(np.uint32)[np.isnan(dense)] = CANONICAL_NAN_F32
    return dense
