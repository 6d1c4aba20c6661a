"""The system model's inputs: the machine (Smart-Infinity's Table II) and the training workload.

Every number here is a stated input, not a fitted one; ``docs/smartinfinity.md`` lists each with
its source. Bandwidths are bytes per second in one direction; PCIe links are full duplex, so
each direction is its own resource.
"""

from dataclasses import dataclass, replace

__all__ = ["pcie_bandwidth", "TLP_EFFICIENCY", "GPUS", "GPT2_MODELS", "Machine", "Workload",
           "CONFIGS", "DEFAULT_RATIO", "smartssd_machine"]

# PCIe transaction-layer efficiency: 256-byte max payload per TLP against 24 bytes of framing,
# sequence number, 3-DW header with ECRC off and LCRC (PCIe Base Specification's packet
# format); data-link packets (ACK, flow-control updates) are ignored.
TLP_EFFICIENCY = 256 / (256 + 24)

# GT/s per lane and line coding, from the PCIe Base Specification (Gen3: 8 GT/s, Gen4: 16 GT/s,
# both 128b/130b).
_GENERATIONS = {3: 8e9, 4: 16e9}


def pcie_bandwidth(generation, lanes):
    """Usable bytes/s of one direction of a PCIe link: raw rate × 128/130 × TLP efficiency."""
    return _GENERATIONS[generation] * lanes * (128 / 130) / 8 * TLP_EFFICIENCY


# name: (dense FP16 tensor FLOP/s with FP32 accumulation, memory bytes/s), NVIDIA data sheets.
GPUS = {
    "A5000": (111.1e12, 768e9),   # NVIDIA RTX A5000 data sheet: 222.2 TFLOPS with sparsity, half dense
    "A100": (312e12, 1555e9),     # NVIDIA A100 40GB PCIe data sheet
}

# GPT-2 model sizes the paper names: §VII-C (4.0B, 8.4B), §VIII-A (1.16B).
GPT2_MODELS = {"GPT-2 1.16B": 1.16e9, "GPT-2 4.0B": 4.0e9, "GPT-2 8.4B": 8.4e9}

CONFIGS = ("BASE", "SU", "SU+O", "SU+O+C")
DEFAULT_RATIO = 0.02  # §VII-A: 2 % (top 1 % of values, each with its index)


@dataclass(frozen=True)
class Machine:
    """The host, its links and the N (Smart)SSDs.

    Parameters
    ----------
    devices : int
        SmartSSDs (the baseline uses their SSDs as plain NVMe in RAID0).
    host_link : float
        Shared system interconnect to the PCIe expansion, bytes/s per direction.
    device_link : float
        Each PCIe Gen3 x4 link in a SmartSSD (external port, SSD port, FPGA port), bytes/s.
    ssd_read, ssd_write : float
        Sequential bandwidth of one SSD, bytes/s.
    gpu_link : float
        The GPU's own PCIe link to the host (outside the expansion), bytes/s.
    gpu_flops, gpu_memory : float
        Peak dense FP16 FLOP/s and memory bytes/s of the GPU.
    gpu_utilisation : float
        Fraction of peak FLOP/s the forward and backward passes reach.
    cpu_elements : float
        Adam updates per second of the host CPU (DeepSpeed CPU-Adam).
    fpga_elements : float
        Adam updates per second of one SmartSSD's FPGA updater.
    device_memory : float
        Bytes of FPGA DRAM per SmartSSD (sets the subgroup size).
    """

    devices: int
    host_link: float
    device_link: float
    ssd_read: float
    ssd_write: float
    gpu_link: float
    gpu_flops: float
    gpu_memory: float
    gpu_utilisation: float
    cpu_elements: float
    fpga_elements: float
    device_memory: float = 4 * 2**30

    def with_(self, **changes):
        return replace(self, **changes)


@dataclass(frozen=True)
class Workload:
    """One training step of a model with ``parameters`` weights.

    Parameters
    ----------
    parameters : float
    tokens : int
        Tokens per step (batch × sequence length).
    blocks : int
        The model cut into this many equal blocks for the forward and backward passes.
    compression : float
        SmartComp's ratio c: gradient bytes sent, over the dense FP32 gradient's (values and indices).
    baseline_subgroup : float
        Elements per DeepSpeed optimizer subgroup (``sub_group_size``) in the baseline.
    topk_passes : int
        Passes over the FP32 gradient in GPU memory that Top-K selection costs.
    """

    parameters: float
    tokens: int = 4 * 1024
    blocks: int = 16
    compression: float = DEFAULT_RATIO
    baseline_subgroup: float = 1e9
    topk_passes: int = 4

    def with_(self, **changes):
        return replace(self, **changes)


def smartssd_machine(devices, gpu="A5000", *, fpga_elements_per_cycle, fpga_clock=300e6,
                     ssd_read=3.5e9, ssd_write=3.2e9, gpu_utilisation=0.5, host_generation=3,
                     cpu_efficiency=0.5):
    """Smart-Infinity's Table II machine with ``devices`` SmartSSDs and one ``gpu``.

    The host link is PCIe Gen3 x16 (``host_generation`` changes it), each SmartSSD's links Gen3
    x4, the GPU's Gen4 x16. The CPU updates at the host memory's bandwidth (Table II: 32 DDR4-3200
    DIMMs on two sockets of 8 channels, 409.6 GB/s) × ``cpu_efficiency``, moving 30 bytes per
    element (reads p, m, v, g in FP32, writes p, m, v in FP32 and p in FP16).
    """
    flops, memory = GPUS[gpu]
    return Machine(
        devices=devices, host_link=pcie_bandwidth(host_generation, 16), device_link=pcie_bandwidth(3, 4),
        ssd_read=ssd_read, ssd_write=ssd_write, gpu_link=pcie_bandwidth(4, 16), gpu_flops=flops,
        gpu_memory=memory, gpu_utilisation=gpu_utilisation,
        cpu_elements=16 * 8 * 3200e6 * cpu_efficiency / 30,
        fpga_elements=fpga_elements_per_cycle * fpga_clock)
