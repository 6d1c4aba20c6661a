"""``neartrain demo dpt``: one DPT training step (Fig. 2), partitioned between simulated smartSSDs and an NPU.

The network is :func:`golden.systolic.cnn.digits_cnn` (a small CNN on synthetic 8 x 8 digits,
four GEMM layers, f16 operands, binary32 accumulation) and the step is
:func:`golden.systolic.dpt_step.partitioned_step`: layers ``0 .. i-1`` data-parallel on 2 or 4
smartSSDs (the batch of 8 split evenly), layers ``i ..`` on the NPU, the smartSSD layers' ``dW``
gathered, reduced in binary32 in device order and broadcast. ``i`` defaults to the index equation 3
(:func:`golden.systolic.partition.partition_sweep`) picks on the demo system
(:func:`golden.systolic.dpt_cycles.demo_system`: 2 x 2 f16 arrays in the smartSSDs, 4 x 4 in the NPU).

Checks (the result PASSes only if all hold):

* against the unpartitioned step (:func:`golden.systolic.cnn.train_step`, every GEMM on the whole
  batch): the loss, every layer's output and output gradient, and the NPU layers' ``dW`` and updated
  weights bit for bit;
* the smartSSD layers' ``dW`` (their reduction order differs, see :mod:`golden.systolic.dpt_step`)
  within :func:`~golden.systolic.dpt_step.reduced_grad_bound` of the float64 product, and their
  updated weights within :func:`~golden.systolic.dpt_step.sgd_bound` of the float64 update; every
  device's updated weights identical;
* ``backend="rtl"``: for each GEMM kind (forward, backward data, weight gradient) the cheapest GEMM
  of the step that fits a default ``tiled_gemm`` buffer (M, K, N <= 64), a smartSSD's where there is
  one, else the NPU's, runs on the Verilated ``tiled_gemm`` of its side's array (2 x 2 or 4 x 4,
  f16, output stationary); its raw bits must equal the golden's and its compute-cycle counter the
  cycle model's. The step's values are the golden's: an RTL GEMM that equals them bit for bit
  would have produced the same step. The other GEMMs take the golden and the cycle model's count.

The printout gives each phase's cycles from the cycle model
(:func:`golden.systolic.dpt_cycles.step_phases`) beside equation 3's terms for the same ``i``, the
latency of every ``i`` by both, and the RTL-measured cycles of the GEMMs run on RTL.
"""

import dataclasses
import time

import numpy as np

from golden.systolic.cnn import (
    KINDS,
    LEARNING_RATE,
    digits_cnn,
    golden_gemm,
    init_weights,
    synthetic_digits,
    train_step,
)
from golden.systolic.cycles import gemm_cycles
from golden.systolic.dpt_cycles import (
    BATCH,
    NPU_ARRAY,
    PHASES,
    SSD_ARRAY,
    demo_schedule,
    equation3_phases,
    gemm_shape,
    step_phases,
)
from golden.systolic.dpt_step import partitioned_step, reduced_grad_bound, sgd_bound
from golden.systolic.numerics import f32_from_bits

__all__ = ["BACKENDS", "DEVICE_CHOICES", "MAX_BUFFER", "DptDemoResult", "RtlGemm", "check_arguments",
           "format_report", "gemm_params", "run_demo", "select_rtl"]

BACKENDS = ("rtl", "golden")
DEVICE_CHOICES = (2, 4)
MAX_BUFFER = 64  # tiled_gemm's default max_m, max_k, max_n


def check_arguments(*, devices=4, partition=None, backend="rtl", seed=1):
    """Raise ValueError naming the first bad argument."""
    layers = len(digits_cnn().layers)
    if devices not in DEVICE_CHOICES or isinstance(devices, bool):
        raise ValueError(f"devices must be one of {', '.join(map(str, DEVICE_CHOICES))}, not {devices!r}")
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)
                                  or not 0 <= partition < layers):
        raise ValueError(f"partition must be an integer in 0..{layers - 1}, not {partition!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, not {seed!r}")


def gemm_params(side):
    """The ``tiled_gemm`` build of a side's array: the block's defaults (f16, one slot, buffers of 64)
    at the side's geometry."""
    rows, cols = SSD_ARRAY if side == "ssd" else NPU_ARRAY
    return {"rows": rows, "cols": cols}


@dataclasses.dataclass
class RtlGemm:
    """One GEMM run on RTL: which, its shape, cycles measured and modelled, and whether the bits match."""

    kind: str
    layer: str
    side: str
    device: int
    shape: tuple
    cycles: int
    compute_cycles: int
    model_cycles: int
    bit_exact: bool


