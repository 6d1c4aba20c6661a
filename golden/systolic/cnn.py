"""A small CNN trained one SGD step with every GEMM on the systolic array's numerics (DPT's Fig. 2 workload).

The network (:func:`digits_cnn`) classifies 8 x 8 single-channel images into 10 classes; it is
four GEMM layers, each a :class:`~golden.systolic.conv.ConvLayer` lowered by :mod:`.conv`'s im2col,
no biases:

=====  =====================================  ========  ===========================================
layer  convolution                            output    activation
=====  =====================================  ========  ===========================================
conv0  1 -> 4 channels, 3 x 3, stride 2, pad  4 x 4     ReLU
       1
conv1  4 -> 6, 3 x 3, stride 2, pad 1         2 x 2     ReLU
fc0    6 -> 16, 2 x 2 (the whole 2 x 2 map:   1 x 1     ReLU
       a dense layer on the flattened map)
fc1    16 -> 10, 1 x 1                        1 x 1     none: the logits
=====  =====================================  ========  ===========================================

The data (:func:`synthetic_digits`) are synthetic: scikit-learn is not a dependency, so nothing
bundled is used; each class is a fixed random 8 x 8 stroke pattern plus noise.

Numerics (the contract the partitioned step of :mod:`.dpt_step` keeps)
-----------------------------------------------------------------------
* Every GEMM is :func:`golden.systolic.gemm` with ``element="f16"`` (the ``tiled_gemm`` default,
  DPT's FP16 arrays): operands are f16 raw bits (uint16), products exact in binary32 and the
  accumulation binary32 RNE in increasing k; results are binary32 raw bits (uint32).
  Forward: ``A = im2col(x)`` (rows (b, p, q), columns (c, r, s)), ``B = W^T`` (rows (c, r, s),
  columns k). Backward data (layers 1..3 only): ``A = im2col(pad(dilate(grad_out)))``,
  ``B = W_flip``. Weight gradient: ``A = grad_out^T`` (rows k, columns (b, p, q)), ``B = im2col(x)``,
  so its reduction runs over the samples in batch order, then over the output pixels.
* The master weights are binary32; each step's operand copy is ``round_f16(W)`` (RNE).
* A layer's binary32 output ``z`` becomes the next operand ``round_f16(relu(z))``; the logits
  stay binary32. The loss is the mean softmax cross-entropy evaluated in float64 from the
  binary32 logits; ``dL/dlogits = (softmax(z) - onehot(y)) / B`` in float64, rounded once to
  f16. A backward-data result (binary32) is rounded to f16 and multiplied by the ReLU
  mask ``z > 0`` (exact).
* SGD: ``W <- fl32(W - fl32(lr dW))`` element-wise, ``lr`` a binary32 number.
"""

from dataclasses import dataclass, field

import numpy as np

from .conv import (
    ConvLayer,
    conv2d_backward_data_gemm,
    conv2d_forward_gemm,
    conv2d_weight_grad_gemm,
)
from .networks import Network, NetworkLayer
from .numerics import f32_from_bits, gemm

__all__ = ["CLASSES", "IMAGE", "KINDS", "LEARNING_RATE", "GemmCall", "StepResult", "activation",
           "cross_entropy", "digits_cnn", "f16_values", "golden_gemm", "init_weights", "layer_backward_data",
           "layer_forward", "layer_weight_grad", "relu_backward", "relu_mask", "round_f16", "sgd_update",
           "synthetic_digits", "train_step"]

CLASSES = 10
IMAGE = 8
KINDS = ("forward", "backward_data", "weight_grad")
LEARNING_RATE = 0.2


def digits_cnn():
    """The CNN of the module docstring as a :class:`~golden.systolic.networks.Network`.

    Returns
    -------
    Network
        Four layers ``conv0, conv1, fc0, fc1``; tensors per sample ``image`` (64), ``a0`` (64),
        ``a1`` (24), ``h`` (16), ``logits`` (10).
    """
    layers = (ConvLayer("conv0", 1, IMAGE, IMAGE, 4, 3, 2, 1), ConvLayer("conv1", 4, 4, 4, 6, 3, 2, 1),
              ConvLayer("fc0", 6, 2, 2, 16, 2), ConvLayer("fc1", 16, 1, 1, CLASSES, 1))
    names = ("image", "a0", "a1", "h", "logits")
    entries = tuple(NetworkLayer(layer, (names[index],), names[index + 1])
                    for index, layer in enumerate(layers))
    sizes = {"image": IMAGE * IMAGE}
    sizes.update({entry.writes: entry.layer.out_channels * entry.layer.out_height * entry.layer.out_width
                  for entry in entries})
    return Network("digits CNN", "image", entries, sizes)


