"""DPT's hybrid training step (Fig. 2) on :mod:`.cnn`'s network: layers ``0 .. i-1`` data-parallel on n
smartSSDs, layers ``i ..`` on the NPU, the smartSSD layers' weight gradients all-reduced.

:func:`partitioned_step` runs one SGD step of :func:`~.cnn.digits_cnn` partitioned at index ``i``:

1. **SSD forward.** The batch of B samples is split evenly and in order: device d holds samples
   ``d B/n .. (d+1) B/n - 1`` and runs the forward GEMMs of layers ``0 .. i-1`` on them.
2. **Transfer.** Every device sends its f16 activations of the cut to the NPU, which stacks them
   in device order, i.e. in batch order (``i = 0``: the NPU reads the images itself).
3. **NPU forward and backward.** Layers ``i ..`` on the whole batch: forward, loss, then per layer
   from the last the weight gradient and, for ``i > 0`` down to layer ``i``, the data gradient.
   The NPU rounds ``dL/da`` of the cut to f16 and sends each device its samples' rows.
4. **SSD backward.** Each device applies its ReLU mask and runs, per layer from ``i-1`` down to 0,
   the weight gradient over its own samples (a binary32 partial ``P_d``) and the data gradient.
5. **dW all-reduce.** The partials of each smartSSD layer are gathered into device 0 and reduced
   in binary32, in device order: ``dW = fl(...fl(fl(P_0 + P_1) + P_2) ... + P_{n-1})``; the sum is
   broadcast, so every device holds the same bits.
6. **Update.** Every device applies SGD to its copy of the smartSSD layers (identical inputs,
   identical weights); the NPU updates layers ``i ..``.

What equals the unpartitioned step (:func:`~.cnn.train_step`) bit for bit, and what does not
-------------------------------------------------------------------------------------------
A forward or backward-data GEMM row belongs to one sample (rows (b, p, q)), and splitting the batch
only splits the rows, so every activation, ``dL/dz``, the logits and the loss are identical; so are
the weight gradients and the updated weights of the NPU layers, whose GEMMs span the whole batch
as before. The one difference is the smartSSD layers' ``dW``: unpartitioned, one PE chain sums
all ``B P Q`` products in batch order; partitioned, device d's chain sums its own samples' products
from +0.0 and step 5 adds the n partials. (``P_0`` equals the first ``B P Q / n`` steps of the
unpartitioned chain; the later devices restart from zero.) Both are held to the exact
``dW`` by float64 bounds: :func:`reduced_grad_bound` for the partitioned sum, and the updated weights
through :func:`sgd_bound`.
"""

from dataclasses import dataclass

import numpy as np

from .cnn import (
    GemmCall,
    activation,
    cross_entropy,
    f16_values,
    golden_gemm,
    layer_backward_data,
    layer_forward,
    layer_weight_grad,
    relu_backward,
    relu_mask,
    round_f16,
    sgd_update,
)
from .numerics import ETA_F32, U_F32, U_F64, _gamma, f32_bits, f32_from_bits, gemm_error_bound

__all__ = ["PartitionedStep", "check_partition", "partitioned_step", "reduce_partials", "reduced_grad_bound",
           "sgd_bound"]


def check_partition(network, partition, devices, batch):
    """Raise ValueError unless ``0 <= partition < layers`` and ``devices >= 1`` divides ``batch``."""
    layers = len(network.layers)
    if isinstance(partition, bool) or not isinstance(partition, (int, np.integer)) \
            or not 0 <= partition < layers:
        raise ValueError(f"partition must be an integer in 0..{layers - 1}, not {partition!r}")
    if isinstance(devices, bool) or not isinstance(devices, (int, np.integer)) or devices < 1 \
            or batch % devices:
        raise ValueError(f"devices must be an integer >= 1 dividing the batch of {batch}, not {devices!r}")


def reduce_partials(partials):
    """``fl(...fl(P_0 + P_1) ... + P_{n-1})`` in binary32, device order: the all-reduce's sum (bits)."""
    total = f32_from_bits(partials[0]).copy()
    with np.errstate(all="ignore"):
        for part in partials[1:]:
            total = (total + f32_from_bits(part)).astype(np.float32)
    return f32_bits(total)


