"""DPT's partition-index selection (Section 3.3, equation 3) on the NearTrain cycle model.

For a partition index ``i`` the smartSSDs run layers ``0 .. i-1`` on their slices of the mini-batch
and the NPU runs layers ``i .. N-1`` on the whole batch::

    latency(i) = B max(FP_SSD[0:i] / n, FP_NPU[i:N])          forward, pipelined per sample
               + T_PCIe(i)                                    activations in, gradients out
               + B (BP_NPU[i:N] + BP_SSD[0:i] / n)             backward data, one after the other
               + WU_NPU[i:N](B) + WU_SSD[0:i](B / n) + T_interSSD[0:i]

``FP`` and ``BP`` are per-sample latencies; the n smartSSDs work on disjoint samples in parallel, so
their per-sample throughput is ``FP_SSD / n`` (our reading of the equation's ``FP_SSD``). ``WU`` is
the weight-gradient GEMM over the samples a device holds. ``i = 0`` is the NPU-only baseline (the
next mini-batch is prefetched, so it moves no activations). Every latency is in cycles of one clock
shared by all arrays.

Assumptions (DPT's Fig. 1 bandwidths are not in its text; these are ours):

* per layer and pass, ``cycles = max(gemm_cycles(...), bytes / DRAM bytes per cycle)`` with the
  GEMM's compulsory traffic ``bytes_per_element (M K + K N + M N)``;
* NPU DRAM 76.8 GB/s (Alveo U250, four DDR4-2400 channels); smartSSD DRAM 4x lower, 19.2 GB/s (the
  paper's ratio); 200 MHz everywhere; 2-byte elements (DPT-sim's operands);
* each smartSSD has a 4 GB/s PCIe link and all storage links share at most 16 GB/s (the paper);
  ``T_PCIe`` moves every activation live across the cut to the NPU and its gradient back;
* ``T_interSSD``: gather the n partial weight gradients of layers ``0 .. i-1`` into one smartSSD over
  its link, reduce them in its DRAM (n reads, 1 write), broadcast the sum back over its link;
* the first layer computes no input gradient; the classifier and loss on the CPU cost nothing.
"""

from dataclasses import dataclass, field

import numpy as np

from .cycles import gemm_cycle_terms

__all__ = ["ArraySchedule", "PartitionResult", "SystemModel", "TEST_CASES", "baseline_cycles",
           "layer_cycles", "partition_sweep"]

# DPT Section 3.2 test cases: (smartSSD array, NPU array) as (rows, cols).
TEST_CASES = {
    1: ((32, 16), (48, 48)),     # FP16 on KU15P and U250
    2: ((64, 32), (96, 96)),     # block FP16: 4x the PEs
    3: ((64, 32), (128, 128)),   # ASIC-like bfloat16 NPU
}


@dataclass(frozen=True)
class ArraySchedule:
    """The :func:`golden.systolic.cycles.gemm_cycles` options every array in the sweep uses.

    Attributes
    ----------
    dataflow : str
    tile, mac_latency, acc_latency : int
    overlap : bool
        ``overlap_drain`` (output stationary) or ``overlap_load`` (weight stationary).
    """

    dataflow: str = "output_stationary"
    tile: int = 1
    mac_latency: int = 1
    acc_latency: int = 1
    overlap: bool = True

    def terms(self, shape, rows, cols):
        """:class:`golden.systolic.cycles.CycleTerms` of one GEMM ``shape`` (m, k, n) on ``rows x cols``."""
        flag = "overlap_drain" if self.dataflow == "output_stationary" else "overlap_load"
        return gemm_cycle_terms(*shape, rows=rows, cols=cols, dataflow=self.dataflow, tile=self.tile,
                                mac_latency=self.mac_latency, acc_latency=self.acc_latency,
                                **{flag: self.overlap})

    def cycles(self, shape, rows, cols):
        """Total cycles of one GEMM ``shape`` (m, k, n) on a ``rows x cols`` array."""
        return self.terms(shape, rows, cols).total


@dataclass(frozen=True)
class SystemModel:
    """Clock, bandwidths and array schedule of the DPT node (see the module docstring)."""

    clock_hz: float = 200e6
    bytes_per_element: int = 2
    npu_dram_bytes_per_s: float = 76.8e9
    ssd_dram_bytes_per_s: float = 19.2e9
    pcie_link_bytes_per_s: float = 4e9
    pcie_storage_bytes_per_s: float = 16e9
    reduce_before_weight_update: bool = True
    schedule: ArraySchedule = field(default_factory=ArraySchedule)

    def bytes_per_cycle(self, bytes_per_s):
        """Convert a bandwidth to bytes per clock cycle."""
        return bytes_per_s / self.clock_hz


