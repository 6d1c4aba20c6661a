"""Cycles of :mod:`.dpt_step`'s partitioned training step, phase by phase, beside equation 3's terms.

The demo system (:func:`demo_system`): each smartSSD has a 2 x 2 f16 output-stationary array (the
``tiled_gemm`` default: one accumulator slot, so a k step every ``acc_latency`` cycles), the NPU a
4 x 4 one with the same PEs (4x the PEs, as DPT's 32 x 16 against 48 x 48 is 4.5x), and
:class:`~.partition.SystemModel`'s clock, DRAM and PCIe figures. PE latencies come from
:data:`.latencies.PE_LATENCY` (output stationary: ``mac_latency = multiply + add + 2``,
``acc_latency = add``).

:func:`step_phases` charges each GEMM of the step, on the whole batch its device holds, what
:func:`~.partition.layer_cycles` charges a per-sample GEMM: ``max(gemm_cycles, compulsory DRAM
bytes / DRAM bytes per cycle)``, 2-byte elements. The phases run one after another:

============  ==========================================================================================
phase         cycles
============  ==========================================================================================
ssd_forward   forward GEMMs of layers ``0 .. i-1`` on one device's ``B/n`` samples (the n run at once)
transfer      the cut's f16 activations to the NPU and their f16 gradients back, over PCIe: equation
              3's ``T_PCIe`` term, ``2 B live(i) 2 bytes / min(n link, storage)`` bytes per cycle
npu_forward   forward GEMMs of layers ``i ..`` on the whole batch
npu_backward  weight-gradient GEMMs of layers ``i ..`` and data-gradient GEMMs of layers ``max(i, 1) ..``
ssd_backward  the same for layers ``0 .. i-1`` on ``B/n`` samples
all_reduce    gather the smartSSD layers' binary32 partials into device 0 over its link, reduce in its
              DRAM (n reads, one write), broadcast: equation 3's ``T_interSSD`` with 4-byte elements
update        SGD on binary32 weights (read W and dW, write W: 12 bytes per weight) in the smartSSDs'
              and the NPU's DRAM at once; equation 3 has no such term
============  ==========================================================================================

Equation 3 (:func:`equation3_phases`) differs by construction: it pipelines the forward pass per
sample (``B max(FP_SSD / n, FP_NPU)``), so its per-sample GEMMs pay each GEMM's skew and drain B
times where the step pays them once per layer; its weight gradients are per-sample GEMMs
(:class:`~.partition.SystemModel` ``reduce_before_weight_update``); its ``T_interSSD`` moves
2-byte elements.
"""

from .latencies import PE_LATENCY
from .partition import ArraySchedule, SystemModel, layer_cycles, partition_sweep

__all__ = ["BATCH", "NPU_ARRAY", "PHASES", "SSD_ARRAY", "demo_schedule", "demo_system", "equation3_phases",
           "gemm_shape", "step_phases"]

SSD_ARRAY = (2, 2)
NPU_ARRAY = (4, 4)
BATCH = 8
PHASES = ("ssd_forward", "transfer", "npu_forward", "npu_backward", "ssd_backward", "all_reduce", "update")
_GRAD_BYTES = 4  # binary32 weight gradients and master weights


def demo_schedule(element="f16", slots=1):
    """The :class:`~.partition.ArraySchedule` of an output-stationary ``tiled_gemm`` of ``element``."""
    multiply, add = PE_LATENCY[element]
    return ArraySchedule(tile=slots, mac_latency=multiply + add + 2, acc_latency=add)


def demo_system():
    """:class:`~.partition.SystemModel` with the demo arrays' schedule (the rest its defaults)."""
    return SystemModel(schedule=demo_schedule())


def gemm_shape(network, call, batch):
    """``(M, K, N)`` of the GEMM ``call`` (:class:`~.cnn.GemmCall`) over ``batch`` samples."""
    layer = network.layers[call.layer].layer
    return {"forward": layer.forward_gemm, "backward_data": layer.backward_data_gemm,
            "weight_grad": layer.weight_grad_gemm}[call.kind](batch)


def _cost(shape, array, dram_bytes_per_s, system):
    m, k, n = shape
    compute = system.schedule.cycles(shape, *array)
    traffic = system.bytes_per_element * (m * k + k * n + m * n)
    return max(compute, traffic / system.bytes_per_cycle(dram_bytes_per_s))


