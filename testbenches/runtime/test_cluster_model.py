"""The cluster's cycle model (:mod:`golden.runtime.cluster_model`): its recurrence on streams whose
count follows from the pipeline's structure, its two entry points on one job, what it refuses, and
its agreement with the RTL points ``bench_runtime scaling`` recorded in ``docs/data`` (no simulation)."""

import json

import pytest

from golden.aggregate.pipeline import HAZARD_WINDOW
from golden.runtime.cluster_model import (
    PIPELINE_PACKETS,
    START_LATENCY,
    graph_matrix,
    node_cycles,
    predict,
    predict_workload,
)
from golden.runtime.workload import GRAPHS, build_job
from scripts.flow.docs import DATA

# docs/runtime.md's scaling tables (the bench writes them; the fast suite only reads them).
SCALING = DATA / "runtime-scaling.json"
PROJECTIONS = DATA / "runtime-scaling-model.json"
TOLERANCE = 0.03


def _table(path):
    spec = json.loads(path.read_text())
    return [dict(zip(spec["headers"], row, strict=True)) for row in spec["rows"]]


def test_distinct_rows_stream_back_to_back():
    """No row repeats: the kernel takes a task every cycle, the last ``tasks - 1`` cycles after the first."""
    stream = [[4 * k + bank for bank in range(4)] for k in range(50)]
    assert node_cycles(stream) == 49 + START_LATENCY
    assert node_cycles([]) == 0


@pytest.mark.parametrize("tasks", [1, PIPELINE_PACKETS + 1, 40])
def test_one_row_issues_once_per_window(tasks):
    """One row in every task: H issues it once per window, and the kernel takes task k only when H
    issues task k - P (the stages between them are full); the last P tasks' stalls are not counted."""
    stream = [[0]] * tasks
    last = tasks - 1
    taken = last if last < PIPELINE_PACKETS else PIPELINE_PACKETS + (last - PIPELINE_PACKETS) * HAZARD_WINDOW
    assert node_cycles(stream) == taken + START_LATENCY


def test_hazards_never_make_a_stream_faster():
    rows = [[4 * (k % 7) + bank for bank in range(4)] for k in range(60)]
    spread = [[4 * k + bank for bank in range(4)] for k in range(60)]
    assert node_cycles(rows) > node_cycles(spread) == 59 + START_LATENCY


def test_entry_points_agree_on_the_cluster_job():
    """:func:`predict` (cut for any node count) and :func:`predict_workload` (the job the cluster
    runs) give the same counts; every task is counted once; the cluster's count is the largest node's."""
    matrix = graph_matrix(GRAPHS["small"])
    workload = build_job(nodes=4, graph="small", placement="home", replicated=True)[2]
    direct, cut = predict(matrix, 4), predict_workload(workload)
    assert direct.node_cycles == cut.node_cycles
    assert cut.tasks == [len(entries) for entries in workload.spawn]
    assert sum(direct.items) == matrix.nnz
    assert direct.cycles == max(direct.node_cycles)
    assert predict(matrix, 32).nodes == 32  # past the 16 nodes a packet names


def test_refuses_what_it_does_not_model():
    with pytest.raises(ValueError, match="replicated"):
        predict_workload(build_job(nodes=2, graph="small", placement="home")[2])
    with pytest.raises(ValueError, match="home"):
        predict_workload(build_job(nodes=2, graph="small", placement="next", replicated=True)[2])
    with pytest.raises(ValueError, match="power of two"):
        predict(graph_matrix(GRAPHS["small"]), 3)


def test_recorded_rtl_points_within_tolerance():
    """Every RTL point of the scaling table is within 3 % of the model (cluster and every node), and
    the table holds the points measured: Cora- and Citeseer-like at 1, 2, 4 and 8 nodes, Cora-like
    at 16."""
    rows = [row for row in _table(SCALING) if row["cycles, model"] != ""]
    assert rows, "no modelled RTL point in the table"
    for row in rows:
        error = abs(row["cycles, model"] - row["cycles, RTL (on chip)"]) / row["cycles, RTL (on chip)"]
        assert error <= TOLERANCE, row
        assert abs(float(row["model error, worst node"].split()[0])) <= 100 * TOLERANCE, row
    points = {(row["graph"], row["nodes"]) for row in rows}
    assert {(graph, nodes) for graph in ("cora", "citeseer") for nodes in (1, 2, 4, 8)} <= points, points
    assert ("cora", 16) in points


def test_recorded_model_is_the_current_model():
    """The projection table is this model's (checked on two rows of the small graph, cheap to cut)."""
    rows = {row["nodes"]: row for row in _table(PROJECTIONS) if row["graph"] == "small"}
    matrix = graph_matrix(GRAPHS["small"])
    for nodes in (4, 64):
        assert predict(matrix, nodes).cycles == rows[nodes]["cycles, model"], rows[nodes]


def test_projection_meets_the_target():
    """Pubmed-like at 16 nodes: at least 10 times the 1-node cluster (model); every row the RTL did
    not measure is labelled a projection."""
    rows = _table(PROJECTIONS)
    pubmed = {row["nodes"]: row for row in rows if row["graph"] == "pubmed"}
    assert float(pubmed[16]["speed-up over 1 node, model"]) >= 10
    measured = {(row["graph"], row["nodes"]) for row in _table(SCALING) if row["cycles, model"] != ""}
    for row in rows:
        assert (row["RTL point"] == "projection") == ((row["graph"], row["nodes"]) not in measured), row