def layer_cycles(network, array, *, samples, dram_bytes_per_s, system):
    """Per-layer forward and backward-data cycles per sample, and weight-gradient cycles for ``samples``.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    array : tuple of int
        (rows, cols).
    samples : int
        Samples the device computes weight gradients over.
    dram_bytes_per_s : float
        The device's DRAM bandwidth.
    system : SystemModel

    Returns
    -------
    dict of str to numpy.ndarray of float64
        ``"fp"``, ``"bp"``, ``"wu"``: one entry per layer; ``"memory_bound"``: passes limited by DRAM.
    """
    if not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be an integer >= 1, not {samples!r}")
    rows, cols = array
    per_cycle = system.bytes_per_cycle(dram_bytes_per_s)
    memory_bound = 0

    def cost(shape):
        nonlocal memory_bound
        m, k, n = shape
        compute = system.schedule.cycles(shape, rows, cols)
        memory = system.bytes_per_element * (m * k + k * n + m * n) / per_cycle
        memory_bound += memory > compute
        return max(compute, memory)

    costs = {"fp": [], "bp": [], "wu": []}
    wu_samples = 1 if system.reduce_before_weight_update else samples
    for index, entry in enumerate(network.layers):
        costs["fp"].append(cost(entry.layer.forward_gemm(1)))
        costs["bp"].append(0.0 if index == 0 else cost(entry.layer.backward_data_gemm(1)))
        costs["wu"].append(cost(entry.layer.weight_grad_gemm(wu_samples)))
    result = {name: np.array(values, dtype=np.float64) for name, values in costs.items()}
    result["memory_bound"] = memory_bound
    return result


def baseline_cycles(network, *, npu_array, batch, system=None):
    """NPU-only training latency of one mini-batch: ``B (FP + BP) + WU(B)`` over every layer.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    npu_array : tuple of int
    batch : int
    system : SystemModel, optional

    Returns
    -------
    float
    """
    system = system or SystemModel()
    npu = layer_cycles(network, npu_array, samples=batch, dram_bytes_per_s=system.npu_dram_bytes_per_s,
                       system=system)
    return float(batch * (npu["fp"].sum() + npu["bp"].sum()) + npu["wu"].sum())


@dataclass(frozen=True)
class PartitionResult:
    """Equation 3 evaluated at every partition index.

    Attributes
    ----------
    latency : numpy.ndarray
        Cycles per mini-batch for i = 0 .. N-1 (i = 0: the NPU-only baseline).
    terms : dict of str to numpy.ndarray
        Each summand of equation 3 per index.
    best_index : int
    improvement : float
        ``1 - latency[best] / latency[0]``.
    """

    latency: np.ndarray
    terms: dict
    best_index: int
    improvement: float


def partition_sweep(network, *, ssd_array, npu_array, ssds, batch, system=None):
    """Sweep equation 3 over every partition index (see the module docstring).

    Parameters
    ----------
    network : golden.systolic.networks.Network
    ssd_array, npu_array : tuple of int
        (rows, cols) of each smartSSD's array and of the NPU's.
    ssds : int
        Number of smartSSDs, dividing ``batch``.
    batch : int
    system : SystemModel, optional

    Returns
    -------
    PartitionResult
    """
    system = system or SystemModel()
    if not isinstance(ssds, int) or ssds < 1 or not isinstance(batch, int) or batch % ssds:
        raise ValueError(f"ssds must be an integer >= 1 dividing batch = {batch}, not {ssds!r}")
    npu = layer_cycles(network, npu_array, samples=batch, dram_bytes_per_s=system.npu_dram_bytes_per_s,
                       system=system)
    ssd = layer_cycles(network, ssd_array, samples=batch // ssds,
                       dram_bytes_per_s=system.ssd_dram_bytes_per_s, system=system)
    layers = len(network.layers)

    def before(values):  # before(v)[i] = sum of v[0 .. i-1], for i = 0 .. N-1
        return np.concatenate(([0.0], np.cumsum(values)[:-1]))

    def after(values):  # after(v)[i] = sum of v[i .. N-1]
        return np.cumsum(values[::-1])[::-1]

    live = np.array([0] + [network.live_elements(i) for i in range(1, layers)], dtype=np.float64)
    pcie_per_cycle = system.bytes_per_cycle(min(ssds * system.pcie_link_bytes_per_s,
                                                system.pcie_storage_bytes_per_s))
    weights = np.array([entry.layer.weights for entry in network.layers], np.float64)
    weight_bytes = before(weights) * system.bytes_per_element
    if ssds > 1:
        inter_ssd = weight_bytes * (2 * (ssds - 1) / system.bytes_per_cycle(system.pcie_link_bytes_per_s)
                                    + (ssds + 1) / system.bytes_per_cycle(system.ssd_dram_bytes_per_s))
    else:
        inter_ssd = np.zeros(layers)
    terms = {
        "forward": batch * np.maximum(before(ssd["fp"]) / ssds, after(npu["fp"])),
        "pcie": 2 * batch * live * system.bytes_per_element / pcie_per_cycle,
        "backward": batch * (after(npu["bp"]) + before(ssd["bp"]) / ssds),
        "wu_npu": after(npu["wu"]),
        "wu_ssd": before(ssd["wu"]),
        "inter_ssd": inter_ssd,
    }
    latency = sum(terms.values())
    best = int(np.argmin(latency))
    return PartitionResult(latency, terms, best, float(1 - latency[best] / latency[0]))
