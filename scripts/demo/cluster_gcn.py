"""``neartrain demo cluster --layers 2``: a two-layer GCN forward pass on N simulated FCsN nodes.

``logits = Â relu(Â (X W1)) W2`` (:func:`golden.aggregate.gcn_forward`, ``features`` wide at every
layer, Glorot weights, binary bag-of-words ``X``) on the graph of ``neartrain demo cluster``
(``small``, ``cora`` or a ``.npz`` adjacency), every product on the RTL: the combinations on each
node's GEMM unit (kernel 1, ``tiled_gemm``), the aggregations on each node's pipeline (kernel 6),
the ReLU as kernel 5, in one Verilator simulation of ``runtime_cluster`` (the job and its stages:
:mod:`golden.runtime.gcn`; the host's flow: :mod:`scripts.sim.devices.runtime_gcn`). B is
replicated into every node before each aggregation (its load reported apart) and every task is
spawned at its row's home, so no packet crosses the network.

The report gives each stage's on-chip cycles (broadcast start to the last busy node) and their
sum per layer; every stage's rows equal :func:`golden.runtime.gcn.gcn_golden`'s bit for bit, the
combinations, the hidden layer and the logits equal ``gcn_forward``'s bit for bit, every node's
packet counters equal the golden protocol's, and the logits lie within
:func:`golden.aggregate.gcn_bound` of the float64 :func:`golden.aggregate.gcn_reference`.
"""

import dataclasses

import numpy as np

from golden.aggregate import gcn_bound, gcn_forward, gcn_normalise, gcn_reference, gcn_weights, generate
from golden.runtime.gcn import gcn_golden, gcn_job
from golden.runtime.workload import DEFAULT_FEATURES, GRAPHS, TRAFFIC

from . import cluster

__all__ = ["check_arguments", "gcn_inputs", "run_demo", "format_report", "GcnClusterResult", "FORWARD"]

# Stages whose rows gcn_forward also returns: (stage, GcnResult field).
FORWARD = (("gemm1", "xw"), ("relu", "hidden"), ("gemm2", "hw"), ("aggregate2", "logits"))


def check_arguments(*, nodes, graph, features, seed):
    cluster.check_arguments(nodes=nodes, graph=graph, features=features, placement="home", seed=seed)


def gcn_inputs(graph, features, seed):
    """``(Â, X, W1, W2)``: the normalised adjacency of ``graph``, binary ``X`` (half the words set)
    and Glorot ``W1``, ``W2``, all ``features`` wide, from ``seed``."""
    adjacency = cluster.load_graph(graph) if graph not in GRAPHS else generate(GRAPHS[graph], seed=seed)
    normalised = gcn_normalise(adjacency)
    rng = np.random.default_rng(seed)
    x = (rng.random((normalised.shape[0], features)) < 0.5).astype(np.float32)
    w1, w2 = gcn_weights(features, features, features, seed=seed)
    return normalised, x, w1, w2


@dataclasses.dataclass
class GcnClusterResult:
    nodes: int
    graph: str
    rows: int
    nonzeros: int
    features: int
    stages: list
    loads: dict
    forward_exact: dict
    max_error: float
    max_bound: float
    within_bound: bool
    host_errors: dict

    @property
    def layer_cycles(self):
        """On-chip cycles per layer: the sum of its stages'."""
        totals = {}
        for stage in self.stages:
            totals[stage["layer"]] = totals.get(stage["layer"], 0) + stage["cycles"]
        return totals

    @property
    def ok(self):
        errors = [value for counts in self.host_errors.values()
                  for value in (counts if isinstance(counts, list) else [counts])]
        return (all(stage["bit_exact"] and stage["counters_match"] and not stage["cycle_problems"]
                    for stage in self.stages)
                and all(self.forward_exact.values()) and self.within_bound and not any(errors))


