"""golden.systolic.conv: the three training GEMMs against direct convolution loops in float64."""

import numpy as np
import pytest

from golden.systolic.conv import (
    ConvLayer,
    GemmShape,
    conv2d_backward_data_gemm,
    conv2d_forward_gemm,
    conv2d_weight_grad_gemm,
    conv_output_size,
    im2col,
)
from golden.systolic.numerics import f32_from_bits, gemm, gemm_error_bound
from scripts.sim import knobs

# (height, width, kernel, stride, padding): stride 1 and 2, ragged strides, ResNet's 7x7/2 pad 3.
GEOMETRIES = [(7, 7, 3, 1, 1), (8, 9, 3, 2, 1), (9, 6, 1, 2, 0), (11, 11, 7, 2, 3), (7, 8, 3, 3, 0),
              (5, 5, 2, 2, 1), (6, 5, 1, 1, 0)]


def _direct_forward(x, w, stride, padding):
    """y[b, k, p, q] = sum_{c, r, s} w[k, c, r, s] x_pad[b, c, p stride + r, q stride + s] (DPT eq. 1)."""
    padded = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    kernel = w.shape[2]
    out_h = (x.shape[2] + 2 * padding - kernel) // stride + 1
    out_w = (x.shape[3] + 2 * padding - kernel) // stride + 1
    y = np.zeros((x.shape[0], w.shape[0], out_h, out_w))
    for p in range(out_h):
        for q in range(out_w):
            window = padded[:, :, p * stride:p * stride + kernel, q * stride:q * stride + kernel]
            y[:, :, p, q] = np.einsum("bcrs,kcrs->bk", window, w)
    return y


def _direct_backward(x, w, grad_out, stride, padding):
    """Scatter every output gradient back through the window it came from (the chain rule, directly)."""
    kernel = w.shape[2]
    grad_padded = np.zeros((x.shape[0], x.shape[1], x.shape[2] + 2 * padding, x.shape[3] + 2 * padding))
    grad_w = np.zeros_like(w)
    padded = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    for p in range(grad_out.shape[2]):
        for q in range(grad_out.shape[3]):
            rows = slice(p * stride, p * stride + kernel)
            cols = slice(q * stride, q * stride + kernel)
            grad_padded[:, :, rows, cols] += np.einsum("bk,kcrs->bcrs", grad_out[:, :, p, q], w)
            grad_w += np.einsum("bk,bcrs->kcrs", grad_out[:, :, p, q], padded[:, :, rows, cols])
    height, width = x.shape[2:]
    return grad_padded[:, :, padding:padding + height, padding:padding + width], grad_w


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_training_gemms_match_direct_convolution(geometry):
    height, width, kernel, stride, padding = geometry
    rng = knobs.rng(20)
    for _ in range(knobs.vectors(3)):
        batch, channels, out_channels = rng.integers(1, 4), rng.integers(1, 5), rng.integers(1, 5)
        x = rng.standard_normal((batch, channels, height, width))
        w = rng.standard_normal((out_channels, channels, kernel, kernel))
        y = conv2d_forward_gemm(x, w, stride=stride, padding=padding)
        reference = _direct_forward(x, w, stride, padding)
        assert np.allclose(y, reference, rtol=1e-12, atol=1e-12), f"{geometry} {knobs.describe(3)}"
        grad_out = rng.standard_normal(y.shape)
        grad_in_ref, grad_w_ref = _direct_backward(x, w, grad_out, stride, padding)
        grad_in = conv2d_backward_data_gemm(grad_out, w, (height, width), stride=stride, padding=padding)
        grad_w = conv2d_weight_grad_gemm(x, grad_out, (kernel, kernel), stride=stride, padding=padding)
        assert np.allclose(grad_in, grad_in_ref, rtol=1e-12, atol=1e-12), f"{geometry} {knobs.describe(3)}"
        assert np.allclose(grad_w, grad_w_ref, rtol=1e-12, atol=1e-12), f"{geometry} {knobs.describe(3)}"


@pytest.mark.parametrize("geometry", [g for g in GEOMETRIES if g[0] == g[1]])  # ConvLayer is square
def test_conv_layer_gemm_shapes_are_the_gemms_run(geometry):
    height, width, kernel, stride, padding = geometry
    layer = ConvLayer("probe", 3, height, width, 5, kernel, stride, padding)
    seen = []

    def recording_matmul(a, b):
        seen.append(GemmShape(a.shape[0], a.shape[1], b.shape[1]))
        return a @ b

    batch = 2
    x = np.zeros((batch, 3, height, width))
    w = np.zeros((5, 3, kernel, kernel))
    grad_out = np.zeros((batch, 5, layer.out_height, layer.out_width))
    options = dict(stride=stride, padding=padding, matmul=recording_matmul)
    conv2d_forward_gemm(x, w, **options)
    conv2d_backward_data_gemm(grad_out, w, (height, width), **options)
    conv2d_weight_grad_gemm(x, grad_out, (kernel, kernel), **options)
    assert seen == [layer.forward_gemm(batch), layer.backward_data_gemm(batch), layer.weight_grad_gemm(batch)]


def test_forward_through_the_f16_array_numerics():
    rng = knobs.rng(21)
    x = rng.standard_normal((2, 4, 6, 6)).astype(np.float16)
    w = rng.standard_normal((3, 4, 3, 3)).astype(np.float16)
    results = []

    def array_matmul(a, b):
        a_bits, b_bits = a.view(np.uint16), np.ascontiguousarray(b).view(np.uint16)
        results.append(gemm_error_bound(a_bits, b_bits, element="f16"))
        return f32_from_bits(gemm(a_bits, b_bits, element="f16")).astype(np.float64)

    y = conv2d_forward_gemm(x, w, stride=1, padding=1, matmul=array_matmul)
    reference = _direct_forward(x.astype(np.float64), w.astype(np.float64), 1, 1)
    bound = results[0].reshape(2, 6, 6, 3).transpose(0, 3, 1, 2)
    assert np.all(np.abs(y - reference) <= bound), knobs.describe()


def test_im2col_layout():
    # 1 x 1 x 3 x 3 input 0..8, 2 x 2 kernel, stride 1: rows (p, q), columns (r, s).
    x = np.arange(9.0).reshape(1, 1, 3, 3)
    assert im2col(x, (2, 2)).tolist() == [[0, 1, 3, 4], [1, 2, 4, 5], [3, 4, 6, 7], [4, 5, 7, 8]]


@pytest.mark.parametrize("call, match", [
    (lambda: conv_output_size(4, 7, 1, 1), "kernel must be <="),
    (lambda: conv_output_size(4, 3, 0, 1), "stride must"),
    (lambda: im2col(np.zeros((2, 2, 2)), (1, 1)), "x must be"),
    # 4 x 4 input, 3 x 3 kernel, padding 3 > kernel - 1: P = 8.
    (lambda: conv2d_backward_data_gemm(np.zeros((1, 1, 8, 8)), np.zeros((1, 1, 3, 3)), (4, 4), padding=3),
     "padding must"),
])
def test_conv_rejects_bad_parameters(call, match):
    with pytest.raises(ValueError, match=match):
        call()
