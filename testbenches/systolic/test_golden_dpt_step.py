"""golden.systolic.dpt_step: DPT's partitioned training step against the unpartitioned one and float64.

Where the math is the same (every per-sample GEMM row, the loss, the NPU layers) the partitioned
step must equal :func:`golden.systolic.cnn.train_step` bit for bit. The smartSSD layers' ``dW`` is
recomputed here from the unpartitioned step's tensors (each device's weight-gradient GEMM, then the
binary32 sum in device order) and held to the float64 product by the derived bound, as are the
updated weights. The cycle phases are checked against hand counts and equation 3's terms.
"""

import numpy as np
import pytest

from golden.systolic.cnn import digits_cnn, init_weights, synthetic_digits, train_step
from golden.systolic.conv import im2col
from golden.systolic.cycles import gemm_cycles
from golden.systolic.dpt_cycles import equation3_phases, step_phases
from golden.systolic.dpt_step import partitioned_step, reduce_partials, reduced_grad_bound, sgd_bound
from golden.systolic.numerics import f32_from_bits, gemm
from scripts.sim import knobs

NETWORK = digits_cnn()
LAYERS = len(NETWORK.layers)
BATCH = 8
LR = 0.2


def _seeds(default=2):
    return [knobs.seed() + offset for offset in range(knobs.vectors(default, limit=50))]


def _f16(bits):
    return np.asarray(bits).view(np.float16).astype(np.float64)


def _steps(seed, devices, partition):
    images, labels = synthetic_digits(BATCH, seed=seed)
    weights = init_weights(NETWORK, seed=seed)
    reference = train_step(NETWORK, weights, images, labels, lr=LR)
    step = partitioned_step(NETWORK, weights, images, labels, partition=partition, devices=devices, lr=LR)
    return weights, images, reference, step


def _layer_input(reference, images, index):
    """The f16 operand layer ``index`` reads, rebuilt from the unpartitioned step's outputs."""
    if index == 0:
        return images.astype(np.float16).view(np.uint16)
    z = f32_from_bits(reference.z[index - 1])
    return np.where(z > 0, z, np.float32(0)).astype(np.float16).view(np.uint16)


@pytest.mark.parametrize("devices", [1, 2, 4, 8])
@pytest.mark.parametrize("partition", range(LAYERS))
def test_partitioned_equals_unpartitioned_where_the_math_is(devices, partition):
    for seed in _seeds(1):
        _, _, reference, step = _steps(seed, devices, partition)
        what = f"seed {seed}, {devices} devices, i = {partition}"
        assert step.loss == reference.loss, what
        for index in range(LAYERS):
            assert np.array_equal(step.z[index], reference.z[index]), f"{what}: z of layer {index}"
            assert np.array_equal(step.grad_out[index], reference.grad_out[index]), f"{what}: dL/dz {index}"
        for index in range(partition, LAYERS):
            assert np.array_equal(step.grads[index], reference.grads[index]), f"{what}: NPU dW {index}"
            assert np.array_equal(step.weights[index], reference.weights[index]), f"{what}: NPU W {index}"
        for copy in step.device_weights:
            for index in range(partition):
                assert np.array_equal(copy[index], step.weights[index]), f"{what}: device copies differ"
        if devices == 1:  # one device's chain is the unpartitioned chain
            for index in range(partition):
                assert np.array_equal(step.grads[index], reference.grads[index]), what
        expected = {"forward": LAYERS, "backward_data": LAYERS - 1, "weight_grad": LAYERS}
        for kind, count in expected.items():
            ssd = partition if kind != "backward_data" else max(partition - 1, 0)
            calls = [call for call in step.calls if call.kind == kind]
            assert len(calls) == count - ssd + ssd * devices, f"{what}: {kind} GEMMs"


