"""Mixed-precision edges of the updater: the gradient read and the 16-bit parameter copy.

The updater keeps the master parameters and the optimizer state in binary32. Gradients may
arrive as binary32, binary16 or bfloat16 and are widened to binary32 exactly (every f16 and
bf16 value is a binary32 value). After the update the parameters are also written as a
16-bit copy for the GPU, rounded to nearest even. Both edges are ``golden.fp.convert``, the
model the RTL convert unit is verified against, so NaNs leave as the canonical quiet NaN of
the target format and subnormals are kept.
"""

import numpy as np

from golden.fp import convert

__all__ = ["GRADIENT_FORMATS", "COPY_FORMATS", "gradient_to_f32", "param_copy_16"]

GRADIENT_FORMATS = ("f32", "f16", "bf16")
COPY_FORMATS = ("f16", "bf16")

# Raw-bit dtypes and, where NumPy has one, the float dtype of each format.
_BITS_DTYPE = {"f32": np.uint32, "f16": np.uint16, "bf16": np.uint16}
_FLOAT_DTYPE = {"f32": np.float32, "f16": np.float16}


def gradient_to_f32(gradient, fmt):
    """Widen a gradient to binary32, exactly.

    Parameters
    ----------
    gradient : numpy.ndarray
        Raw bits (uint32 for ``"f32"``, uint16 for ``"f16"`` and ``"bf16"``), or a float32
        or float16 array for ``"f32"`` or ``"f16"``.
    fmt : {"f32", "f16", "bf16"}
        The format the gradient is stored in.

    Returns
    -------
    numpy.ndarray
        A new float32 array; NaNs are the canonical quiet NaN 0x7FC00000.

    Raises
    ------
    ValueError
        If ``fmt`` is unknown or ``gradient`` has a dtype that does not hold ``fmt``.
    """
    if fmt not in GRADIENT_FORMATS:
        raise ValueError(f"fmt must be one of {GRADIENT_FORMATS}, not {fmt!r}")
    gradient = np.asarray(gradient)
    if fmt in _FLOAT_DTYPE and gradient.dtype == _FLOAT_DTYPE[fmt]:
        gradient = gradient.view(_BITS_DTYPE[fmt])
    if gradient.dtype != _BITS_DTYPE[fmt]:
        allowed = [np.dtype(_BITS_DTYPE[fmt]).name] + ([np.dtype(_FLOAT_DTYPE[fmt]).name]
                                                       if fmt in _FLOAT_DTYPE else [])
        raise ValueError(f"gradient for fmt={fmt!r} must have dtype in {allowed}, not {gradient.dtype}")
    bits, _flags = convert(gradient, fmt, "f32")
    return np.asarray(bits, np.uint32).view(np.float32)


def param_copy_16(param_f32, fmt):
    """The 16-bit copy of the binary32 parameters, rounded to nearest even.

    Parameters
    ----------
    param_f32 : numpy.ndarray
        float32 parameters.
    fmt : {"f16", "bf16"}
        Format of the copy.

    Returns
    -------
    numpy.ndarray
        uint16 raw bits; overflow gives Inf, NaNs are the canonical quiet NaN of ``fmt``.

    Raises
    ------
    ValueError
        If ``fmt`` is unknown or ``param_f32`` is not a float32 array.
    """
    if fmt not in COPY_FORMATS:
        raise ValueError(f"fmt must be one of {COPY_FORMATS}, not {fmt!r}")
    if not isinstance(param_f32, np.ndarray) or param_f32.dtype != np.float32:
        kind = getattr(param_f32, "dtype", type(param_f32).__name__)
        raise ValueError(f"param_f32 must be a float32 numpy array, not {kind}")
    bits, _flags = convert(param_f32.view(np.uint32), "f32", fmt)
    return np.asarray(bits, np.uint16)
