"""Measurements of the FCsN runtime for ``docs/runtime.md``: each part writes its table(s) there.

Run: ``.venv/bin/python -m testbenches.runtime.bench_runtime <part>`` with ``part`` one of

* ``packet``: the header and payload field tables, from :mod:`golden.runtime.packet`;
* ``rate``: packets per cycle through each path of one node (cocotb test ``line_rate``);
* ``latency``: cycles from a task's arrival to its issue, local and remote range (``arrival_to_issue``);
* ``flood``: the deadlock flood at 4, 8 and 16 nodes (``deadlock_flood``): cycles and the bound;
* ``scaling``: the distributed aggregation of the Cora-like graph (or the ``--graph`` ones; with
  ``--pubmed`` also Pubmed-like) at 1, 2, 4, 8 and 16 nodes through the host API, with the tasks
  spawned at their home (``--placement home``) or one node past it (``next``, every task crosses
  the network), B at its owners or replicated into every node (``--replicate``); cycles are the
  cluster's on-chip count (broadcast start to all done, and per node), the speed-up is over the
  1-node cluster; every run bit-exact with the golden, its counters equal to the golden's. Points
  accumulate in ``build/bench/runtime-scaling-points.json`` (with each run's wall time and load);
  then (unless ``--no-tables``) :mod:`testbenches.runtime.bench_scaling` writes the RTL table
  beside the cycle model, the model's projections and ``docs/runtime_scaling.png``;
* ``area``: ``runtime_node`` on Yosys xcup and ECP5, and its ECP5 Fmax (nextpnr).

Simulated cycles only; nothing in the tables is timed on the wall clock.
"""

import argparse
import json
import logging
import os
import time

import numpy as np

from golden.runtime import packet as gp
from scripts.flow.docs import write_table
from scripts.sim.devices.runtime_sessions import measure_flood, measure_node
from scripts.sim.runner import BUILD_ROOT

DOC = "runtime.md"
COMMAND = ".venv/bin/python -m testbenches.runtime.bench_runtime"
RATE_PARAMS = {"spawn_depth": 256, "queue_depth": 8, "tx_credits": 8}
FLOOD_NODES = (4, 8, 16)
SCALING_NODES = (1, 2, 4, 8, 16)
AREA_POINTS = (
    ("defaults", {}),
    ("cluster scale", {"spawn_depth": 4096, "ranges": 1024, "queue_depth": 16}),
)
# Table 4.2's hardware runtime row, in the xcup columns (its 717 BRAM18K are 358.5 BRAM36).
TABLE_4_2 = {"LUT": 64089, "FF": 87813, "DSP48E2": 0, "BRAM": "358.5 (717 BRAM18K)"}


def packet(args):
    header = [[name, offset, width, _HEADER_MEANING[name]] for name, offset, width in gp.HEADER_FIELDS]
    write_table(
        DOC,
        "runtime-packet-header",
        ["field", "bit", "width", "meaning"],
        header,
        f"{COMMAND} packet",
        colalign=("left", "right", "right", "left"),
    )
    rows = []
    for kind, fields in (("task", gp.TASK_FIELDS), ("RDMA", gp.RDMA_FIELDS), ("data", gp.DATA_FIELDS)):
        for name, offset, width in fields:
            rows.append([kind, name, gp.HEADER_BITS + offset, width, _PAYLOAD_MEANING[kind, name]])
        if kind == "task":
            for slot in range(gp.ITEMS):
                for name, offset, width in gp.ITEM_FIELDS:
                    start = gp.HEADER_BITS + gp.ITEM_OFFSET + slot * gp.ITEM_BITS + offset
                    rows.append(["task", f"slot {slot}.{name}", start, width, _PAYLOAD_MEANING["item", name]])
    write_table(
        DOC,
        "runtime-packet-payloads",
        ["type", "field", "bit", "width", "meaning"],
        rows,
        f"{COMMAND} packet",
        colalign=("left", "left", "right", "right", "left"),
    )


_HEADER_MEANING = {
    "ptype": "0 task, 1 RDMA request, 2 data reply (3 invalid)",
    "task_id": "kernel id, Table 4.1: 0 conv2d, 1 GEMM, 2 sparse x dense, 3 sparse x sparse, 4 norm, "
    "5 activation, 6 aggregation (7 invalid)",
    "dst": "destination node",
    "src": "source node (the requester of an RDMA request)",
    "range": "needed data range (task), requested range (RDMA), carried range (data)",
    "remote": "remote-data field: the range is owned by another node than dst",
    "check": "integrity: the XOR of the 64 bytes is 0",
}
_PAYLOAD_MEANING = {
    ("task", "mask"): "occupied slots (never 0)",
    ("item", "row"): "output row: the item executes at the row's home node",
    ("item", "col"): "row of the dense operand read (inside the range)",
    ("item", "value"): "32-bit value (float32 or integer by kernel)",
    ("RDMA", "first"): "first line of the requested range",
    ("RDMA", "lines"): "lines requested",
    ("data", "line"): "global line address",
    ("data", "last"): "the range's final line",
    ("data", "data"): "the line (14 words of 32 bits)",
}


