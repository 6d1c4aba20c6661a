"""The two-layer GCN on the simulated cluster, per layer and node count, for ``docs/runtime.md``.

Run: ``.venv/bin/python -m testbenches.runtime.bench_gcn [--graph small|cora] [--nodes N ...] [--again]``.
Each point is ``neartrain demo cluster --layers 2`` (:func:`scripts.demo.cluster_gcn.run_demo`):
it must pass (every stage bit-exact with :mod:`golden.runtime.gcn` and ``gcn_forward``, counters
equal to the golden protocol's, logits within ``gcn_bound``), or the bench stops. The cycles are
the cluster's on-chip counts (broadcast start to the last busy node), summed over each layer's
kernel runs; the B replication before each aggregation is untimed and given apart. Points are
kept in ``build/bench/runtime-gcn-points.json`` (``--again`` reruns them); the table is
``runtime-gcn-layers``. The model builds at ``NEARTRAIN_MODEL_OPT`` (the demo's ``-O2`` by default).
"""

import argparse
import json
import logging

from scripts.flow.docs import write_table
from scripts.sim.runner import BUILD_ROOT

DOC = "runtime.md"
COMMAND = ".venv/bin/python -m testbenches.runtime.bench_gcn"
NODES = (1, 2, 4)


def measure(graph, nodes):
    """One passing run's figures (raises AssertionError when the demo does not pass)."""
    from scripts.demo import cluster_gcn

    result = cluster_gcn.run_demo(nodes=nodes, graph=graph, features=4, seed=1)
    if not result.ok:
        raise AssertionError(f"{graph} at {nodes} nodes did not pass:\n{cluster_gcn.format_report(result)}")
    layers = result.layer_cycles
    loads = [load for name, load in result.loads.items() if name != "w"]
    return {"graph": graph, "nodes": nodes, "rows": result.rows, "nonzeros": result.nonzeros,
            "layer1": layers[1], "layer2": layers[2],
            "stages": {stage["stage"]: stage["cycles"] for stage in result.stages},
            "b_lines": sum(load["lines"] for load in loads),
            "b_cycles": sum(load["cycles"] for load in loads)}


def table(points):
    """The ``runtime-gcn-layers`` rows: per graph and node count, each layer's cycles."""
    rows = []
    for point in sorted(points.values(), key=lambda p: (p["graph"], p["nodes"])):
        one = points.get(f"{point['graph']}-1")
        total = point["layer1"] + point["layer2"]
        speedup = f"{(one['layer1'] + one['layer2']) / total:.2f}" if one else ""
        stages = point["stages"]
        rows.append([point["graph"], point["nodes"], point["nonzeros"],
                     f"{point['layer1']} ({stages['gemm1']} + {stages['aggregate1']} + {stages['relu']})",
                     f"{point['layer2']} ({stages['gemm2']} + {stages['aggregate2']})", total, speedup,
                     f"{point['b_lines']} / {point['b_cycles']}"])
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bench_gcn", description=__doc__.splitlines()[0])
    parser.add_argument("--graph", action="append", choices=("small", "cora"), help="default small")
    parser.add_argument("--nodes", type=int, action="append", help="node counts (default 1, 2, 4)")
    parser.add_argument("--again", action="store_true", help="rerun points already measured")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    path = BUILD_ROOT / "bench" / "runtime-gcn-points.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    points = json.loads(path.read_text()) if path.exists() else {}
    for graph in args.graph or ["small"]:
        for nodes in args.nodes or NODES:
            key = f"{graph}-{nodes}"
            if key in points and not args.again:
                continue
            points[key] = measure(graph, nodes)
            # Points another bench process measured meanwhile are kept.
            points = {**(json.loads(path.read_text()) if path.exists() else {}), **points}
            path.write_text(json.dumps(points, indent=1) + "\n")
            print(points[key], flush=True)
    points = {**(json.loads(path.read_text()) if path.exists() else {}), **points}
    write_table(
        DOC, "runtime-gcn-layers",
        ["graph", "nodes", "nonzeros", "layer 1 cycles (X W1 + Â(.) + ReLU)", "layer 2 cycles (. W2 + Â(.))",
         "both layers", "speed-up over 1 node", "B replication: lines / host cycles (untimed)"],
        table(points), f"{COMMAND} [--graph small|cora] [--nodes N ...]", disable_numparse=True)


if __name__ == "__main__":
    main()
