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
counters with the golden's. Its time is the cluster's on-chip count, from the one broadcast start
to the last busy cycle of any node (the host's register traffic is outside it); ``replicated``
loads all of B into every node first (its load reported apart), and ``speedup`` also runs the
1-node cluster on the same job, the baseline of the speed-up.
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

NODE_CHOICES = (1, 2, 4, 8, 16)


def check_arguments(*, nodes, graph, features, placement, seed, replicated=False, speedup=False):
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
    host_cycles: int = 0
    node_cycles: list = None
    cycle_problems: list = None
    b_load: dict = None
    baseline_cycles: int = None

    @property
    def speedup(self):
        return None if self.baseline_cycles is None else self.baseline_cycles / self.cycles

    @property
    def counters_match(self):
        return all(
            self.counters[node][name] == self.golden_counters[node][name]
            for node in range(self.nodes)
            for name in TRAFFIC
        )


def run_demo(*, nodes=4, graph="small", features=DEFAULT_FEATURES, placement="next", seed=1, replicated=False,
             speedup=False):
    from scripts.sim.devices.runtime import run_cluster

    options = dict(graph=graph, features=features, placement=placement, seed=seed, replicated=replicated)
    adjacency, dense, workload = build_job(nodes=nodes, **options)
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
        host_cycles=run["host_cycles"],
        node_cycles=run["node_cycles"],
        cycle_problems=run["cycle_problems"],
        b_load=session["b_load"],
        baseline_cycles=(run["cycles"] if nodes == 1 else run_cluster(build_job(nodes=1, **options)[2])
                         ["runs"][0]["cycles"]) if speedup else None,
    )


def format_report(result):
    lines = [
        f"GCN aggregation of '{result.graph}' ({result.rows} rows, {result.nonzeros} nonzeros, "
        f"{result.packets} task packets) on {result.nodes} simulated FCsN nodes: {result.cycles} cycles "
        f"on chip, from the broadcast start to the last node done ({result.host_cycles} from Kernel_Start "
        f"to Check_Kernel done, the host's register traffic included)",
        "  per node: " + ", ".join(map(str, result.node_cycles or []))
        + (f"; IMPLAUSIBLE: {'; '.join(result.cycle_problems)}" if result.cycle_problems else ""),
        f"  result vs golden.runtime: {'bit-exact' if result.bit_exact else 'DIFFERENT'}; vs scipy.sparse "
        f"float64: max |error| {result.max_error:.3g} ({'within' if result.within_bound else 'OUTSIDE'} "
        f"the recursive-summation bound)",
        f"  packet counters vs golden: {'equal' if result.counters_match else 'DIFFERENT'}",
        "  node  " + "  ".join(f"{name:>8}" for name in TRAFFIC),
    ]
    for node in range(result.nodes):
        lines.append(f"  {node:>4}  " + "  ".join(f"{result.counters[node][name]:>8}" for name in TRAFFIC))
    if result.b_load:
        where = "into every node (replicated)" if result.b_load["replicated"] else "into their owners"
        lines.append(f"  B load (before the start, not timed): {result.b_load['lines']} lines {where}, "
                     f"{result.b_load['cycles']} host-port cycles")
    if result.speedup is not None:
        lines.append(f"  speed-up over the 1-node cluster ({result.baseline_cycles} cycles): "
                     f"{result.speedup:.2f}x")
    return "\n".join(lines)
