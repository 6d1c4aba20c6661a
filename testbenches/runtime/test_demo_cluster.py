"""``neartrain demo cluster --graph FILE``: a graph of one's own, saved with ``scipy.sparse.save_npz``;
and ``--layers 2``, the two-layer GCN.

Fast (no simulation): a file the cluster cannot take is refused in one line with exit status 2
before any build; a file holding the synthetic graph cuts exactly the synthetic graph's job;
``--layers 2`` with a layer-1 option is refused. Slow: the whole demo on a small graph from a
file, 2 nodes, bit-exact in RTL simulation; the two-layer GCN on the small graph at 2 nodes.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from golden.aggregate.graphs import generate
from golden.runtime.workload import GRAPHS, build_job
from scripts.cli.main import main
from scripts.demo import cluster as demo_cluster


def refusal(capsys, path, nodes=2):
    """The CLI's one-line refusal of ``--graph path`` (exit status 2, nothing on stdout)."""
    assert main(["demo", "cluster", "--nodes", str(nodes), "--graph", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def test_non_square_matrix_is_refused(tmp_path, capsys):
    path = tmp_path / "wide.npz"
    sp.save_npz(path, sp.random(30, 40, density=0.1, format="csr", random_state=1))
    assert "must be square, not 30 x 40" in refusal(capsys, path)


def test_matrix_too_large_names_the_memory_and_the_shortfall(tmp_path, capsys):
    # 70,000 rows: a node's data memory holds 1,024 ranges of 60 lines = 61,440 lines.
    path = tmp_path / "large.npz"
    sp.save_npz(path, sp.eye(70_000, format="csr", dtype=np.float32))
    line = refusal(capsys, path)
    assert "data memory is short by 8560 lines" in line and "61440" in line, line


@pytest.mark.parametrize("content", [b"row,col\n0,1\n", None])
def test_file_that_is_not_a_sparse_npz_is_refused(tmp_path, capsys, content):
    path = tmp_path / "graph.npz"
    if content is None:
        np.savez(path, dense=np.ones((4, 4)))  # an .npz, but of a dense array
    else:
        path.write_bytes(content)
    assert "not a SciPy sparse matrix saved with scipy.sparse.save_npz" in refusal(capsys, path)


def test_spawn_memory_shortfall_is_named_with_its_node():
    capacity = {"lines": 61440, "ranges": 1024, "block": 60, "spawn": 65536}
    assert demo_cluster.shortfall(61440, [65536, 65536], capacity) is None
    message = demo_cluster.shortfall(100, [10, 65540], capacity)
    assert message.startswith("Spawn_MEM is short by 4 entries: node 1 needs 65540"), message


def test_file_graph_cuts_the_synthetic_graphs_job(tmp_path):
    """The 'small' graph saved to a file and loaded again gives the same tasks, data and layout."""
    path = tmp_path / "small.npz"
    sp.save_npz(path, generate(GRAPHS["small"], seed=1))
    demo_cluster.check_arguments(nodes=2, graph=str(path), features=4, placement="next", seed=1)
    _, dense, workload = build_job(nodes=2, adjacency=demo_cluster.load_graph(path), seed=1)
    _, dense_synthetic, synthetic = build_job(nodes=2, graph="small", seed=1)
    assert np.array_equal(dense, dense_synthetic)
    assert workload.spawn == synthetic.spawn and workload.memory == synthetic.memory
    assert np.array_equal(workload.layout.part_row, synthetic.layout.part_row)


@pytest.mark.slow
def test_demo_runs_a_graph_from_a_file(tmp_path, capsys):
    """``neartrain demo cluster --graph FILE.npz --nodes 2``: bit-exact, within the float64 bound,
    counters equal to the golden's (exit status 0 only then)."""
    rng = np.random.default_rng(5)
    n = 300
    adjacency = sp.random(n, n, density=0.01, format="csr", random_state=5)
    adjacency.data = rng.uniform(0.5, 2.0, adjacency.nnz).astype(np.float32)
    adjacency = adjacency.tolil()
    adjacency[7, :] = 1.0  # a hub row, split into parts
    path = tmp_path / "own.npz"
    sp.save_npz(path, sp.csr_matrix(adjacency))
    assert main(["demo", "cluster", "--nodes", "2", "--graph", str(path)]) == 0
    report = capsys.readouterr().out
    assert "bit-exact" in report and "within" in report and "equal" in report, report


def test_layers_2_refuses_the_aggregation_options(capsys):
    """``--layers 2`` always replicates B and spawns at home: the layer-1 options are refused (exit 2)."""
    assert main(["demo", "cluster", "--layers", "2", "--nodes", "2", "--speedup"]) == 2
    assert "--layers 2 always replicates B" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_runs_the_two_layer_gcn(capsys):
    """``neartrain demo cluster --layers 2 --nodes 2`` on the small graph: every stage bit-exact with
    the golden cluster, the combinations, hidden layer and logits with gcn_forward, the counters
    equal, the logits within gcn_bound (exit status 0 only then). Slow: its cluster build (with the
    GEMM unit) is one no other test shares."""
    assert main(["demo", "cluster", "--layers", "2", "--nodes", "2"]) == 0
    report = capsys.readouterr().out
    assert "logits bit-exact" in report and "within gcn_bound" in report and "PASS" in report, report
    assert "layer 1" in report and "layer 2" in report, report
