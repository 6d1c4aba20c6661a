"""The scaling tables and plot of ``docs/runtime.md`` (``bench_runtime scaling``): RTL points beside
the cycle model of :mod:`golden.runtime.cluster_model`, and the model's projections.

* ``runtime-scaling``: every RTL point measured (``build/bench/runtime-scaling-points.json``, written
  by ``bench_runtime scaling``) with the model's count for the same job beside it, and its error
  (cluster and worst node);
* ``runtime-scaling-model``: the model alone at 1 to 64 nodes on the graphs of
  :data:`PROJECTED_GRAPHS`, each row labelled a projection unless the RTL measured that point;
* ``docs/runtime_scaling.png``: speed-up over the 1-node cluster, RTL points and model lines.

The model's job is the one ``build_job`` gives the cluster (balanced packing in ranges of
``BALANCED_BLOCK`` lines, B replicated, tasks at home), cut for any power-of-two node count.
"""

import functools

from golden.runtime.cluster_model import graph_matrix, predict
from golden.runtime.workload import GRAPHS
from scripts.flow.docs import write_table
from scripts.flow.figures import docs_plot

__all__ = ["MODEL_NODES", "PROJECTED_GRAPHS", "model", "write_scaling"]

DOC = "runtime.md"
COMMAND = ".venv/bin/python -m testbenches.runtime.bench_runtime scaling"
MODEL_NODES = (1, 2, 4, 8, 16, 32, 64)
# Reddit-like is not here: 232,965 rows need 3,883 ranges of 60 lines, past the 1,024 a task's
# 10-bit range field names, and its 57 M nonzeros are past what the model's packing step (the
# host's, in Python) cuts in reasonable time (docs/runtime.md §7).
# "small" (the demo's default graph) is cheap to cut: the fast test checks its rows against the model.
PROJECTED_GRAPHS = ("cora", "citeseer", "pubmed", "small")


@functools.cache
def model(graph, nodes):
    """The model's :class:`golden.runtime.cluster_model.Prediction` for ``graph`` on ``nodes`` nodes."""
    return predict(_matrix(graph), nodes)


@functools.cache
def _matrix(graph):
    return graph_matrix(GRAPHS.get(graph, graph), seed=1)


def _modelled(point):
    """Whether the model covers the point's job (B replicated, tasks at home, or one node)."""
    return point["nodes"] == 1 or (point["b"] == "replicated" and point["placement"] == "home")


def _percent(model_cycles, rtl_cycles):
    return f"{100 * (model_cycles - rtl_cycles) / rtl_cycles:+.1f} %"


def write_scaling(points):
    """Write both tables and the plot from the RTL ``points`` (the bench's JSON values)."""
    baseline = {p["graph"]: p["cycles"] for p in points.values() if p["nodes"] == 1}
    rows = []
    for point in sorted(points.values(), key=lambda p: (p["graph"], p["placement"], p["b"], p["nodes"])):
        graph, nodes, cycles = point["graph"], point["nodes"], point["cycles"]
        one = baseline.get(graph)
        speedup = f"{one / cycles:.2f}" if one else ""
        efficiency = f"{one / cycles / nodes:.2f}" if one else ""
        predicted = model_speedup = error = worst = ""
        if _modelled(point):
            prediction = model(graph, nodes)
            predicted = prediction.cycles
            model_speedup = f"{model(graph, 1).cycles / predicted:.2f}"
            error = _percent(predicted, cycles)
            pairs = zip(prediction.node_cycles, point["node_cycles"], strict=True)
            worst = _percent(*max(pairs, key=lambda pair: abs(pair[0] - pair[1]) / pair[1]))
        rows.append([graph, point["placement"], point["b"], nodes, point["nonzeros"], point["tasks"], cycles,
                     predicted, error, worst, speedup, model_speedup, efficiency, point["network_packets"],
                     f"{point['b_load_lines']} / {point['b_load_cycles']}", point["host_cycles"]])
    write_table(
        DOC,
        "runtime-scaling",
        ["graph", "tasks spawned", "B", "nodes", "nonzeros", "tasks", "cycles, RTL (on chip)",
         "cycles, model", "model error", "model error, worst node", "speed-up over 1 node, RTL",
         "speed-up, model", "per-node efficiency, RTL", "packets on the network",
         "B load: lines / host cycles", "host window"],
        rows,
        f"{COMMAND} [--graph G ...] [--replicate] [--placement home|next] [--nodes N ...]",
        disable_numparse=True,
    )
    measured = {(p["graph"], p["nodes"]): p["cycles"] for p in points.values() if _modelled(p)}
    projections = []
    for graph in PROJECTED_GRAPHS:
        one = model(graph, 1).cycles
        for nodes in MODEL_NODES:
            prediction = model(graph, nodes)
            rtl = measured.get((graph, nodes))
            projections.append([graph, nodes, _matrix(graph).nnz, sum(prediction.tasks),
                                max(prediction.tasks), prediction.cycles, f"{one / prediction.cycles:.2f}",
                                f"{one / prediction.cycles / nodes:.2f}",
                                "projection" if rtl is None else f"RTL: {rtl}"])
    write_table(
        DOC,
        "runtime-scaling-model",
        ["graph", "nodes", "nonzeros", "tasks", "tasks on the busiest node", "cycles, model",
         "speed-up over 1 node, model", "per-node efficiency, model", "RTL point"],
        projections,
        f"{COMMAND} (golden.runtime.cluster_model; B replicated, tasks at home)",
        disable_numparse=True,
    )
    _plot(points, baseline)


def _plot(points, baseline):
    with docs_plot("runtime_scaling.png", xlabel="nodes", ylabel="speed-up over the 1-node cluster",
                   title="Distributed GCN aggregation, FCsN cluster: RTL and model", log_x=True,
                   log_y=True) as axis:
        colours = iter(f"C{index}" for index in range(10))
        measured_graphs = sorted({p["graph"] for p in points.values()})
        for graph in measured_graphs + [g for g in PROJECTED_GRAPHS if g not in measured_graphs]:
            colour = next(colours)
            one = model(graph, 1).cycles
            axis.plot(MODEL_NODES, [one / model(graph, nodes).cycles for nodes in MODEL_NODES], color=colour,
                      linestyle="--", label=f"{graph}-like, model (a projection where no dot)")
            series = sorted((p["nodes"], baseline[graph] / p["cycles"]) for p in points.values()
                            if p["graph"] == graph and _modelled(p) and graph in baseline)
            if series:
                axis.plot([n for n, _ in series], [s for _, s in series], color=colour, marker="o",
                          linestyle="none", label=f"{graph}-like, RTL")
        axis.plot(MODEL_NODES, MODEL_NODES, linestyle=":", color="grey", label="ideal")