def rate(args):
    result = measure_node("line_rate", RATE_PARAMS)
    params = ", ".join(f"{key}={value}" for key, value in RATE_PARAMS.items())
    rows = [[path, f"{value:.3f}"] for path, value in result.items()]
    write_table(
        DOC,
        "runtime-line-rate",
        [f"path (runtime_node, {params})", "packets per cycle"],
        rows,
        f"{COMMAND} rate",
        colalign=("left", "right"),
        disable_numparse=True,
    )


def latency(args):
    result = measure_node("arrival_to_issue", RATE_PARAMS)
    rows = [
        ["range owned by the node", result["local"]],
        ["range on another node (RDMA fetch of 20 lines)", result["remote"]],
    ]
    write_table(
        DOC,
        "runtime-latency",
        ["task", "cycles from net_in to kernel_task"],
        rows,
        f"{COMMAND} latency",
        colalign=("left", "right"),
    )


def flood(args):
    from testbenches.runtime.tb import CLUSTER_PARAMS

    rows = []
    for nodes in args.nodes or FLOOD_NODES:
        # The parameters of test_cluster.py's test_deadlock_flood, so that the two share a build.
        params = {"nodes": nodes, **CLUSTER_PARAMS, "queue_depth": 2, "switch_depth": 2, "aggregation": False}
        result = measure_flood(params)
        rows.append(
            [
                nodes,
                result["spawned"],
                result["network_packets"],
                result["rdma_requests"],
                result["cycles"],
                result["bound"],
            ]
        )
        print(rows[-1], flush=True)
    write_table(
        DOC,
        "runtime-flood",
        [
            "nodes",
            "tasks spawned",
            "packets on the network",
            "RDMA requests",
            "cycles to done",
            "bound (flood_bound)",
        ],
        rows,
        f"{COMMAND} flood",
    )


def scaling(args):
    from golden.runtime import kernels as gk
    from golden.runtime.protocol import Cluster
    from golden.runtime.workload import TRAFFIC, build_job
    from scripts.sim.devices.runtime import run_cluster

    graphs = args.graph or ["cora"] + (["pubmed"] if args.pubmed else [])
    data_path = BUILD_ROOT / "bench" / "runtime-scaling-points.json"
    data_path.parent.mkdir(parents=True, exist_ok=True)
    points = json.loads(data_path.read_text()) if data_path.exists() else {}
    # Points of earlier versions (host-timed cycles, or the seed's packing: no "node_cycles") are
    # not comparable: dropped.
    points = {key: point for key, point in points.items() if "node_cycles" in point}
    layouts = ["replicated" if args.replicate else "owned"]
    jobs = [(g, p, b) for g in graphs for p in args.placement or ["home"] for b in layouts]
    for graph, placement, b in jobs:
        for nodes in args.nodes or SCALING_NODES:
            # One node: every placement and B layout is the same job (the baseline).
            key = "-".join((graph, "home", "owned", "1") if nodes == 1 else (graph, placement, b, str(nodes)))
            if key in points and not args.again:
                continue
            adjacency, dense, workload = _job(graph, nodes, placement, b == "replicated", build_job)
            config = workload.config
            golden = Cluster(config, workload.memory).run(workload.spawn, gk.AGGREGATION)
            out = gk.execute(golden.issued, workload.memory, rows=config.rows, features=workload.features)
            expected = np.array([out[config.home(row)][row] for row in range(config.rows)], dtype=np.uint32)
            began, load = time.monotonic(), os.getloadavg()[0]
            session = run_cluster(workload)
            wall = time.monotonic() - began
            run = session["runs"][0]
            if not np.array_equal(session["out"], expected):
                raise AssertionError(f"{key}: the result differs from the golden")
            if run["cycle_problems"]:
                raise AssertionError(f"{key}: {run['cycle_problems']}")
            counters = run["counters"]
            for node in range(nodes):
                for name in TRAFFIC:
                    if counters[node][name] != golden.counters[node][name]:
                        raise AssertionError(
                            f"{key}: node {node} {name} {counters[node][name]} != "
                            f"{golden.counters[node][name]}"
                        )
            points[key] = {
                "graph": graph,
                "placement": "home" if nodes == 1 else placement,
                "b": "owned" if nodes == 1 else b,
                "nodes": nodes,
                "nonzeros": int(adjacency.nnz),
                "tasks": workload.packets,
                "cycles": run["cycles"],
                "node_cycles": run["node_cycles"],
                "wall_s": round(wall, 1),
                "load": round(load, 1),
                "host_cycles": run["host_cycles"],
                "b_load_lines": session["b_load"]["lines"],
                "b_load_cycles": session["b_load"]["cycles"],
                "network_packets": sum(c["tx_task"] + c["tx_rdma"] + c["tx_data"] for c in counters),
                "rdma_requests": sum(c["tx_rdma"] for c in counters),
                "max_node_items": max(
                    sum(1 for task in tasks for s in task.slots if s is not None) for tasks in golden.issued
                ),
            }
            # Points another bench process measured meanwhile are kept (runs of different sizes may overlap).
            saved = json.loads(data_path.read_text()) if data_path.exists() else {}
            points = {**{k: v for k, v in saved.items() if "node_cycles" in v}, **points, key: points[key]}
            data_path.write_text(json.dumps(points, indent=1) + "\n")
            print(points[key], flush=True)
    if not args.no_tables:
        from testbenches.runtime.bench_scaling import write_scaling

        write_scaling(points)


