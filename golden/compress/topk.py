"""GPU-side block-wise magnitude Top-K compression (Smart-Infinity SmartComp, Section IV-C).

Smart-Infinity's GPU "selects the higher magnitude (e.g., 1%) elements by sorting each block" and
offloads an index list and a value list instead of the dense gradient. This module is that step,
made deterministic so that the FPGA-side golden models and RTL tests see one well-defined pair list.
"""

import math
from fractions import Fraction

import numpy as np

from .values import value_dtype

__all__ = ["DEFAULT_BLOCK", "keep_count", "topk_compress", "ErrorFeedbackCompressor"]

# A power of two so that blocks tile the power-of-two buffer sizes the FPGA uses; large enough that
# ceil(ratio * block) stays close to ratio * block down to ratio = 0.1 %.
DEFAULT_BLOCK = 4096


def _check_ratio(ratio):
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio must be in (0, 1], not {ratio!r}")


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, not {value!r}")


def keep_count(ratio, length):
    """Number of elements Top-K keeps in a block: ``ceil(ratio * length)``.

    ``ratio`` is read as the decimal it prints as, so that ``keep_count(0.07, 100)`` is 7 and not the
    8 that the binary product ``0.07 * 100 = 7.000000000000001`` would round up to. Rounding up (rather
    than to nearest) keeps at least one element per non-empty block and makes ``ratio`` a lower bound
    on the kept fraction.

    Parameters
    ----------
    ratio : float
        Kept fraction, in (0, 1].
    length : int
        Number of elements in the block, >= 0.

    Returns
    -------
    int
        The kept count, between 1 and ``length`` (0 for an empty block).

    Raises
    ------
    ValueError
        If ``ratio`` is outside (0, 1] or ``length`` is negative.
    """
    _check_ratio(ratio)
    if length < 0:
        raise ValueError(f"length must be >= 0, not {length!r}")
    return math.ceil(Fraction(repr(float(ratio))) * int(length))


def _flat_gradient(grad):
    grad = np.asarray(grad)
    if grad.dtype.kind != "f":
        raise ValueError(f"grad must be a floating-point array, not dtype {grad.dtype}")
    # float64 inputs are rounded (RNE) to the float32 the GPU would hold; float16 widens exactly.
    flat = grad.astype(np.float32).ravel()
    if np.isnan(flat).any():
        raise ValueError("grad must not contain NaN (the loss scaler skips such steps before Top-K)")
    return flat


def _topk_rows(rows, k):
    """Ascending indices of the k largest |x| per row; equal magnitudes keep the lower index."""
    # A stable sort on -|x| lists equal magnitudes in index order, which is the tie rule; -0.0 and
    # +0.0 compare equal, so zeros of either sign tie too.
    order = np.argsort(-np.abs(rows), axis=1, kind="stable")[:, :k]
    return np.sort(order, axis=1)


def topk_compress(grad, *, ratio=0.01, block=DEFAULT_BLOCK, value_format="f32"):
    """Block-wise magnitude Top-K of a gradient.

    The flattened (C order) gradient is cut into blocks of ``block`` elements, the last one possibly
    shorter. Each block keeps its ``keep_count(ratio, len(block))`` elements of largest ``|g|``
    (rounding up, see :func:`keep_count`). Ties in ``|g|`` go to the lower index, so the selection is
    fully deterministic; ``+0.0`` and ``-0.0`` tie.

    Parameters
    ----------
    grad : array_like
        Floating-point gradient of any shape; float64 is rounded to float32 first (RNE). ``+-inf`` are
        kept as the largest magnitudes; NaN is rejected.
    ratio : float, optional
        Kept fraction per block, in (0, 1]. Default 0.01, the paper's 1 % selection.
    block : int, optional
        Block length in elements, >= 1.
    value_format : {"f32", "f16"}, optional
        Wire format of the values. ``"f16"`` converts with NumPy's ``astype`` (round to nearest even;
        magnitudes beyond 65504 become ``+-inf``, as a GPU cast would).

    Returns
    -------
    indices : numpy.ndarray
        int64 positions in the flattened gradient, strictly ascending.
    values : numpy.ndarray
        The selected gradient values in ``value_format``, in the order of ``indices``.

    Raises
    ------
    ValueError
        On a non-float or NaN-holding ``grad``, or ``ratio``, ``block``, ``value_format`` out of range.
    """
    dtype = value_dtype(value_format)
    _check_ratio(ratio)
    _check_positive_int("block", block)
    flat = _flat_gradient(grad)
    full_blocks = flat.size // block
    parts = []
    if full_blocks:
        rows = flat[: full_blocks * block].reshape(full_blocks, block)
        offsets = np.arange(full_blocks, dtype=np.int64)[:, None] * block
        parts.append((_topk_rows(rows, keep_count(ratio, block)) + offsets).ravel())
    tail = flat[full_blocks * block:]
    if tail.size:
        parts.append(_topk_rows(tail[None, :], keep_count(ratio, tail.size)).ravel() + full_blocks * block)
    indices = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    with np.errstate(over="ignore"):  # float16 overflow to +-inf is the documented cast behaviour
        return indices, flat[indices].astype(dtype)


class ErrorFeedbackCompressor:
    """Top-K with error feedback: what is not sent this step is added to the next step's gradient.

    This is the residual accumulation of Deep Gradient Compression and error-feedback SGD. Each step
    compresses ``acc = grad + residual`` (one float32 add) and keeps ``acc - sent`` as the new
    residual, where ``sent`` is the transmitted value widened back to float32. With ``"f32"`` values
    the residual of a sent element is exactly zero; with ``"f16"`` it keeps the rounding error of the
    conversion (a value that overflows float16 to ``+-inf`` leaves a ``-+inf`` residual; loss scaling
    keeps float16 gradients in range). Summed over steps, transmitted values plus the final residual
    equal the summed gradients up to one float32 rounding of ``acc`` per element and step.

    Parameters
    ----------
    size : int
        Number of gradient elements, >= 1.
    ratio : float, optional
        Kept fraction per block, in (0, 1].
    block : int, optional
        Block length, >= 1.
    value_format : {"f32", "f16"}, optional
        Wire format of the values.

    Raises
    ------
    ValueError
        If an argument is out of range.
    """

    def __init__(self, size, ratio=0.01, block=DEFAULT_BLOCK, value_format="f32"):
        _check_positive_int("size", size)
        _check_ratio(ratio)
        _check_positive_int("block", block)
        value_dtype(value_format)
        self.size = int(size)
        self.ratio = ratio
        self.block = block
        self.value_format = value_format
        self.residual = np.zeros(self.size, np.float32)

    def compress(self, grad):
        """Compress ``grad`` plus the carried residual and update the residual.

        Parameters
        ----------
        grad : array_like
            Floating-point gradient with ``size`` elements (any shape).

        Returns
        -------
        indices : numpy.ndarray
            int64 ascending positions, as :func:`topk_compress`.
        values : numpy.ndarray
            Transmitted values in ``value_format``.

        Raises
        ------
        ValueError
            If ``grad`` does not have ``size`` elements, or as :func:`topk_compress`.
        """
        flat = _flat_gradient(grad)
        if flat.size != self.size:
            raise ValueError(f"grad must have size={self.size} elements, not {flat.size}")
        accumulated = flat + self.residual
        indices, values = topk_compress(accumulated, ratio=self.ratio, block=self.block,
                                        value_format=self.value_format)
        accumulated[indices] -= values.astype(np.float32)
        self.residual = accumulated
        return indices, values