def _pcie_bytes_per_cycle(devices, system):
    links = min(devices * system.pcie_link_bytes_per_s, system.pcie_storage_bytes_per_s)
    return system.bytes_per_cycle(links)


def step_phases(network, *, partition, devices, batch=BATCH, ssd_array=SSD_ARRAY, npu_array=NPU_ARRAY,
                system=None):
    """Cycles of each phase of the partitioned step (see the module docstring).

    Returns
    -------
    dict of str to float
        One entry per name of :data:`PHASES`, and ``"total"``.
    """
    system = system or demo_system()
    layers = network.layers
    samples = batch // devices

    def side(indices, array, dram, count, kinds):
        return float(sum(_cost(getattr(layers[index].layer, f"{kind}_gemm")(count), array, dram, system)
                         for index in indices for kind in kinds if kind != "backward_data" or index > 0))

    ssd, npu = range(partition), range(partition, len(layers))
    ssd_dram, npu_dram = system.ssd_dram_bytes_per_s, system.npu_dram_bytes_per_s
    live = network.live_elements(partition) if partition else 0
    ssd_weights = sum(layers[index].layer.weights for index in ssd)
    npu_weights = sum(layers[index].layer.weights for index in npu)
    all_reduce = 0.0
    if devices > 1:
        all_reduce = ssd_weights * _GRAD_BYTES * (
            2 * (devices - 1) / system.bytes_per_cycle(system.pcie_link_bytes_per_s)
            + (devices + 1) / system.bytes_per_cycle(ssd_dram))
    phases = {
        "ssd_forward": side(ssd, ssd_array, ssd_dram, samples, ("forward",)),
        "transfer": 2 * batch * live * system.bytes_per_element / _pcie_bytes_per_cycle(devices, system),
        "npu_forward": side(npu, npu_array, npu_dram, batch, ("forward",)),
        "npu_backward": side(npu, npu_array, npu_dram, batch, ("weight_grad", "backward_data")),
        "ssd_backward": side(ssd, ssd_array, ssd_dram, samples, ("weight_grad", "backward_data")),
        "all_reduce": all_reduce,
        "update": max(3 * _GRAD_BYTES * ssd_weights / system.bytes_per_cycle(ssd_dram),
                      3 * _GRAD_BYTES * npu_weights / system.bytes_per_cycle(npu_dram)),
    }
    phases["total"] = float(sum(phases.values()))
    return phases


def equation3_phases(network, *, partition, devices, batch=BATCH, ssd_array=SSD_ARRAY, npu_array=NPU_ARRAY,
                     system=None):
    """Equation 3's terms at ``partition``, split as the step's phases where they can be.

    Returns
    -------
    dict
        ``"forward"`` (SSD and NPU forward, pipelined), ``"transfer"``, ``"npu_backward"``
        (``B BP_NPU + WU_NPU``), ``"ssd_backward"`` (``B BP_SSD / n + WU_SSD``), ``"all_reduce"``,
        ``"total"`` (``latency[i]``), and ``"latency"`` (every index) and ``"best_index"``.
    """
    system = system or demo_system()
    sweep = partition_sweep(network, ssd_array=ssd_array, npu_array=npu_array, ssds=devices, batch=batch,
                            system=system)
    npu = layer_cycles(network, npu_array, samples=batch, dram_bytes_per_s=system.npu_dram_bytes_per_s,
                       system=system)
    ssd = layer_cycles(network, ssd_array, samples=batch // devices,
                       dram_bytes_per_s=system.ssd_dram_bytes_per_s, system=system)
    i, terms = partition, sweep.terms
    phases = {
        "forward": float(terms["forward"][i]),
        "transfer": float(terms["pcie"][i]),
        "npu_backward": float(batch * npu["bp"][i:].sum() + terms["wu_npu"][i]),
        "ssd_backward": float(batch * ssd["bp"][:i].sum() / devices + terms["wu_ssd"][i]),
        "all_reduce": float(terms["inter_ssd"][i]),
        "total": float(sweep.latency[i]),
    }
    return phases | {"latency": sweep.latency, "best_index": sweep.best_index}