def round_f16(values):
    """Round ``values`` (binary32 or float64) once to f16 raw bits, round to nearest even.

    Parameters
    ----------
    values : array_like of float

    Returns
    -------
    numpy.ndarray of uint16
    """
    return np.asarray(values).astype(np.float16).view(np.uint16)  # NumPy's conversion is one RNE rounding


def f16_values(bits):
    """f16 raw bits widened exactly to float64."""
    return np.asarray(bits, np.uint16).view(np.float16).astype(np.float64)


def synthetic_digits(batch, *, seed=1):
    """``batch`` synthetic 8 x 8 "digits": images as float32 in [0, 1] and int labels.

    Class c is a fixed pattern (a random walk of strokes drawn from ``seed + 1000``), the same
    for every batch; each sample adds uniform noise of amplitude 0.25 and is clipped to [0, 1].
    Labels cycle through the classes in a seeded random order.

    Returns
    -------
    images : numpy.ndarray of float32, shape (batch, 1, 8, 8)
    labels : numpy.ndarray of int64, shape (batch,)
    """
    if not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ValueError(f"batch must be an integer >= 1, not {batch!r}")
    patterns = np.zeros((CLASSES, IMAGE, IMAGE), np.float32)
    template_rng = np.random.default_rng(seed + 1000)
    for pattern in patterns:
        row, col = template_rng.integers(1, IMAGE - 1, 2)
        for _ in range(14):
            pattern[row, col] = 1.0
            row = int(np.clip(row + template_rng.integers(-1, 2), 0, IMAGE - 1))
            col = int(np.clip(col + template_rng.integers(-1, 2), 0, IMAGE - 1))
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(batch) % CLASSES).astype(np.int64)
    noise = rng.uniform(-0.25, 0.25, (batch, IMAGE, IMAGE)).astype(np.float32)
    images = np.clip(patterns[labels] + noise, 0, 1).astype(np.float32)
    return images[:, None], labels


def init_weights(network, *, seed=1):
    """He-normal binary32 master weights, one (K, C, R, S) array per layer."""
    rng = np.random.default_rng(seed)
    weights = []
    for entry in network.layers:
        layer = entry.layer
        fan_in = layer.in_channels * layer.kernel**2
        shape = (layer.out_channels, layer.in_channels, layer.kernel, layer.kernel)
        weights.append((rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32))
    return weights


@dataclass(frozen=True)
class GemmCall:
    """Which GEMM of the step this is: ``kind`` (one of forward, backward_data, weight_grad), the
    layer index, the ``side`` (``"npu"``, or ``"ssd"``) and the device (0 on the NPU)."""

    kind: str
    layer: int
    side: str = "npu"
    device: int = 0


def golden_gemm(call, a_bits, b_bits):
    """The default GEMM hook: ``hook(call, a_bits, b_bits)``, f16 operands, binary32 bits, by :func:`gemm`."""
    return gemm(a_bits, b_bits, element="f16")


def _through(hook, call):
    return lambda a, b: hook(call, np.ascontiguousarray(a), np.ascontiguousarray(b))


def layer_forward(layer, w_bits, x_bits, hook, call):
    """``z = conv(x, W)`` as one GEMM: binary32 bits, shape (B, K, P, Q)."""
    return conv2d_forward_gemm(x_bits, w_bits, stride=layer.stride, padding=layer.padding,
                               matmul=_through(hook, call))


def layer_backward_data(layer, w_bits, grad_bits, hook, call):
    """``dL/dx`` of ``layer`` as one GEMM (DPT equation 2): binary32 bits, shape (B, C, H, W)."""
    return conv2d_backward_data_gemm(grad_bits, w_bits, (layer.height, layer.width), stride=layer.stride,
                                     padding=layer.padding, matmul=_through(hook, call))


def layer_weight_grad(layer, x_bits, grad_bits, hook, call):
    """``dL/dW`` of ``layer`` over the samples of ``x``: binary32 bits, shape (K, C, R, S)."""
    return conv2d_weight_grad_gemm(x_bits, grad_bits, (layer.kernel, layer.kernel), stride=layer.stride,
                                   padding=layer.padding, matmul=_through(hook, call))


