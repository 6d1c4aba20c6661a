"""A discrete-event model of one storage-offloaded training step on N SmartSSDs (Smart-Infinity).

Modules: :mod:`.events` (a fluid discrete-event simulator: tasks share resources max-min fairly),
:mod:`.inputs` (the machine and workload, each number with its source), :mod:`.step` (the task
graphs of BASE, SU, SU+O and SU+O+C), :mod:`.model` (a steady step's time, breakdown and traffic).
"""

from .events import Schedule, Task, simulate
from .inputs import (
    CONFIGS,
    DEFAULT_RATIO,
    GPT2_MODELS,
    GPUS,
    TLP_EFFICIENCY,
    Machine,
    Workload,
    pcie_bandwidth,
    smartssd_machine,
)
from .model import StepResult, single_step_end, speedups, step_time, traffic
from .step import build_steps, owner_overlaps

__all__ = ["Task", "Schedule", "simulate", "CONFIGS", "DEFAULT_RATIO", "GPT2_MODELS", "GPUS",
           "TLP_EFFICIENCY", "Machine", "Workload", "pcie_bandwidth", "smartssd_machine", "StepResult",
           "single_step_end", "speedups", "step_time",
           "traffic", "build_steps", "owner_overlaps"]