def run_demo(*, nodes=4, graph="small", features=DEFAULT_FEATURES, seed=1):
    from scripts.sim.devices.runtime_gcn import run_gcn

    normalised, x, w1, w2 = gcn_inputs(graph, features, seed)
    job = gcn_job(normalised, x, w1, w2, nodes=nodes)
    expected, results = gcn_golden(job)
    forward = gcn_forward(normalised, x, w1, w2)
    session = run_gcn(job)
    stages = []
    before = [dict.fromkeys(TRAFFIC, 0) for _ in range(nodes)]  # the counters run on from stage to stage
    for run in session["stages"]:
        name = run["stage"]
        golden_counters = results[name].counters
        stages.append({
            "stage": name, "layer": run["layer"], "task_id": run["task_id"], "cycles": run["cycles"],
            "node_cycles": run["node_cycles"], "cycle_problems": run["cycle_problems"],
            "bit_exact": bool(np.array_equal(run["out"], expected[name])),
            "counters_match": all(run["counters"][node][key] - before[node][key] == golden_counters[node][key]
                                  for node in range(nodes) for key in TRAFFIC),
        })
        before = run["counters"]
    got = {run["stage"]: job.rows(run["out"]) for run in session["stages"]}
    forward_exact = {field: bool(np.array_equal(got[name].view(np.uint32),
                                                getattr(forward, field).view(np.uint32)))
                     for name, field in FORWARD}
    reference = gcn_reference(normalised, x, w1, w2)
    bound = gcn_bound(normalised, x, w1, w2, forward)
    error = np.abs(got["aggregate2"].astype(np.float64) - reference)
    return GcnClusterResult(
        nodes=nodes, graph=graph, rows=normalised.shape[0], nonzeros=normalised.nnz, features=features,
        stages=stages, loads=session["loads"], forward_exact=forward_exact,
        max_error=float(np.nanmax(error)), max_bound=float(bound.max()),
        within_bound=bool(np.all(np.isfinite(error)) and np.all(error <= bound)),
        host_errors=session["errors"])


def format_report(result):
    layers = result.layer_cycles
    lines = [
        f"2-layer GCN on '{result.graph}' ({result.rows} rows, {result.nonzeros} nonzeros of Â), "
        f"{result.features} -> {result.features} -> {result.features}, on {result.nodes} simulated FCsN "
        "nodes: GEMM (kernel 1, tiled_gemm), aggregation (6), ReLU (5)",
        f"  {'stage':<11} {'layer':>5} {'cycles':>8}  {'== golden':>9}  {'counters':>8}  per node",
    ]
    for stage in result.stages:
        problems = stage["cycle_problems"]
        lines.append(f"  {stage['stage']:<11} {stage['layer']:>5} {stage['cycles']:>8}  "
                     f"{'yes' if stage['bit_exact'] else 'NO':>9}  "
                     f"{'equal' if stage['counters_match'] else 'DIFFER':>8}  "
                     + ", ".join(map(str, stage["node_cycles"]))
                     + (f"; IMPLAUSIBLE: {'; '.join(problems)}" if problems else ""))
    lines.append("  on-chip cycles per layer (start to all done, summed over its stages): "
                 + ", ".join(f"layer {layer} {cycles}" for layer, cycles in sorted(layers.items())))
    loads = [f"{name} {load['lines']} lines in {load['cycles']} host-port cycles"
             for name, load in result.loads.items() if name != "w"]
    lines.append("  B replicated into every node before (not timed): " + "; ".join(loads))
    lines.append("  vs golden.aggregate.gcn_forward: " + ", ".join(
        f"{name} {'bit-exact' if exact else 'DIFFERENT'}" for name, exact in result.forward_exact.items()))
    lines.append(f"  logits vs float64 reference: max |error| {result.max_error:.3e}, max bound "
                 f"{result.max_bound:.3e}: {'within' if result.within_bound else 'OUTSIDE'} gcn_bound")
    lines.append(f"result: {'PASS' if result.ok else 'FAIL'}")
    return "\n".join(lines)