@dataclasses.dataclass
class DptDemoResult:
    devices: int
    partition: int
    chosen: int
    backend: str
    seed: int
    layer_names: list
    loss: float
    loss_after: float
    bit_exact_golden: dict
    bounds: dict
    devices_agree: bool
    phases: dict
    equation3: dict
    step_latency: list
    equation3_latency: list
    gemms: dict
    rtl: list
    rtl_seconds: dict
    seconds: float

    @property
    def rtl_ok(self):
        return all(gemm.bit_exact and gemm.compute_cycles == gemm.model_cycles for gemm in self.rtl) and (
            self.backend != "rtl" or {gemm.kind for gemm in self.rtl} == set(KINDS))

    @property
    def ok(self):
        return (all(self.bit_exact_golden.values()) and all(ratio <= 1 for ratio in self.bounds.values())
                and self.devices_agree and self.rtl_ok)


def _side_batch(call, devices):
    return BATCH // devices if call.side == "ssd" else BATCH


def select_rtl(network, recorded, devices):
    """The GEMMs to run on RTL: per kind, the cheapest (by the cycle model) of ``recorded``
    (``[(call, a, b, c), ...]``) within the buffers, a smartSSD's if any fits, else the NPU's."""
    chosen = []
    for kind in KINDS:
        fits = [(call, a, b, c) for call, a, b, c in recorded if call.kind == kind
                and max(gemm_shape(network, call, _side_batch(call, devices))) <= MAX_BUFFER]
        for side in ("ssd", "npu"):
            candidates = [entry for entry in fits if entry[0].side == side]
            if candidates:
                array = SSD_ARRAY if side == "ssd" else NPU_ARRAY
                chosen.append(min(candidates, key=lambda entry: _compute_cycles(
                    gemm_shape(network, entry[0], _side_batch(entry[0], devices)), array)))
                break
    return chosen


def _compute_cycles(shape, array):
    schedule = demo_schedule()
    return gemm_cycles(*shape, rows=array[0], cols=array[1], tile=schedule.tile,
                       mac_latency=schedule.mac_latency, acc_latency=schedule.acc_latency)


def _run_rtl(network, selected):
    """Run ``selected`` on each side's build (one simulation per side); the RtlGemms and each side's
    wall time (the build included when it is not cached)."""
    from scripts.sim.devices.aggregate import run_gemms

    results, seconds = [], {}
    for side in ("ssd", "npu"):
        jobs = [entry for entry in selected if entry[0].side == side]
        if not jobs:
            continue
        start = time.perf_counter()
        replies = run_gemms(gemm_params(side), [(a, b) for _, a, b, _ in jobs])
        seconds[side] = time.perf_counter() - start
        for (call, a, b, c), reply in zip(jobs, replies, strict=True):
            shape = (a.shape[0], a.shape[1], b.shape[1])
            results.append(RtlGemm(call.kind, network.layers[call.layer].layer.name, side, call.device, shape,
                                   reply["cycles"], reply["compute_cycles"],
                                   _compute_cycles(shape, SSD_ARRAY if side == "ssd" else NPU_ARRAY),
                                   bool(np.array_equal(reply["c"], c))))
    return results, seconds


def _worst_ratio(error, bound):
    """max error / bound, a zero error counting 0 (a dead ReLU's gradient is exactly 0, bound 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.where(error == 0, 0.0, error / bound).max())


def _bound_ratios(step, weights, partition):
    """max |error| / bound of each smartSSD layer's dW and updated weights against float64."""
    ratios = {}
    for index in range(partition):
        operands, partials = step.operands[index], step.partials[index]
        a = np.concatenate([left for left, _ in operands], axis=1).view(np.float16).astype(np.float64)
        b = np.concatenate([right for _, right in operands], axis=0).view(np.float16).astype(np.float64)
        exact = (a @ b).reshape(weights[index].shape)
        grad_bound = reduced_grad_bound(operands, partials)
        error = np.abs(f32_from_bits(step.grads[index]).astype(np.float64) - exact)
        ratios[f"dW layer {index}"] = _worst_ratio(error, grad_bound)
        reference = weights[index].astype(np.float64) - float(np.float32(LEARNING_RATE)) * exact
        weight_bound = sgd_bound(step.weights[index], weights[index], step.grads[index], LEARNING_RATE,
                                 grad_bound)
        ratios[f"W layer {index}"] = _worst_ratio(np.abs(step.weights[index] - reference), weight_bound)
    return ratios


