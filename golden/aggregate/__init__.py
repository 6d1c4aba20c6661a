"""Reference models of the GNN aggregation pipeline (``rtl.aggregate``), see docs/aggregate.md.

Modules: :mod:`.graphs` (seeded power-law graphs with the benchmark datasets' statistics),
:mod:`.packets` (the task packet layout), :mod:`.spawner` (tiling and bank-aware packing),
:mod:`.pipeline` (what a packet stream does to OUT, bit for bit, and the cycle model),
:mod:`.model` (the entry point :func:`aggregate` and its float64 error bound), :mod:`.gcn`
(a two-layer GCN forward pass on the systolic GEMM and the pipeline).
"""

from .gcn import GcnResult, gcn_bound, gcn_forward, gcn_reference, gcn_weights, relu
from .graphs import (
                     BENCHMARK_GRAPHS,
                     GRAPHS,
                     GraphSpec,
                     degree_sequence,
                     gcn_normalise,
                     generate,
                     graph_statistics,
                     with_self_loops,
)
from .model import aggregate, aggregate_bound
from .packets import TASK_AGGREGATION, PacketFormat, Packets
from .pipeline import HAZARD_WINDOW, Counters, execute, issue_cycles, live_slots
from .spawner import Spawned, balance_rows, cycle_estimate, seed_rule, spawn

__all__ = [
    "BENCHMARK_GRAPHS", "GRAPHS", "GraphSpec", "generate", "degree_sequence", "with_self_loops",
    "gcn_normalise", "graph_statistics",
    "TASK_AGGREGATION", "PacketFormat", "Packets",
    "HAZARD_WINDOW", "Counters", "execute", "issue_cycles", "live_slots",
    "Spawned", "balance_rows", "spawn", "seed_rule", "cycle_estimate",
    "aggregate", "aggregate_bound",
    "relu", "GcnResult", "gcn_forward", "gcn_reference", "gcn_bound", "gcn_weights",
]
