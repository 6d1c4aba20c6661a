"""A trace-based model of DPT's equation 3 (Section 3.4, "DPT-sim"), beside the analytic sweep.

DPT-sim records every access of the system as a trace entry (tensor, index, storage or memory read /
write time, NPU start / end). This model does the same at the granularity the paper names:

* **SSD side in 4 KB blocks** (Section 3.4: "the unit size of data read from SSDs is assumed to be
  4KB"): every tensor that leaves or enters a smartSSD (training samples from its NAND, activations
  and gradients over PCIe, weight gradients between smartSSDs) is rounded up to whole 4 KB blocks,
  and each tensor moves as its own run of blocks (:meth:`TraceSystem.block_cycles`).
* **DRAM at the bus width** (Section 3.4: "we consider the unit of data bus width"): every tensor a
  layer reads or writes (input feature map, weights, output; in the backward pass the gradients) is
  rounded up to whole bus beats (:meth:`TraceSystem.dram_cycles`). A layer pass costs
  ``max(GEMM cycles, DRAM cycles)`` (its buffers are double-buffered: an assumption, the one under
  which the NPU-only baseline stays on DPT's Table 3).
* **The forward pass is a real pipeline**, simulated sample by sample (:func:`forward_trace`): each
  smartSSD reads its samples from NAND, runs layers ``0 .. i-1`` on them, and sends the activations
  live across the cut over its link; the NPU runs layers ``i .. N-1`` on the samples in arrival
  order. Its fill and drain (the first sample's NAND read and smartSSD layers, the last link
  transfer) are in the latency, where equation 3's ``B max(FP_SSD, FP_NPU)`` has none.
* The backward pass and weight update keep equation 3's structure: ``B (BP_NPU + BP_SSD / n)``
  one after the other, with every gradient sent back to its smartSSD as 4 KB blocks
  (``T_PCIe``), the weight gradient on batch-reduced feature maps (Section 4.1: "feature maps are
  reduced in advance for computing delta W") on each device, and ``T_interSSD``: gather the n
  partial weight gradients of layers ``0 .. i-1`` into one smartSSD block by block, reduce them in its
  DRAM at the bus width, broadcast the sum back.

The clock, bandwidths and cycle-level systolic model (:func:`golden.systolic.cycles.gemm_cycles`
through the schedule) are the analytic sweep's (:class:`golden.systolic.partition.SystemModel`), so
the two models differ only in what is traced; :class:`TraceSystem` adds the block and bus sizes and
says where each comes from. No constant is fitted to Table 4.
"""

from dataclasses import dataclass

import numpy as np

from .partition import PartitionResult, SystemModel

__all__ = ["TraceSystem", "forward_trace", "layer_passes", "trace_sweep"]