def run_demo(*, devices=4, partition=None, backend="rtl", seed=1):
    """Run the partitioned step, check it, and (``backend="rtl"``) run one GEMM of each kind on RTL."""
    check_arguments(devices=devices, partition=partition, backend=backend, seed=seed)
    start = time.perf_counter()
    network = digits_cnn()
    chosen = equation3_phases(network, partition=0, devices=devices)["best_index"]
    index = chosen if partition is None else partition
    images, labels = synthetic_digits(BATCH, seed=seed)
    weights = init_weights(network, seed=seed)
    recorded = []

    def hook(call, a, b):
        c = golden_gemm(call, a, b)
        recorded.append((call, a, b, c))
        return c

    reference = train_step(network, weights, images, labels, lr=LEARNING_RATE)
    step = partitioned_step(network, weights, images, labels, partition=index, devices=devices,
                            lr=LEARNING_RATE, hook=hook)
    npu = range(index, len(network.layers))
    same = {
        "loss": step.loss == reference.loss,
        "layer outputs": all(np.array_equal(x, y) for x, y in zip(step.z, reference.z, strict=True)),
        "output gradients": all(np.array_equal(x, y)
                                for x, y in zip(step.grad_out, reference.grad_out, strict=True)),
        "NPU dW": all(np.array_equal(step.grads[i], reference.grads[i]) for i in npu),
        "NPU weights": all(np.array_equal(step.weights[i], reference.weights[i]) for i in npu),
    }
    agree = all(np.array_equal(copy[i], step.device_weights[0][i]) for copy in step.device_weights
                for i in range(index))
    loss_after = train_step(network, step.weights, images, labels).loss
    gemms = {kind: sum(1 for call, *_ in recorded if call.kind == kind) for kind in KINDS}
    rtl, rtl_seconds = [], {}
    if backend == "rtl":
        rtl, rtl_seconds = _run_rtl(network, select_rtl(network, recorded, devices))
    phases = step_phases(network, partition=index, devices=devices)
    equation3 = equation3_phases(network, partition=index, devices=devices)
    step_latency = [step_phases(network, partition=i, devices=devices)["total"]
                    for i in range(len(network.layers))]
    return DptDemoResult(
        devices=devices, partition=index, chosen=chosen, backend=backend, seed=seed,
        layer_names=[entry.layer.name for entry in network.layers], loss=step.loss, loss_after=loss_after,
        bit_exact_golden=same, bounds=_bound_ratios(step, weights, index), devices_agree=agree,
        phases=phases, equation3={k: v for k, v in equation3.items() if k not in ("latency", "best_index")},
        step_latency=step_latency, equation3_latency=[float(v) for v in equation3["latency"]],
        gemms=gemms, rtl=rtl, rtl_seconds=rtl_seconds, seconds=time.perf_counter() - start)


_EQ3 = {"ssd_forward": "forward", "transfer": "transfer", "npu_backward": "npu_backward",
        "ssd_backward": "ssd_backward", "all_reduce": "all_reduce"}
_EQ3_NOTE = {"ssd_forward": "B max(FP_SSD/n, FP_NPU): SSD and NPU forward, pipelined per sample",
             "npu_forward": "(in the line above)", "transfer": "T_PCIe", "npu_backward": "B BP_NPU + WU_NPU",
             "ssd_backward": "B BP_SSD / n + WU_SSD", "all_reduce": "T_interSSD (2-byte elements)",
             "update": "(no term)"}
_KIND = {"forward": "forward", "backward_data": "backward data", "weight_grad": "weight gradient"}


def _array_name(side):
    return f"{side} {'x'.join(map(str, gemm_params(side).values()))}"


def _phase_of(gemm):
    if gemm.kind == "forward":
        return f"{gemm.side}_forward"
    return f"{gemm.side}_backward"


