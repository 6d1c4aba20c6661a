"""Cycle-level model of the simulated cluster's on-chip time, for node counts and graphs past the simulator.

What it models is what ``runtime_cluster``'s on-chip counters measure (``docs/runtime.md`` §2):
from the one broadcast start to each node's last busy cycle, i.e. to the cycle its kernel takes
its last task (the aggregation pipeline counts a task done when it takes it). With B replicated
and every task spawned at its home (``placement="home"``), no packet crosses the network and
every node runs alone, so the model is per node, built from the RTL's structure:

* **Arrival.** The spawner hands over one task per cycle, and the task responder, the splitter,
  the RDMA detector (every range present) and the pending queue each pass one per cycle, so
  tasks reach the kernel back to back, the first :data:`START_LATENCY` cycles after the start.
* **The kernel's pipeline** (``rtl.aggregate.aggregation_pipeline``): a task taken by the kernel
  enters stage D, then S1 (B read), the 7 stages of the float32 multiplier, and H, where it
  waits while one of its rows is still in the adder loop: a row issues at H at least
  ``window`` (:data:`golden.aggregate.pipeline.HAZARD_WINDOW`, 9) cycles after its previous
  issue (:func:`golden.aggregate.pipeline.issue_cycles`). A stall at H holds every stage
  before it (the multiplier's enable is ``~o.valid | o.ready``), so the kernel takes a new task
  only when H issues, :data:`PIPELINE_PACKETS` tasks later in the stream. Hazard stalls of
  the last tasks of a node's stream are thus outside its count; those before are inside.

For task ``k`` of a node (its rows ``R_k``), with ``D_k`` the cycle the kernel takes it and
``H_k`` the cycle it issues at H::

    D_k = max(D_{k-1} + 1, H_{k-P})                         (P = PIPELINE_PACKETS)
    H_k = max(D_k + P, H_{k-1} + 1, max over r in R_k of H_last(r) + window)

with ``D_0 = 0``; the node's count is ``D_last + START_LATENCY`` and the cluster's the largest.

One constant is calibrated: :data:`START_LATENCY`, against the 1-node cluster on the Cora-like
graph (3,413 cycles for 3,408 tasks). ``P`` and ``window`` are the RTL's stage counts.

Not modelled: B at its owners (RDMA fetches during the kernel) and tasks spawned away from their
home (they cross the switch); :func:`predict_workload` refuses both.

:func:`predict` cuts a graph for any power-of-two node count (also past the 16 a packet's
``dst`` can name) with the balanced packing of :mod:`golden.runtime.packing`, exactly as
:func:`golden.runtime.workload.build_job` does for the cluster.
"""

from dataclasses import dataclass

import numpy as np

from golden.aggregate.pipeline import HAZARD_WINDOW

from .packet import decode
from .packing import balanced_layout, pack
from .workload import BALANCED_BLOCK, graph_matrix

__all__ = ["Prediction", "START_LATENCY", "PIPELINE_PACKETS", "node_cycles", "predict_packets",
           "predict_workload", "predict", "graph_matrix"]

# Cycles from the broadcast start to the counter value of a node whose only task is taken at
# once; calibrated on the 1-node Cora-like cluster (the one fitted constant of the model).
START_LATENCY = 6
# Tasks held between the kernel's input and its hazard check: D, S1, the multiplier's 7 stages, H.
PIPELINE_PACKETS = 10


@dataclass
class Prediction:
    """The model's on-chip cycles for one job.

    Attributes
    ----------
    node_cycles : list of int
        Per node, from the start to its last busy cycle (0 for a node without tasks).
    tasks : list of int
        Per node, the tasks its kernel takes.
    items : list of int
        Per node, the occupied slots of those tasks.
    """

    node_cycles: list
    tasks: list
    items: list

    @property
    def nodes(self):
        return len(self.node_cycles)

    @property
    def cycles(self):
        """All done: the largest of the nodes' counts."""
        return max(self.node_cycles)


def node_cycles(rows, *, window=HAZARD_WINDOW, depth=PIPELINE_PACKETS, latency=START_LATENCY):
    """One node's count for its task stream ``rows`` (per task, the rows of its occupied slots,
    in the order the kernel takes them); 0 for an empty stream (module docstring)."""
    taken, issued, last = [], [], {}
    for k, task in enumerate(rows):
        take = taken[-1] + 1 if k else 0
        if k >= depth:
            take = max(take, issued[k - depth])
        issue = take + depth
        if k:
            issue = max(issue, issued[-1] + 1)
        for row in task:
            if row in last:
                issue = max(issue, last[row] + window)
        for row in task:
            last[row] = issue
        taken.append(take)
        issued.append(issue)
    return taken[-1] + latency if taken else 0


def predict_packets(spawn, **options):
    """:class:`Prediction` for per-node task lists ``spawn`` (``(range, slots)`` as
    :func:`golden.runtime.packing.pack` gives them), each node's tasks executed where spawned."""
    streams = [[[slot.row for slot in slots if slot is not None] for _, slots in packets]
               for packets in spawn]
    return Prediction([node_cycles(stream, **options) for stream in streams],
                      [len(stream) for stream in streams], [sum(map(len, stream)) for stream in streams])


def predict_workload(workload, **options):
    """:class:`Prediction` for a :class:`golden.runtime.workload.Workload` (the job the cluster
    runs): B must be replicated and every task wholly at its spawner's home, else ValueError."""
    config = workload.config
    if not config.replicated and config.nodes > 1:
        raise ValueError("the model covers B replicated only (RDMA fetches are not modelled)")
    spawn = []
    for node, entries in enumerate(workload.spawn):
        packets = [decode(entry) for entry in entries]
        rows = [slot.row for packet in packets for slot in packet.slots if slot is not None]
        if any(config.home(row) != node for row in rows):
            raise ValueError(f"node {node} spawns a task for another node: the model covers placement "
                             "'home' only")
        spawn.append([(packet.range, packet.slots) for packet in packets])
    return predict_packets(spawn, **options)


def predict(matrix, nodes, *, block=BALANCED_BLOCK, **options):
    """:class:`Prediction` for ``Â`` (``matrix``, square sparse) on ``nodes`` nodes (a power of two,
    any size), B replicated, tasks at home, balanced packing in ranges of ``block`` lines."""
    if nodes < 1 or nodes & (nodes - 1):
        raise ValueError(f"nodes must be a power of two, not {nodes}")
    a = matrix.tocoo()
    rows, cols = a.row.astype(np.int64), a.col.astype(np.int64)
    _, physical = balanced_layout(rows, cols, n=a.shape[0], nodes=nodes, block=block, split=True)
    homes = (physical >> 2) & (nodes - 1)
    spawn = pack(physical, cols, [0] * physical.size, spawner=homes, nodes=nodes, block=block)
    return predict_packets(spawn, **options)