@dataclass
class PartitionedStep:
    """One partitioned step (the fields of :class:`~.cnn.StepResult`, whole-batch tensors assembled
    from the devices' slices in batch order) plus what the partition adds.

    Attributes
    ----------
    loss, weights, grads, z, grad_out, calls
        As :class:`~.cnn.StepResult`; ``weights`` are device 0's copy for layers ``0 .. i-1``.
    partition, devices : int
    partials : dict of int to list
        Layer ``l < i``: the n devices' binary32 ``dW`` partials (bits), device order.
    device_weights : list of list
        ``device_weights[d][l]``: device d's updated weights of layer ``l < i``.
    operands : dict of int to list
        Layer ``l < i``: each device's weight-gradient operands ``(A, B)`` (f16 bits), for the bound.
    """

    loss: float
    weights: list
    grads: list
    z: list
    grad_out: list
    calls: list
    partition: int
    devices: int
    partials: dict
    device_weights: list
    operands: dict


def partitioned_step(network, weights, images, labels, *, partition, devices, lr, hook=golden_gemm):
    """One SGD step partitioned at ``partition`` over ``devices`` smartSSDs (see the module docstring).

    Parameters
    ----------
    network : golden.systolic.networks.Network
        From :func:`~.cnn.digits_cnn`.
    weights : list of numpy.ndarray of float32
    images, labels
        The batch, as for :func:`~.cnn.train_step`; ``devices`` divides its size.
    partition : int
        ``i`` in ``0 .. layers-1``.
    devices : int
    lr : float
    hook : callable
        ``hook(call, a_bits, b_bits)``, each GEMM tagged with its :class:`~.cnn.GemmCall`.

    Returns
    -------
    PartitionedStep
    """
    check_partition(network, partition, devices, len(labels))
    layers = [entry.layer for entry in network.layers]
    calls, operands = [], {}

    def recorded(call, a, b):
        calls.append(call)
        if call.side == "ssd" and call.kind == "weight_grad":
            operands.setdefault(call.layer, []).append((a, b))
        return hook(call, a, b)

    w_bits = [round_f16(w) for w in weights]
    per_device = len(labels) // devices
    ssd = range(partition)
    # Each device's forward pass over layers 0 .. i-1: its inputs, outputs and, at the cut, activations.
    inputs = [[round_f16(images[d * per_device:(d + 1) * per_device])] for d in range(devices)]
    ssd_z = [[] for _ in range(devices)]
    for index in ssd:
        for d in range(devices):
            ssd_z[d].append(layer_forward(layers[index], w_bits[index], inputs[d][-1], recorded,
                                          GemmCall("forward", index, "ssd", d)))
            inputs[d].append(activation(ssd_z[d][-1]))
    npu_inputs = [np.concatenate([inputs[d][-1] for d in range(devices)])]
    z = [np.concatenate([ssd_z[d][index] for d in range(devices)]) for index in ssd]
    for index in range(partition, len(layers)):
        z.append(layer_forward(layers[index], w_bits[index], npu_inputs[-1], recorded,
                               GemmCall("forward", index)))
        if index + 1 < len(layers):
            npu_inputs.append(activation(z[-1]))
    loss, grad = cross_entropy(z[-1], labels)
    grad_out, grads = [None] * len(layers), [None] * len(layers)
    for index in reversed(range(partition, len(layers))):
        grad_out[index] = grad
        grads[index] = layer_weight_grad(layers[index], npu_inputs[index - partition], grad, recorded,
                                         GemmCall("weight_grad", index))
        if index:
            data = layer_backward_data(layers[index], w_bits[index], grad, recorded,
                                       GemmCall("backward_data", index))
            # At the cut the NPU sends dL/da rounded to f16; each device applies its own ReLU mask.
            grad = round_f16(f32_from_bits(data)) if index == partition else relu_backward(data, z[index - 1])
    partials = {index: [None] * devices for index in ssd}
    ssd_grad_out = [[None] * partition for _ in range(devices)]
    for d in range(devices):
        if partition:  # else the smartSSDs hold no layer and the loop below is empty
            device_grad = relu_mask(grad[d * per_device:(d + 1) * per_device], ssd_z[d][partition - 1])
        for index in reversed(ssd):
            ssd_grad_out[d][index] = device_grad
            partials[index][d] = layer_weight_grad(layers[index], inputs[d][index], device_grad, recorded,
                                                   GemmCall("weight_grad", index, "ssd", d))
            if index:
                data = layer_backward_data(layers[index], w_bits[index], device_grad, recorded,
                                           GemmCall("backward_data", index, "ssd", d))
                device_grad = relu_backward(data, ssd_z[d][index - 1])
    for index in ssd:
        grad_out[index] = np.concatenate([ssd_grad_out[d][index] for d in range(devices)])
        grads[index] = reduce_partials(partials[index])
    # Every device updates its own copy from the broadcast sum; the NPU updates layers i ...
    device_weights = [[sgd_update(weights[index], grads[index], lr) for index in ssd] for _ in range(devices)]
    new = device_weights[0] + [sgd_update(weights[index], grads[index], lr)
                               for index in range(partition, len(layers))]
    return PartitionedStep(loss, new, grads, z, grad_out, calls, partition, devices, partials, device_weights,
                           operands)


