"""``neartrain demo cluster``: a GCN aggregation distributed over N simulated FCsN SmartNIC nodes.

The job is the aggregation ``OUT = Â B`` of a GCN layer: ``Â = D^-1/2 (A + I) D^-1/2`` of a
synthetic power-law graph (:mod:`golden.aggregate.graphs`; ``cora`` has the published Cora
statistics, ``small`` is a 400-node graph of the same shape) and ``B`` a random float32 matrix
(the combination ``X W``, ``features`` wide). The host (:class:`scripts.sim.devices.runtime.FCsNHost`,
the seed's Table 4.1 verbs over AXI4-Lite and the host memory port) cuts it into tasks
(``Host_data_preprocess``), distributes B's rows and the tasks (``Board_MEM_init``), starts the
aggregation kernel (id 6) on every node (``Kernel_Start``), waits (``Check_Kernel``) and reads the
rows back (``Sync_to_Host``), all in one Verilator simulation of ``runtime_cluster``: N runtime
nodes on the RTL switch.

The report compares the gathered result with the golden (bit for bit: :mod:`golden.runtime`) and
with ``scipy.sparse`` in float64 (within the recursive-summation bound), and every node's packet
counters with the golden's.
"""

import dataclasses

import numpy as np
import scipy.sparse as sp

from golden.runtime import kernels as gk
from golden.runtime.protocol import Cluster
from golden.runtime.workload import DEFAULT_FEATURES, GRAPHS, PLACEMENTS, TRAFFIC, build_job

__all__ = [
    "NODE_CHOICES",
    "GRAPHS",
    "DEFAULT_FEATURES",
    "check_arguments",
    "build_job",
    "run_demo",
    "format_report",
    "DemoResult",
]

NODE_CHOICES = (2, 4, 8, 16)


def check_arguments(*, nodes, graph, features, placement, seed):
    if nodes not in NODE_CHOICES:
        raise ValueError(f"--nodes must be one of {', '.join(map(str, NODE_CHOICES))}, not {nodes}")
    if graph not in GRAPHS:
        raise ValueError(f"--graph must be one of {', '.join(GRAPHS)}, not {graph!r}")
    if not 1 <= features <= 14:
        raise ValueError(f"--features must be in 1..14 (one 448-bit line per row), not {features}")
    if placement not in PLACEMENTS:
        raise ValueError(f"--placement must be one of {', '.join(PLACEMENTS)}, not {placement!r}")
    if seed < 0:
        raise ValueError(f"--seed must be >= 0, not {seed}")


@dataclasses.dataclass
class DemoResult:
    nodes: int
    graph: str
    rows: int
    nonzeros: int
    packets: int
    cycles: int
    bit_exact: bool
    max_error: float
    within_bound: bool
    counters: list
    golden_counters: list

    @property
    def counters_match(self):
        return all(
            self.counters[node][name] == self.golden_counters[node][name]
            for node in range(self.nodes)
            for name in TRAFFIC
        )


def run_demo(*, nodes=4, graph="small", features=DEFAULT_FEATURES, placement="next", seed=1):
    from scripts.sim.devices.runtime import run_cluster

    adjacency, dense, workload = build_job(
        nodes=nodes, graph=graph, features=features, placement=placement, seed=seed
    )
    config = workload.config
    result = Cluster(config, workload.memory).run(workload.spawn, gk.AGGREGATION)
    out = gk.execute(result.issued, workload.memory, rows=config.rows, features=features)
    expected = np.array([out[config.home(row)][row] for row in range(config.rows)], dtype=np.uint32)
    session = run_cluster(workload)
    got = session["out"]
    a = sp.csr_matrix(adjacency).astype(np.float64)
    reference = a @ dense.astype(np.float64)
    degree = np.diff(a.indptr)[:, None].astype(np.float64)
    u = 2.0**-24
    bound = degree * u / (1 - degree * u) * (abs(a) @ np.abs(dense.astype(np.float64))) + degree * 2.0**-149
    error = np.abs(got.view(np.float32).astype(np.float64) - reference)
    run = session["runs"][0]
    return DemoResult(
        nodes=nodes,
        graph=graph,
        rows=config.rows,
        nonzeros=adjacency.nnz,
        packets=workload.packets,
        cycles=run["cycles"],
        bit_exact=bool(np.array_equal(got, expected)),
        max_error=float(error.max()),
        within_bound=bool(np.all(error <= bound)),
        counters=run["counters"],
        golden_counters=result.counters,
    )


def format_report(result):
    lines = [
        f"GCN aggregation of '{result.graph}' ({result.rows} rows, {result.nonzeros} nonzeros, "
        f"{result.packets} task packets) on {result.nodes} simulated FCsN nodes: {result.cycles} cycles "
        f"from Kernel_Start to Check_Kernel done",
        f"  result vs golden.runtime: {'bit-exact' if result.bit_exact else 'DIFFERENT'}; vs scipy.sparse "
        f"float64: max |error| {result.max_error:.3g} ({'within' if result.within_bound else 'OUTSIDE'} "
        f"the recursive-summation bound)",
        f"  packet counters vs golden: {'equal' if result.counters_match else 'DIFFERENT'}",
        "  node  " + "  ".join(f"{name:>8}" for name in TRAFFIC),
    ]
    for node in range(result.nodes):
        lines.append(f"  {node:>4}  " + "  ".join(f"{result.counters[node][name]:>8}" for name in TRAFFIC))
    return "\n".join(lines)