def activation(z_bits):
    """The next layer's operand: ``round_f16(relu(z))`` (ReLU keeps -0.0 out: ``z > 0``)."""
    z = f32_from_bits(z_bits)
    return round_f16(np.where(z > 0, z, np.float32(0)))


def relu_mask(grad_bits, z_bits):
    """``dL/da * (z > 0)`` for f16 ``dL/da``: exact, f16 raw bits."""
    return np.where(f32_from_bits(z_bits) > 0, grad_bits, np.uint16(0)).astype(np.uint16)


def relu_backward(grad_f32_bits, z_bits):
    """``round_f16(dL/da) * (z > 0)``: the gradient at a ReLU's input, f16 raw bits."""
    return relu_mask(round_f16(f32_from_bits(grad_f32_bits)), z_bits)


def cross_entropy(logits_bits, labels):
    """Mean softmax cross-entropy (float64) and ``dL/dlogits`` rounded once to f16.

    Parameters
    ----------
    logits_bits : numpy.ndarray of uint32, shape (B, classes, 1, 1)
    labels : numpy.ndarray of int, shape (B,)

    Returns
    -------
    loss : float
    grad_bits : numpy.ndarray of uint16, shape (B, classes, 1, 1)
    """
    logits = f32_from_bits(logits_bits).reshape(len(labels), -1).astype(np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    rows = np.arange(len(labels))
    loss = float(-log_softmax[rows, labels].mean())
    grad = np.exp(log_softmax)
    grad[rows, labels] -= 1.0
    grad /= len(labels)
    return loss, round_f16(grad).reshape(logits_bits.shape)


def sgd_update(w, dw_bits, lr):
    """``fl32(W - fl32(lr dW))``: binary32, two roundings per weight."""
    return (w - np.float32(lr) * f32_from_bits(dw_bits)).astype(np.float32)


@dataclass
class StepResult:
    """One training step.

    Attributes
    ----------
    loss : float
        Before the update.
    weights : list of numpy.ndarray of float32
        Master weights after the update.
    grads : list of numpy.ndarray of uint32
        ``dW`` of every layer (binary32 bits), the one the update used.
    z : list of numpy.ndarray of uint32
        Every layer's binary32 output, whole batch.
    grad_out : list of numpy.ndarray of uint16
        ``dL/dz`` of every layer, f16 bits, whole batch.
    calls : list of GemmCall
        Every GEMM in the order it ran.
    """

    loss: float
    weights: list
    grads: list
    z: list
    grad_out: list
    calls: list = field(default_factory=list)


def train_step(network, weights, images, labels, *, lr=LEARNING_RATE, hook=golden_gemm):
    """One unpartitioned SGD step of ``network`` on the NPU alone (every GEMM over the whole batch).

    Parameters
    ----------
    network : Network
        From :func:`digits_cnn`.
    weights : list of numpy.ndarray of float32
    images : numpy.ndarray of float32, shape (B, 1, 8, 8)
    labels : numpy.ndarray of int, shape (B,)
    lr : float
    hook : callable, optional
        ``hook(call, a_bits, b_bits)`` for each GEMM (default :func:`golden_gemm`); a caller
        records or replaces GEMMs through it.

    Returns
    -------
    StepResult
    """
    calls = []

    def recorded(call, a, b):
        calls.append(call)
        return hook(call, a, b)

    layers = [entry.layer for entry in network.layers]
    w_bits = [round_f16(w) for w in weights]
    inputs, z = [round_f16(images)], []
    for index, layer in enumerate(layers):
        z.append(layer_forward(layer, w_bits[index], inputs[-1], recorded, GemmCall("forward", index)))
        if index + 1 < len(layers):
            inputs.append(activation(z[-1]))
    loss, grad = cross_entropy(z[-1], labels)
    grad_out, grads = [None] * len(layers), [None] * len(layers)
    for index in reversed(range(len(layers))):
        grad_out[index] = grad
        grads[index] = layer_weight_grad(layers[index], inputs[index], grad, recorded,
                                         GemmCall("weight_grad", index))
        if index:
            data = layer_backward_data(layers[index], w_bits[index], grad, recorded,
                                       GemmCall("backward_data", index))
            grad = relu_backward(data, z[index - 1])
    new = [sgd_update(w, g, lr) for w, g in zip(weights, grads, strict=True)]
    return StepResult(loss, new, grads, z, grad_out, calls)