def reduced_grad_bound(operands, partials):
    """Bound on ``|reduce_partials(partials) - dW_64|`` with ``dW_64`` the float64 product of the
    whole batch's operands (any summation order), element-wise.

    Each partial ``P_d = gemm(A_d, B_d)`` is within ``beta_d`` (:func:`~.numerics.gemm_error_bound`,
    without the float64 term) of ``A_d B_d``; recursive summation of n terms adds at most
    ``gamma_{n-1} sum_d |P_d|`` (Higham, eq. 4.4); the float64 reference of the whole K = sum K_d
    adds ``gamma64_{K+1} sum_d |A_d| |B_d|``::

        |dW - dW_64| <= sum_d beta_d + gamma_{n-1} sum_d |P_d| + gamma64_{K+1} sum_d |A_d||B_d|

    Parameters
    ----------
    operands : list of (A, B)
        Each device's f16 operand bits, device order.
    partials : list of numpy.ndarray of uint32

    Returns
    -------
    numpy.ndarray of float64, the shape of one partial (its elements in the GEMM's row-major order)
    """
    shape = np.shape(partials[0])  # the GEMM's (M, N) result, as the caller shaped it
    bound = sum(gemm_error_bound(a, b, element="f16", include_f64_reference=False) for a, b in operands)
    magnitude = sum(np.abs(f16_values(a)) @ np.abs(f16_values(b)) for a, b in operands)
    reduction = _gamma(len(partials) - 1, U_F32) if len(partials) > 1 else 0.0
    summed = sum(np.abs(f32_from_bits(p).astype(np.float64)) for p in partials)
    k_total = sum(a.shape[1] for a, _ in operands)
    return (bound + _gamma(k_total + 1, U_F64) * magnitude).reshape(shape) + reduction * summed


def sgd_bound(new_weights, weights, grad_bits, lr, grad_bound):
    """Bound on ``|new - (W - lr dW_64)|`` (float64) for ``new = fl32(W - fl32(lr dW))`` and
    ``|dW - dW_64| <= grad_bound``.

    With ``t = fl(lr dW) = lr dW (1 + d1)`` and ``new = (W - t)(1 + d2)``, ``|d1|, |d2| <= u``:
    ``new - (W - lr dW_64) = new d2 / (1 + d2) - lr dW d1 + lr (dW_64 - dW)``, so::

        |error| <= u / (1 - u) |new| + u lr |dW| + eta + lr grad_bound   (+ the reference's float64 roundings)

    (``eta = 2^-150``: ``lr dW`` may round into binary32's subnormals, where the error is absolute.)
    """
    lr = float(np.float32(lr))
    grad = np.abs(f32_from_bits(grad_bits).astype(np.float64))
    new = np.abs(np.asarray(new_weights, np.float64))
    bound = U_F32 / (1 - U_F32) * new + U_F32 * lr * grad + ETA_F32 + lr * grad_bound
    # The reference W - lr dW_64 evaluated in float64 rounds twice more.
    return bound + 2 * U_F64 * (np.abs(np.asarray(weights, np.float64)) + lr * grad + lr * grad_bound)