def format_report(result):
    """The demo's printout."""
    i, names = result.partition, result.layer_names
    ssd, npu = ", ".join(names[:i]) or "none", ", ".join(names[i:])
    lines = [
        f"network: digits CNN {' -> '.join(names)} (conv 3x3/2, conv 3x3/2, dense 24-16, dense 16-10; ReLU), "
        f"synthetic 8x8 digits, batch {BATCH}, seed {result.seed}, SGD lr {LEARNING_RATE}",
        f"GEMMs: f16 operands, binary32 accumulation (golden.systolic.gemm); {sum(result.gemms.values())} in "
        f"the step ({', '.join(f'{n} {_KIND[k]}' for k, n in result.gemms.items())})",
        f"system: {result.devices} smartSSDs with {SSD_ARRAY[0]}x{SSD_ARRAY[1]} arrays, NPU "
        f"{NPU_ARRAY[0]}x{NPU_ARRAY[1]}, f16 output stationary, 200 MHz (golden.systolic.dpt_cycles)",
        f"partition i = {i} (equation 3 picks {result.chosen}): smartSSDs run {ssd} on "
        f"{BATCH // result.devices} samples each; NPU runs {npu} on {BATCH}",
        "",
        f"{'phase':<13} {'step cycles':>11} {'eq. 3':>9}  eq. 3 term",
    ]
    for phase in PHASES:
        eq3 = result.equation3.get(_EQ3.get(phase, ""), None)
        lines.append(f"{phase:<13} {result.phases[phase]:>11.0f} {'' if eq3 is None else f'{eq3:.0f}':>9}  "
                     f"{_EQ3_NOTE[phase]}")
    lines.append(f"{'total':<13} {result.phases['total']:>11.0f} {result.equation3['total']:>9.0f}  "
                 "latency[i], equation 3")
    lines += ["", "latency by index (cycles): " + "; ".join(
        f"i={k}: step {s:.0f}, eq. 3 {e:.0f}" for k, (s, e) in
        enumerate(zip(result.step_latency, result.equation3_latency, strict=True))),
        f"best i: equation 3 {result.chosen}, the step's cycle model "
        f"{int(np.argmin(result.step_latency))}", ""]
    if result.rtl:
        lines.append(f"{'RTL GEMM (tiled_gemm)':<50} {'M x K x N':>9} {'compute':>8} {'model':>6} "
                     f"{'all':>6}  == golden")
        for gemm in result.rtl:
            where = f"smartSSD {gemm.device}" if gemm.side == "ssd" else "NPU"
            label = f"{_KIND[gemm.kind]} {gemm.layer} ({where}, {_phase_of(gemm)})"
            lines.append(f"{label:<50} {'x'.join(map(str, gemm.shape)):>9} {gemm.compute_cycles:>8} "
                         f"{gemm.model_cycles:>6} {gemm.cycles:>6}  {'yes' if gemm.bit_exact else 'NO'}")
        builds = "; ".join(f"{_array_name(side)} array {seconds:.0f} s"
                           for side, seconds in result.rtl_seconds.items())
        lines += ["(compute: the block's cycle counter; model: gemm_cycles; all: command to idle, fill "
                  f"included); simulation wall time, build included if not cached: {builds}", ""]
    else:
        lines += ["backend golden: no GEMM on RTL", ""]
    lines.append("against the unpartitioned step: " + ", ".join(
        f"{name} {'identical' if ok else 'DIFFERENT'}" for name, ok in result.bit_exact_golden.items()))
    if result.bounds:
        lines.append("smartSSD layers (dW reduced over the devices in binary32, device order), max |error| / "
                     "bound against float64: " + ", ".join(f"{k} {v:.3f}" for k, v in result.bounds.items()))
        lines.append(f"every device's updated weights identical: {'yes' if result.devices_agree else 'NO'}")
    lines.append(f"loss {result.loss:.6f} before the step, {result.loss_after:.6f} after")
    lines.append(f"result: {'PASS' if result.ok else 'FAIL'} (wall time {result.seconds:.0f} s)")
    return "\n".join(lines)


COMMAND = ".venv/bin/python -m scripts.demo.dpt"


def write_docs():
    """Run the demo (RTL) at 2 and 4 smartSSDs and write its tables into docs/systolic.md."""
    from scripts.flow.docs import write_table

    results = {devices: run_demo(devices=devices) for devices in DEVICE_CHOICES}
    failed = [devices for devices, result in results.items() if not result.ok]
    if failed:
        raise SystemExit(f"demo dpt failed at {failed} smartSSDs; tables not written")
    headers = ["phase"] + [f"{devices} smartSSDs, i = {result.partition}: {what}"
                           for devices, result in results.items() for what in ("step", "eq. 3")]
    rows = []
    for phase in (*PHASES, "total"):
        row = [phase]
        for result in results.values():
            eq3 = result.equation3.get("total" if phase == "total" else _EQ3.get(phase, ""))
            row += [f"{result.phases[phase]:.0f}", "" if eq3 is None else f"{eq3:.0f}"]
        rows.append(row)
    write_table("systolic.md", "dpt-demo-phases", headers, rows, COMMAND, disable_numparse=True,
                colalign=("left",) + ("right",) * (len(headers) - 1))
    rtl_rows = [[devices, _KIND[gemm.kind], gemm.layer, _array_name(gemm.side),
                 "x".join(map(str, gemm.shape)), gemm.compute_cycles, gemm.model_cycles, gemm.cycles,
                 "yes" if gemm.bit_exact else "NO"]
                for devices, result in results.items() for gemm in result.rtl]
    write_table("systolic.md", "dpt-demo-rtl", ["smartSSDs", "GEMM", "layer", "array", "M x K x N",
                                                "RTL compute cycles", "model cycles", "cycles with fill",
                                                "bit-exact"], rtl_rows, COMMAND, disable_numparse=True)


if __name__ == "__main__":
    write_docs()
