"""The cluster's dense GEMM task (kernel 1) and the two-layer GCN job of :mod:`golden.runtime.gcn`.

No simulation: the GEMM task of :func:`golden.runtime.kernels.execute` against a chain of binary32
multiply-adds written out here (rounded product, then rounded sum, in increasing ``k``), its
refused slots, and the whole cluster job (spawned per home, B replicated, five kernel runs)
against :func:`golden.aggregate.gcn_forward`, bit for bit, at 1, 2 and 4 nodes.
"""

import numpy as np
import pytest

from golden.aggregate import gcn_forward, gcn_normalise, gcn_weights, generate
from golden.runtime import kernels as gk
from golden.runtime import packet as gp
from golden.runtime.gcn import STAGES, gcn_golden, gcn_job
from golden.runtime.workload import GRAPHS


def chain(a, w):
    """``a @ w`` as the PEs add it: acc = fl(acc + fl(a_k w_k)), k = 0, 1, ..., from +0."""
    out = np.zeros((a.shape[0], w.shape[1]), np.float32)
    for k in range(a.shape[1]):
        out = (out + (a[:, k:k + 1] * w[k:k + 1, :]).astype(np.float32)).astype(np.float32)
    return out


def test_gemm_task_is_in_place_chain_and_refuses_bad_slots():
    rng = np.random.default_rng(3)
    rows, features, k, n = 32, 5, 4, 3
    start = rng.standard_normal((rows, features)).astype(np.float32)
    w = rng.standard_normal((k, features)).astype(np.float32)
    memory = {20 + index: gk.words_line(w[index].view(np.uint32)) for index in range(k)}
    value = gk.gemm_value(k, n)
    task = gp.Packet(gp.TASK, task_id=gk.GEMM, slots=(
        gp.Item(9, 20, value), gp.Item(rows, 20, value), gp.Item(2, 20, value), gp.Item(9, 20, value)))
    bad_shape = gp.Packet(gp.TASK, task_id=gk.GEMM, slots=(
        gp.Item(1, 20, gk.gemm_value(features + 1, n)), gp.Item(1, 20, gk.gemm_value(k, 0)),
        gp.Item(1, rows - k + 1, value), None))
    errors = []
    out = gk.execute([[task, bad_shape]], memory, rows=rows, features=features, out=[start.view(np.uint32)],
                     errors=errors)[0].view(np.float32)
    expected = chain(start[[9, 2], :k], w[:, :n])
    assert np.array_equal(out[9, :n].view(np.uint32), expected[0].view(np.uint32))
    assert np.array_equal(out[2, :n].view(np.uint32), expected[1].view(np.uint32))
    assert not out[[9, 2], n:].any(), "the words past N must be zero"
    untouched = [row for row in range(rows) if row not in (2, 9)]
    assert np.array_equal(out[untouched].view(np.uint32), start[untouched].view(np.uint32))
    assert errors == [{"range_errors": 4, "bank_errors": 0}]


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_cluster_gcn_job_equals_gcn_forward(nodes):
    normalised = gcn_normalise(generate(GRAPHS["small"], seed=2))
    rng = np.random.default_rng(2)
    x = (rng.random((normalised.shape[0], 4)) < 0.5).astype(np.float32)
    w1, w2 = gcn_weights(4, 4, 4, seed=2)
    forward = gcn_forward(normalised, x, w1, w2)
    job = gcn_job(normalised, x, w1, w2, nodes=nodes)
    outputs, results = gcn_golden(job)
    assert [stage for stage, _, _ in STAGES] == list(outputs)
    for stage, field in (("gemm1", "xw"), ("relu", "hidden"), ("gemm2", "hw"), ("aggregate2", "logits")):
        got = job.rows(outputs[stage])
        assert np.array_equal(got.view(np.uint32), getattr(forward, field).view(np.uint32)), stage
    for stage, result in results.items():
        assert result.order_exact, stage
        for node, counts in enumerate(result.counters):
            # Tasks spawned at home and B replicated: nothing crosses the network.
            assert counts["tx_task"] == counts["tx_rdma"] == counts["tx_data"] == 0, (stage, node)
            assert counts["issued"] == job.windows[stage][node][1] > 0, (stage, node)