def _ceil_div(a, b):
    return -(-a // b)


def _crossing(network, cut):
    """Names of the tensors produced before layer ``cut`` and read at or after it (none at 0)."""
    if cut == 0:
        return []
    produced = {network.input_tensor} | {entry.writes for entry in network.layers[:cut]}
    return sorted(produced & {name for entry in network.layers[cut:] for name in entry.reads})


@dataclass(frozen=True)
class TraceSystem(SystemModel):
    """The analytic model's node with the granularity DPT-sim adds.

    Inherited from :class:`golden.systolic.partition.SystemModel`: the clock, 2-byte operands, DRAM
    and PCIe bandwidths, the weight update on batch-reduced feature maps and the array schedule.

    Attributes
    ----------
    block_bytes : int
        4096: the SSD's logical block (Section 3.4).
    npu_bus_bytes : int
        32: the U250's four 64-bit DDR4 channels side by side (Alveo data sheet, DPT ref. [10]); at the
        inherited 76.8 GB/s that is 2.4 G beats/s, DDR4-2400.
    ssd_bus_bytes : int
        8: one 64-bit DDR4 channel on the smartSSD, carrying the inherited 19.2 GB/s, the paper's
        "4x lower" (Section 3.1; the channel count is our assumption).
    nand_bytes_per_s : float
        4e9: a smartSSD's NAND delivers blocks to its FPGA at its internal PCIe Gen3 x4 rate
        (SmartSSD, DPT ref. [5]; assumption: the NAND array is not slower than that link).
    """

    block_bytes: int = 4096
    npu_bus_bytes: int = 32
    ssd_bus_bytes: int = 8
    nand_bytes_per_s: float = 4e9

    def dram(self, device):
        """``(bus bytes, bytes per second)`` of the ``"npu"``'s or an ``"ssd"``'s DRAM."""
        if device == "npu":
            return self.npu_bus_bytes, self.npu_dram_bytes_per_s
        return self.ssd_bus_bytes, self.ssd_dram_bytes_per_s

    def dram_cycles(self, tensor_bytes, device):
        """Clock cycles to move tensors through a device's DRAM, each rounded up to whole bus beats.

        Parameters
        ----------
        tensor_bytes : iterable of int
            One entry per tensor access.
        device : str
            ``"npu"`` or ``"ssd"``.

        Returns
        -------
        float
        """
        bus_bytes, bytes_per_s = self.dram(device)
        beats = sum(_ceil_div(int(size), bus_bytes) for size in tensor_bytes)
        return beats * bus_bytes / self.bytes_per_cycle(bytes_per_s)

    def block_cycles(self, tensor_bytes, bytes_per_s):
        """Clock cycles to move tensors as whole 4 KB blocks over a path of ``bytes_per_s``.

        Parameters
        ----------
        tensor_bytes : iterable of int
            One entry per tensor; each is rounded up to whole blocks on its own.
        bytes_per_s : float

        Returns
        -------
        float
        """
        blocks = sum(_ceil_div(int(size), self.block_bytes) for size in tensor_bytes)
        return blocks * self.block_bytes / self.bytes_per_cycle(bytes_per_s)


def layer_passes(network, array, device, system, *, samples=1):
    """Per-layer cycles of one sample's forward and backward-data pass and the reduced weight update.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    array : tuple of int
        (rows, cols) of the device's array.
    device : str
        ``"npu"`` or ``"ssd"``: whose DRAM.
    system : TraceSystem
    samples : int
        Samples the device computes weight gradients over (1 with ``reduce_before_weight_update``).

    Returns
    -------
    dict of str to numpy.ndarray
        ``"fp"``, ``"bp"``, ``"wu"``: cycles per layer, each ``max(GEMM, DRAM)``; ``"dram_bound"``:
        the number of passes DRAM limits.
    """
    rows, cols = array
    size = system.bytes_per_element
    wu_samples = 1 if system.reduce_before_weight_update else samples
    costs = {"fp": [], "bp": [], "wu": []}
    bound = 0
    for index, entry in enumerate(network.layers):
        layer = entry.layer
        x = layer.in_channels * layer.height * layer.width * size
        y = layer.out_channels * layer.out_height * layer.out_width * size
        w = layer.weights * size
        passes = {"fp": (layer.forward_gemm(1), (x, w, y)),       # read input and weights, write output
                  "bp": (layer.backward_data_gemm(1), (y, w, x)),  # read G_O and weights, write G_I
                  "wu": (layer.weight_grad_gemm(wu_samples),       # read input and G_O, write delta W
                         (x * wu_samples, y * wu_samples, w))}
        for name, (shape, tensors) in passes.items():
            if name == "bp" and index == 0:  # no gradient for the input image
                costs[name].append(0.0)
                continue
            compute = system.schedule.cycles(shape, rows, cols)
            memory = system.dram_cycles(tensors, device)
            bound += memory > compute
            costs[name].append(float(max(compute, memory)))
    result = {name: np.array(values) for name, values in costs.items()}
    result["dram_bound"] = bound
    return result


def forward_trace(*, batch, ssds, ssd_cycles, read_cycles, link_cycles, npu_cycles):
    """Simulate the pipelined forward pass sample by sample; return when the NPU finishes the last.

    Sample ``j`` belongs to smartSSD ``j mod ssds``. Each smartSSD reads its samples from NAND back
    to back (prefetching), computes a sample once it is read and the previous one is done, and sends
    it over its own link once computed and the link is free; the NPU takes samples in order. With
    ``ssds = 0`` (partition index 0) the NPU runs every sample from prefetched DRAM.

    Parameters
    ----------
    batch, ssds : int
    ssd_cycles, read_cycles, link_cycles, npu_cycles : float
        Per sample: smartSSD layers, NAND read, link transfer, NPU layers.

    Returns
    -------
    float
    """
    if ssds == 0:
        return batch * npu_cycles
    nand = [0.0] * ssds
    ssd = [0.0] * ssds
    link = [0.0] * ssds
    npu = 0.0
    for sample in range(batch):
        device = sample % ssds
        nand[device] += read_cycles
        ssd[device] = max(ssd[device], nand[device]) + ssd_cycles
        link[device] = max(link[device], ssd[device]) + link_cycles
        npu = max(npu, link[device]) + npu_cycles
    return npu


def trace_sweep(network, *, ssd_array, npu_array, ssds, batch, system=None):
    """Trace one mini-batch at every partition index (see the module docstring).

    Parameters
    ----------
    network, ssd_array, npu_array, ssds, batch
        As for :func:`golden.systolic.partition.partition_sweep`.
    system : TraceSystem, optional

    Returns
    -------
    golden.systolic.partition.PartitionResult
        Its ``terms``: ``forward`` (the simulated pipeline, activations' link transfers included),
        ``pcie_gradients``, ``backward``, ``wu_npu``, ``wu_ssd`` and ``inter_ssd``.
    """
    system = system or TraceSystem()
    if not isinstance(ssds, int) or ssds < 1 or not isinstance(batch, int) or batch % ssds:
        raise ValueError(f"ssds must be an integer >= 1 dividing batch = {batch}, not {ssds!r}")
    npu = layer_passes(network, npu_array, "npu", system, samples=batch)
    ssd = layer_passes(network, ssd_array, "ssd", system, samples=batch // ssds)
    layers = len(network.layers)
    size = system.bytes_per_element
    link_rate = min(system.pcie_link_bytes_per_s, system.pcie_storage_bytes_per_s / ssds)
    image = [network.tensor_elements[network.input_tensor] * size]
    read = system.block_cycles(image, min(system.nand_bytes_per_s, link_rate))
    weights = [entry.layer.weights * size for entry in network.layers]
    terms = {name: np.zeros(layers) for name in
             ("forward", "pcie_gradients", "backward", "wu_npu", "wu_ssd", "inter_ssd")}
    for cut in range(layers):
        crossing = [network.tensor_elements[name] * size for name in _crossing(network, cut)]
        link = system.block_cycles(crossing, link_rate)
        terms["forward"][cut] = forward_trace(
            batch=batch, ssds=ssds if cut else 0, ssd_cycles=ssd["fp"][:cut].sum(), read_cycles=read,
            link_cycles=link, npu_cycles=npu["fp"][cut:].sum())
        terms["pcie_gradients"][cut] = batch // ssds * link  # the links work in parallel
        terms["backward"][cut] = batch * (npu["bp"][cut:].sum() + ssd["bp"][:cut].sum() / ssds)
        terms["wu_npu"][cut] = npu["wu"][cut:].sum()
        terms["wu_ssd"][cut] = ssd["wu"][:cut].sum()
        if ssds > 1 and cut:
            moved = system.block_cycles(weights[:cut], system.pcie_link_bytes_per_s)
            reduce = system.dram_cycles(weights[:cut] * (ssds + 1), "ssd")
            terms["inter_ssd"][cut] = 2 * (ssds - 1) * moved + reduce
    latency = sum(terms.values())
    best = int(np.argmin(latency))
    return PartitionResult(latency, terms, best, float(1 - latency[best] / latency[0]))