def _job(graph, nodes, placement, replicated, build_job):
    return build_job(nodes=nodes, graph=graph, features=4, placement=placement, seed=1, replicated=replicated)


def area(args):
    from boards import reference_board
    from boards.targets import RESOURCE_COLUMNS
    from rtl.registry import get_block
    from scripts.flow.bitstream import measure_bitstream
    from scripts.flow.synth import synthesize

    rows = []
    for label, overrides in AREA_POINTS:
        block = get_block("runtime_node")
        params = block.resolve(overrides)
        xcup = synthesize(block.build(overrides), "xcup")
        ecp5 = synthesize(block.build(overrides), "ecp5")
        fmax = ""
        if not args.no_fmax:
            try:
                summary = measure_bitstream(block.build(overrides), board=reference_board("ecp5"))
                fmax = f"{min(clock['achieved'] for clock in summary['fmax'].values()):.1f}"
            except Exception as error:  # noqa: BLE001 - reported in the table
                fmax = f"failed: {str(error).splitlines()[0]}"
        described = ", ".join(f"{key}={params[key]}" for key in ("spawn_depth", "ranges", "queue_depth"))
        rows.append(
            [f"{label} ({described})"]
            + [xcup[column] for column in RESOURCE_COLUMNS["xcup"]]
            + [ecp5[column] for column in RESOURCE_COLUMNS["ecp5"]]
            + [fmax]
        )
        print(rows[-1], flush=True)
    rows.append(
        ["Table 4.2 hardware runtime (U280, Vitis HLS, 294 MHz)"]
        + [TABLE_4_2.get(column, "") for column in RESOURCE_COLUMNS["xcup"]]
        + [""] * len(RESOURCE_COLUMNS["ecp5"])
        + [""]
    )
    headers = (
        ["runtime_node"]
        + [f"xcup {column}" for column in RESOURCE_COLUMNS["xcup"]]
        + [f"ECP5 {column}" for column in RESOURCE_COLUMNS["ecp5"]]
        + ["ECP5 Fmax (MHz)"]
    )
    write_table(
        DOC,
        "runtime-area",
        headers,
        rows,
        f"{COMMAND} area (neartrain synth runtime_node --target xcup|ecp5)",
        disable_numparse=True,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bench_runtime", description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    parts.add_parser("packet")
    parts.add_parser("rate")
    parts.add_parser("latency")
    p_flood = parts.add_parser("flood")
    p_flood.add_argument("--nodes", type=int, action="append", help="node counts (default 4, 8, 16)")
    p_scaling = parts.add_parser("scaling")
    p_scaling.add_argument("--nodes", type=int, action="append", help="node counts (default 1, 2, 4, 8, 16)")
    p_scaling.add_argument("--pubmed", action="store_true", help="also the Pubmed-like graph (hours)")
    p_scaling.add_argument("--graph", action="append", choices=("cora", "citeseer", "pubmed", "small"),
                           help="graphs to measure (default cora, and pubmed with --pubmed)")
    p_scaling.add_argument("--again", action="store_true", help="rerun points already measured")
    p_scaling.add_argument("--placement", action="append", choices=("next", "home"),
                           help="where tasks are spawned: home (default) or next (every task crosses the "
                           "network)")
    p_scaling.add_argument("--replicate", action="store_true",
                           help="B replicated into every node before the start (no range fetched)")
    p_scaling.add_argument("--no-tables", action="store_true", help="measure only (tables written later)")
    p_area = parts.add_parser("area")
    p_area.add_argument("--no-fmax", action="store_true", help="skip ECP5 place and route")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    {"packet": packet, "rate": rate, "latency": latency, "flood": flood, "scaling": scaling, "area": area}[
        args.part
    ](args)


if __name__ == "__main__":
    main()
