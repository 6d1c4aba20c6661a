"""The three training GEMMs of a convolution layer (DPT Section 2.1) through im2col.

Layouts: activations ``x`` are (B, C, H, W), weights ``w`` are (K, C, R, S), output gradients
``grad_out`` are (B, K, P, Q) with ``P = (H + 2 pad - R) // stride + 1`` (same for Q).

=================  ===========================================  ==========  =============  =======
pass               GEMM                                         M           K (reduction)  N
=================  ===========================================  ==========  =============  =======
forward (eq. 1)    ``im2col(x) @ w_mat``                        B P Q       C R S          K
backward data      ``im2col(pad(dilate(grad_out))) @ w_flip``   B H W       K R S          C
(eq. 2)
weight gradient    ``grad_out_mat^T @ im2col(x)``               K           B P Q          C R S
=================  ===========================================  ==========  =============  =======

``im2col`` rows are (b, p, q) and its columns (c, r, s), both row-major. The backward-data GEMM is
the paper's equation 2: a stride-1 convolution of the output gradient, dilated by the stride and
padded by ``R - 1 - pad``, with the flipped kernel whose channel axes are swapped
(``w_flip[(k, r, s), c] = w[k, c, R-1-r, S-1-s]``). For stride > 1 it multiplies the inserted zeros
too (the cycle model counts them); ``padding <= kernel - 1`` is required.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = [
    "ConvLayer",
    "GemmShape",
    "conv2d_backward_data_gemm",
    "conv2d_forward_gemm",
    "conv2d_weight_grad_gemm",
    "conv_output_size",
    "im2col",
]


class GemmShape(NamedTuple):
    """``C (m x n) = A (m x k) @ B (k x n)``."""

    m: int
    k: int
    n: int


def conv_output_size(size, kernel, stride, padding):
    """Output length of a convolution along one axis.

    Parameters
    ----------
    size, kernel, stride, padding : int
        ``size >= 1``, ``kernel >= 1``, ``stride >= 1``, ``padding >= 0``, ``size + 2 padding >= kernel``.

    Returns
    -------
    int
        ``(size + 2 padding - kernel) // stride + 1``.
    """
    for name, value, low in (("size", size, 1), ("kernel", kernel, 1), ("stride", stride, 1),
                             ("padding", padding, 0)):
        if not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, not {value!r}")
    if size + 2 * padding < kernel:
        raise ValueError(f"kernel must be <= size + 2 padding = {size + 2 * padding}, not {kernel}")
    return (size + 2 * padding - kernel) // stride + 1


def im2col(x, kernel, *, stride=1, padding=0):
    """Unfold convolution windows into GEMM rows.

    Parameters
    ----------
    x : numpy.ndarray, shape (B, C, H, W)
    kernel : tuple of int
        (R, S).
    stride, padding : int

    Returns
    -------
    numpy.ndarray, shape (B P Q, C R S)
        Row (b, p, q), column (c, r, s) holds ``x_padded[b, c, p stride + r, q stride + s]``.
    """
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"x must be a 4-D (B, C, H, W) array, not shape {x.shape}")
    kernel_h, kernel_w = kernel
    batch, channels, height, width = x.shape
    out_h = conv_output_size(height, kernel_h, stride, padding)
    out_w = conv_output_size(width, kernel_w, stride, padding)
    padded = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    windows = np.empty((batch, channels, kernel_h, kernel_w, out_h, out_w), dtype=x.dtype)
    for r in range(kernel_h):
        for s in range(kernel_w):
            windows[:, :, r, s] = padded[:, :, r:r + stride * (out_h - 1) + 1:stride,
                                         s:s + stride * (out_w - 1) + 1:stride]
    return windows.transpose(0, 4, 5, 1, 2, 3).reshape(batch * out_h * out_w, channels * kernel_h * kernel_w)


def _check_weights(w, channels=None):
    w = np.asarray(w)
    if w.ndim != 4 or (channels is not None and w.shape[1] != channels):
        raise ValueError(f"w must be a 4-D (K, C, R, S) array with C = {channels}, not shape {w.shape}")
    return w


def conv2d_forward_gemm(x, w, *, stride=1, padding=0, matmul=np.matmul):
    """Forward convolution (DPT eq. 1, cross-correlation) as ``im2col(x) @ w_mat``.

    Parameters
    ----------
    x : numpy.ndarray, shape (B, C, H, W)
    w : numpy.ndarray, shape (K, C, R, S)
    stride, padding : int
    matmul : callable
        ``matmul(A, B)`` for the GEMM (``np.matmul`` by default; a systolic numerics model fits).

    Returns
    -------
    numpy.ndarray, shape (B, K, P, Q)
    """
    x = np.asarray(x)
    w = _check_weights(w, x.shape[1] if x.ndim == 4 else None)
    out_channels, _, kernel_h, kernel_w = w.shape
    columns = im2col(x, (kernel_h, kernel_w), stride=stride, padding=padding)
    out_h = conv_output_size(x.shape[2], kernel_h, stride, padding)
    out_w = conv_output_size(x.shape[3], kernel_w, stride, padding)
    result = matmul(columns, w.reshape(out_channels, -1).T)
    return result.reshape(x.shape[0], out_h, out_w, out_channels).transpose(0, 3, 1, 2)


def conv2d_backward_data_gemm(grad_out, w, input_size, *, stride=1, padding=0, matmul=np.matmul):
    """Input gradient (DPT eq. 2): stride-1 convolution of the dilated, padded output gradient with
    the flipped, channel-transposed kernel, as one GEMM.

    Parameters
    ----------
    grad_out : numpy.ndarray, shape (B, K, P, Q)
    w : numpy.ndarray, shape (K, C, R, S)
    input_size : tuple of int
        (H, W) of the layer input.
    stride, padding : int
        ``padding <= min(R, S) - 1``.
    matmul : callable

    Returns
    -------
    numpy.ndarray, shape (B, C, H, W)
    """
    grad_out = np.asarray(grad_out)
    w = _check_weights(w)
    out_channels, channels, kernel_h, kernel_w = w.shape
    height, width = input_size
    out_h = conv_output_size(height, kernel_h, stride, padding)
    out_w = conv_output_size(width, kernel_w, stride, padding)
    if grad_out.shape[1:] != (out_channels, out_h, out_w):
        raise ValueError(f"grad_out must have shape (B, {out_channels}, {out_h}, {out_w}), "
                         f"not {grad_out.shape}")
    if padding > min(kernel_h, kernel_w) - 1:
        raise ValueError(f"padding must be <= kernel - 1 = {min(kernel_h, kernel_w) - 1}, not {padding}")
    dilated_size = ((out_h - 1) * stride + 1, (out_w - 1) * stride + 1)
    dilated = np.zeros(grad_out.shape[:2] + dilated_size, grad_out.dtype)
    dilated[:, :, ::stride, ::stride] = grad_out
    # Left pad R-1-pad; the right pad makes the stride-1 output exactly H x W (see the module notes).
    framed = np.pad(dilated, ((0, 0), (0, 0),
                              (kernel_h - 1 - padding, height + padding - (out_h - 1) * stride - 1),
                              (kernel_w - 1 - padding, width + padding - (out_w - 1) * stride - 1)))
    columns = im2col(framed, (kernel_h, kernel_w))
    w_flip = w[:, :, ::-1, ::-1].transpose(0, 2, 3, 1).reshape(out_channels * kernel_h * kernel_w, channels)
    result = matmul(columns, w_flip)
    return result.reshape(grad_out.shape[0], height, width, channels).transpose(0, 3, 1, 2)


def conv2d_weight_grad_gemm(x, grad_out, kernel, *, stride=1, padding=0, matmul=np.matmul):
    """Weight gradient: ``grad_out_mat^T @ im2col(x)``, reducing over the batch and output pixels.

    Parameters
    ----------
    x : numpy.ndarray, shape (B, C, H, W)
    grad_out : numpy.ndarray, shape (B, K, P, Q)
    kernel : tuple of int
        (R, S).
    stride, padding : int
    matmul : callable

    Returns
    -------
    numpy.ndarray, shape (K, C, R, S)
    """
    x = np.asarray(x)
    grad_out = np.asarray(grad_out)
    columns = im2col(x, kernel, stride=stride, padding=padding)
    if grad_out.ndim != 4 or grad_out.shape[0] * grad_out.shape[2] * grad_out.shape[3] != columns.shape[0]:
        raise ValueError(f"grad_out must be (B, K, P, Q) matching x and the kernel, "
                         f"not shape {grad_out.shape}")
    grad_mat = grad_out.transpose(0, 2, 3, 1).reshape(columns.shape[0], grad_out.shape[1])
    result = matmul(np.ascontiguousarray(grad_mat.T), columns)
    return result.reshape(grad_out.shape[1], x.shape[1], kernel[0], kernel[1])


@dataclass(frozen=True)
class ConvLayer:
    """Shape of one convolution (or, with a 1 x 1 input and kernel, fully connected) layer.

    Attributes
    ----------
    name : str
    in_channels, height, width, out_channels, kernel, stride, padding : int
        Square kernels.
    """

    name: str
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel: int
    stride: int = 1
    padding: int = 0

    @property
    def out_height(self):
        """P."""
        return conv_output_size(self.height, self.kernel, self.stride, self.padding)

    @property
    def out_width(self):
        """Q."""
        return conv_output_size(self.width, self.kernel, self.stride, self.padding)

    @property
    def weights(self):
        """Number of weights, K C R S."""
        return self.out_channels * self.in_channels * self.kernel**2

    def forward_gemm(self, batch):
        """Forward GEMM shape for ``batch`` samples: (B P Q, C R S, K)."""
        return GemmShape(batch * self.out_height * self.out_width, self.in_channels * self.kernel**2,
                         self.out_channels)

    def backward_data_gemm(self, batch):
        """Backward-data GEMM shape (eq. 2 mapping): (B H W, K R S, C)."""
        return GemmShape(batch * self.height * self.width, self.out_channels * self.kernel**2,
                         self.in_channels)

    def weight_grad_gemm(self, batch):
        """Weight-gradient GEMM shape: (K, B P Q, C R S)."""
        return GemmShape(self.out_channels, batch * self.out_height * self.out_width,
                         self.in_channels * self.kernel**2)
