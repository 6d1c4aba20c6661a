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

``--graph FILE`` replaces the synthetic graph by the adjacency ``A`` in ``FILE``, a square SciPy
sparse matrix saved with ``scipy.sparse.save_npz`` (its stored values are the edge weights; ``Â``
is its GCN normalisation as above). A matrix the nodes' memories cannot hold is refused before any
simulation, in one line naming the memory that is short and by how much (:func:`shortfall`: the
capacities are the maxima of ``runtime_cluster``'s parameters).

The report compares the gathered result with the golden (bit for bit: :mod:`golden.runtime`) and
with ``scipy.sparse`` in float64 (within the recursive-summation bound), and every node's packet
counters with the golden's. Its time is the cluster's on-chip count, from the one broadcast start
to the last busy cycle of any node (the host's register traffic is outside it); ``replicated``
loads all of B into every node first (its load reported apart), and ``speedup`` also runs the
1-node cluster on the same job, the baseline of the speed-up.
"""

import dataclasses
import pathlib
import zipfile

import numpy as np
import scipy.sparse as sp

from golden.runtime import kernels as gk
from golden.runtime.protocol import Cluster
from golden.runtime.workload import BALANCED_BLOCK, DEFAULT_FEATURES, GRAPHS, PLACEMENTS, TRAFFIC, build_job

__all__ = [
    "NODE_CHOICES",
    "GRAPHS",
    "DEFAULT_FEATURES",
    "check_arguments",
    "load_graph",
    "memory_capacity",
    "shortfall",
    "build_job",
    "run_demo",
    "format_report",
    "DemoResult",
]

NODE_CHOICES = (1, 2, 4, 8, 16)


def check_arguments(*, nodes, graph, features, placement, seed, replicated=False, speedup=False):
    if nodes not in NODE_CHOICES:
        raise ValueError(f"--nodes must be one of {', '.join(map(str, NODE_CHOICES))}, not {nodes}")
    if graph not in GRAPHS and not pathlib.Path(graph).is_file():
        raise ValueError(f"--graph must be one of {', '.join(GRAPHS)} or a .npz file, not {graph!r}")
    if not 1 <= features <= 14:
        raise ValueError(f"--features must be in 1..14 (one 448-bit line per row), not {features}")
    if placement not in PLACEMENTS:
        raise ValueError(f"--placement must be one of {', '.join(PLACEMENTS)}, not {placement!r}")
    if seed < 0:
        raise ValueError(f"--seed must be >= 0, not {seed}")
    if graph not in GRAPHS:
        adjacency = load_graph(graph)
        capacity = memory_capacity()
        message = shortfall(adjacency.shape[0], [], capacity)  # before cutting tasks: cheap
        if message is None:
            try:
                _, _, workload = build_job(nodes=nodes, features=features, placement=placement, seed=seed,
                                           adjacency=adjacency)
            except ValueError as error:  # the split hub rows and padding took it past the ranges
                raise ValueError(f"--graph {graph}: {error}") from None
            message = shortfall(workload.config.rows, [len(entries) for entries in workload.spawn], capacity)
        if message is not None:
            raise ValueError(f"--graph {graph}: {message}")


def load_graph(path):
    """The square sparse matrix (CSR, float32) in ``path`` (``scipy.sparse.save_npz``), or a ValueError
    in one line: not such a file, not square, fewer than 4 rows, or weights the GCN normalisation
    cannot take (non-finite, or a row of ``A + I`` whose weights do not sum to a positive number)."""
    try:
        if not zipfile.is_zipfile(path):
            raise ValueError("not an .npz archive")
        matrix = sp.load_npz(path)
    except Exception as error:  # noqa: BLE001 (numpy, zipfile and scipy each raise their own)
        reason = " ".join(str(error).split()) or type(error).__name__
        raise ValueError(f"--graph {path}: not a SciPy sparse matrix saved with scipy.sparse.save_npz "
                         f"({reason})") from None
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        shape = " x ".join(map(str, matrix.shape))
        raise ValueError(f"--graph {path}: the adjacency must be square, not {shape}")
    if matrix.shape[0] < 4:
        raise ValueError(f"--graph {path}: {matrix.shape[0]} rows: the cluster's memories hold at least 4")
    matrix = sp.csr_matrix(matrix, dtype=np.float32)
    if not np.all(np.isfinite(matrix.data)):
        raise ValueError(f"--graph {path}: the matrix holds a value that is not finite")
    sums = np.asarray(matrix.sum(axis=1), dtype=np.float64).ravel() + 1.0
    if np.any(sums <= 0):
        row = int(np.flatnonzero(sums <= 0)[0])
        raise ValueError(f"--graph {path}: row {row} of A + I sums to {sums[row]:g}: the GCN normalisation "
                         "D^-1/2 (A + I) D^-1/2 needs positive degrees")
    return matrix


def memory_capacity(block=BALANCED_BLOCK):
    """The largest memories a node of ``runtime_cluster`` can have (its parameters' maxima):
    ``{"lines": data-memory lines (also output rows), "ranges": data ranges, "block": lines per
    range, "spawn": Spawn_MEM entries}``."""
    from rtl.runtime.cluster import Cluster as ClusterBlock

    maxima = {param.name: param.maximum for param in ClusterBlock.PARAMS}
    return {"lines": min(maxima["lines"], maxima["ranges"] * block), "ranges": maxima["ranges"],
            "block": block, "spawn": maxima["spawn_depth"]}


def shortfall(rows, entries, capacity):
    """Which node memory cannot hold a job, in one line, or None when all can.

    ``rows``: data lines and output rows every node needs (the data memory spans the whole data
    space: fetched lines are never evicted); ``entries``: Spawn_MEM entries per node.
    """
    if rows > capacity["lines"]:
        return (f"the data memory is short by {rows - capacity['lines']} lines: every node's must hold all "
                f"{rows} rows of B, and holds at most {capacity['lines']} ({capacity['ranges']} ranges of "
                f"{capacity['block']} lines)")
    for node, count in enumerate(entries):
        if count > capacity["spawn"]:
            return (f"Spawn_MEM is short by {count - capacity['spawn']} entries: node {node} needs {count} "
                    f"task packets, and a node holds at most {capacity['spawn']}")
    return None


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

    options = dict(graph=graph, features=features, placement=placement, seed=seed, replicated=replicated,
                   adjacency=None if graph in GRAPHS else load_graph(graph))
    adjacency, dense, workload = build_job(nodes=nodes, **options)
    config = workload.config
    result = Cluster(config, workload.memory).run(workload.spawn, gk.AGGREGATION)
    out = gk.execute(result.issued, workload.memory, rows=config.rows, features=features)
    expected = np.array([out[config.home(row)][row] for row in range(config.rows)], dtype=np.uint32)
    session = run_cluster(workload)
    physical = session["out"]
    got = workload.gather(physical)
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
        rows=adjacency.shape[0],
        nonzeros=adjacency.nnz,
        packets=workload.packets,
        cycles=run["cycles"],
        bit_exact=bool(np.array_equal(physical, expected)),
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