@pytest.mark.parametrize("devices", [2, 4])
def test_smartssd_dw_is_the_device_order_sum_within_the_float64_bound(devices):
    partition, differing = LAYERS - 1, 0
    for seed in _seeds():
        weights, images, reference, step = _steps(seed, devices, partition)
        per_device = BATCH // devices
        for index in range(partition):
            layer = NETWORK.layers[index].layer
            x = _layer_input(reference, images, index)
            grad = reference.grad_out[index]
            operands, partials = [], []
            for d in range(devices):
                rows = slice(d * per_device, (d + 1) * per_device)
                a = np.ascontiguousarray(grad[rows].transpose(1, 0, 2, 3).reshape(layer.out_channels, -1))
                b = im2col(x[rows], (layer.kernel, layer.kernel), stride=layer.stride, padding=layer.padding)
                operands.append((a, b))
                partials.append(gemm(a, b, element="f16"))
            total = f32_from_bits(partials[0]).copy()
            for part in partials[1:]:
                total = total + f32_from_bits(part)  # float32 + float32: one binary32 rounding
            assert np.array_equal(step.grads[index].reshape(total.shape), total.view(np.uint32)), \
                (seed, index)
            differing += not np.array_equal(step.grads[index], reference.grads[index])

            whole_a = np.concatenate([a for a, _ in operands], 1)
            whole_b = np.concatenate([b for _, b in operands])
            exact = (_f16(whole_a) @ _f16(whole_b)).reshape(weights[index].shape)
            bound = reduced_grad_bound(step.operands[index], step.partials[index])
            assert bound.shape == weights[index].shape
            assert np.all(np.abs(f32_from_bits(step.grads[index]) - exact) <= bound), (seed, index)
            # Not vacuous: the bound is far below f16's precision, so a dW rounded to f16 breaks it.
            rounded = f32_from_bits(step.grads[index]).astype(np.float16).astype(np.float64)
            assert np.any(np.abs(rounded - exact) > bound), (seed, index)
            reference_w = weights[index].astype(np.float64) - float(np.float32(LR)) * exact
            weight_bound = sgd_bound(step.weights[index], weights[index], step.grads[index], LR, bound)
            assert np.all(np.abs(step.weights[index] - reference_w) <= weight_bound), (seed, index)
            assert np.all(weight_bound <= 2.0**-22 * np.abs(reference_w) + 1e-6), (seed, index)
    assert differing, "the reduction order never changed a dW: the check above would be vacuous"


def test_reduction_runs_in_device_order():
    partials = [np.array([1e8], np.float32).view(np.uint32), np.array([1], np.float32).view(np.uint32),
                np.array([-1e8], np.float32).view(np.uint32)]
    assert f32_from_bits(reduce_partials(partials))[0] == 0.0   # (1e8 + 1) rounds to 1e8 first
    assert f32_from_bits(reduce_partials(partials[::2] + partials[1:2]))[0] == 1.0


def test_bad_partitions_are_named():
    images, labels = synthetic_digits(BATCH)
    weights = init_weights(NETWORK)
    with pytest.raises(ValueError, match="partition must be an integer in 0..3"):
        partitioned_step(NETWORK, weights, images, labels, partition=4, devices=2, lr=LR)
    with pytest.raises(ValueError, match="devices must be an integer >= 1 dividing the batch of 8"):
        partitioned_step(NETWORK, weights, images, labels, partition=1, devices=3, lr=LR)


def test_network_and_data():
    assert [entry.layer.weights for entry in NETWORK.layers] == [36, 216, 384, 160]
    assert [NETWORK.live_elements(cut) for cut in range(1, LAYERS)] == [64, 24, 16]
    images, labels = synthetic_digits(20, seed=3)
    again, same_labels = synthetic_digits(20, seed=3)
    assert np.array_equal(images, again) and np.array_equal(labels, same_labels)
    assert images.shape == (20, 1, 8, 8) and images.min() >= 0 and images.max() <= 1
    assert sorted(np.bincount(labels)) == [2] * 10
    assert not np.array_equal(synthetic_digits(20, seed=4)[0], images)


def test_phase_cycles_by_hand_and_against_equation_3():
    # i = 1 on 4 devices: each smartSSD runs conv0 forward on 2 samples, (M, K, N) = (32, 9, 4), on a 2 x 2
    # array with mac_latency 2 + 6 + 2 = 10, acc_latency 6, one slot: tiles = 16 * 2, a k step every
    # 6 cycles so stream = 54 = period, compute = 54 + 2 + 9 = 65, drain 2: 31 * 54 + 65 + 2 = 1741.
    phases = step_phases(NETWORK, partition=1, devices=4)
    assert phases["ssd_forward"] == 1741
    assert gemm_cycles(32, 9, 4, rows=2, cols=2, mac_latency=10, acc_latency=6) == 1741
    for devices in (2, 4):
        for partition in range(LAYERS):
            phases = step_phases(NETWORK, partition=partition, devices=devices)
            eq3 = equation3_phases(NETWORK, partition=partition, devices=devices)
            assert phases["total"] == pytest.approx(sum(v for k, v in phases.items() if k != "total"))
            assert phases["transfer"] == pytest.approx(eq3["transfer"])
            assert phases["all_reduce"] == pytest.approx(2 * eq3["all_reduce"])  # 4-byte against 2-byte
            assert eq3["total"] == pytest.approx(eq3["latency"][partition])
            parts = ("forward", "transfer", "npu_backward", "ssd_backward", "all_reduce")
            assert sum(eq3[part] for part in parts) == pytest.approx(eq3["total"])
            if partition == 0:
                assert phases["ssd_forward"] == phases["ssd_backward"] == phases["transfer"] == 0
    assert equation3_phases(NETWORK, partition=0, devices=4)["best_index"] == 3
    assert equation3_phases(NETWORK, partition=0, devices=2)["best_index"] == 1
