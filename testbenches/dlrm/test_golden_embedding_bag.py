"""golden.dlrm.embedding_bag against oracles it did not write: torch.nn.EmbeddingBag, torch.optim, float64.

Without torch the float64 checks and the hand-worked cases still run; on CI a missing torch fails
(``knobs.oracle``).
"""

import numpy as np
import pytest

from golden.dlrm.embedding_bag import (
    JaggedBatch,
    gamma,
    interleaved_lookups,
    pool,
    pool_bound,
    row_gradient_bound,
    row_gradients,
    rowwise_adagrad_rows,
    rowwise_multiplier_error,
    sgd_rows,
    shards,
    update_bound,
)
from golden.dlrm.reduction import WORDS, reduce_gradients
from scripts.sim import knobs

TORCH = "torch is the oracle of the pooled sums and the sparse row updates: pip install torch"
DIM = 32


def _batch(rng, *, tables, batch, rows, max_bag=6):
    bags = [[list(rng.integers(0, rows, rng.integers(0, max_bag + 1))) for _ in range(batch)]
            for _ in range(tables)]
    return JaggedBatch.from_bags(bags)


def _weights(rng, tables, rows, dim=DIM):
    return [rng.standard_normal((rows, dim)).astype(np.float32) for _ in range(tables)]


def _cases(salt, count):
    rng = knobs.rng(salt)
    for _ in range(knobs.vectors(count)):
        tables, batch, rows = int(rng.integers(1, 4)), int(rng.integers(1, 12)), int(rng.integers(4, 40))
        yield rng, tables, batch, rows


def test_jagged_batch_layout_and_refusals():
    batch = JaggedBatch.from_bags([[[3, 1], [], [2]], [[0], [0, 0, 4], [1]]])
    assert batch.batch == 3 and batch.tables == 2
    assert list(batch.offsets) == [0, 2, 2, 3, 4, 7, 8]
    assert list(batch.bag(1, 1)) == [0, 0, 4] and list(batch.bag(0, 1)) == []
    with pytest.raises(ValueError, match="tables \\* batch \\+ 1"):
        JaggedBatch(np.arange(3), np.array([0, 1, 3]), tables=3)
    with pytest.raises(ValueError, match="rise from 0"):
        JaggedBatch(np.arange(3), np.array([0, 2, 1, 3]), tables=1)
    with pytest.raises(ValueError, match="rise from 0"):
        JaggedBatch(np.arange(3), np.array([0, 1, 2]), tables=2)
    with pytest.raises(ValueError, match="integers"):
        JaggedBatch(np.array([0.5]), np.array([0, 1]), tables=1)
    assert shards(10, 4) == [(0, 2), (2, 5), (5, 7), (7, 10)]
    with pytest.raises(ValueError, match="nodes"):
        shards(4, 0)


def test_pool_by_hand_order_bad_index_and_empty_bag():
    w = np.zeros((4, 16), np.float32)
    w[0, 0], w[1, 0], w[2, 0] = 2.0 ** 24, 1.0, 1.0
    w[3, 1] = -0.0
    # Left to right: (2^24 + 1) rounds to 2^24 (tie, even), + 1 again: 2^24. Right to left gives 2^24 + 2.
    batch = JaggedBatch.from_bags([[[0, 1, 2], [2, 1, 0], [], [3], [9, 1, -1]]])
    pooled, bad = pool([w], batch)
    assert pooled[0, 0, 0] == 2.0 ** 24 and pooled[0, 1, 0] == 2.0 ** 24 + 2
    assert not pooled[0, 2].any() and np.signbit(pooled[0, 3, 1])  # the first row's bits pass unchanged
    assert np.array_equal(pooled[0, 4], w[1]) and bad == 2
    with pytest.raises(ValueError, match="multiple of 16"):
        pool([np.zeros((4, 10), np.float32)], batch)
    with pytest.raises(ValueError, match="1 weight tables for a batch of 2"):
        pool([w], JaggedBatch.from_bags([[[0]], [[1]]]))


def test_pool_within_float64_bound():
    for rng, tables, batch_size, rows in _cases(1, 40):
        batch = _batch(rng, tables=tables, batch=batch_size, rows=rows)
        weights = _weights(rng, tables, rows)
        pooled, bad = pool(weights, batch)
        bound = pool_bound(weights, batch) / 2  # one float32 sum against the exact one
        for t in range(tables):
            for b in range(batch_size):
                exact = np.asarray(weights[t], np.float64)[batch.bag(t, b)].sum(axis=0)
                assert np.all(np.abs(pooled[t, b] - exact) <= bound[t, b]), knobs.describe()
        assert bad == 0


def test_pool_matches_torch_embedding_bag():
    torch = knobs.oracle("torch", TORCH)
    for rng, tables, batch_size, rows in _cases(2, 30):
        batch = _batch(rng, tables=tables, batch=batch_size, rows=rows, max_bag=40)
        weights = _weights(rng, tables, rows)
        pooled, _ = pool(weights, batch)
        bound = pool_bound(weights, batch)
        for t in range(tables):
            bag = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(weights[t]), mode="sum",
                                                        include_last_offset=True)
            values, offsets = batch.table(t)
            theirs = bag(torch.from_numpy(values), torch.from_numpy(offsets)).numpy()
            gap = np.abs(pooled[t].astype(np.float64) - theirs)
            assert np.all(gap <= bound[t]), f"table {t}: largest gap {gap.max()}; {knobs.describe()}"


def _torch_step(torch, weights, batch, grad_pooled, make_optimizer):
    """Torch's sparse EmbeddingBag backward and optimizer step, table by table: the new tables.

    The sparse gradient is coalesced first (torch sums each row's entries), so the step applies one
    summed gradient per row, as the golden does; torch's SGD would otherwise apply the entries one by
    one, each rounded (its AdaGrad coalesces by itself).
    """
    out = []
    for t, w in enumerate(weights):
        bag = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(w.copy()), mode="sum", freeze=False,
                                                    sparse=True, include_last_offset=True)
        values, offsets = batch.table(t)
        pooled = bag(torch.from_numpy(values), torch.from_numpy(offsets))
        (pooled * torch.from_numpy(grad_pooled[t])).sum().backward()
        bag.weight.grad = bag.weight.grad.coalesce()
        optimizer = make_optimizer([bag.weight])
        optimizer.step()
        state = optimizer.state[bag.weight]
        out.append((bag.weight.detach().numpy().copy(),
                    state["sum"].to_dense().numpy().copy() if "sum" in state else None))
    return out


def test_row_gradients_follow_the_nodes_and_capacity_order():
    """Any node count and capacity: within the float64 bound, and 1 node, no overflow, equals a plain fold."""
    for rng, tables, batch_size, rows in _cases(3, 30):
        batch = _batch(rng, tables=tables, batch=batch_size, rows=rows)
        grad = rng.standard_normal((tables, batch_size, DIM)).astype(np.float32)
        nodes, capacity = int(rng.integers(1, 5)), int(rng.integers(1, 9))
        for t in range(tables):
            ours = row_gradients(batch, grad, t, rows=rows, nodes=nodes, capacity=capacity)
            bound = row_gradient_bound(batch, grad, t, rows=rows)
            exact = {}
            for b in range(batch_size):
                for row in batch.bag(t, b):
                    exact[int(row)] = exact.get(int(row), 0.0) + grad[t, b].astype(np.float64)
            assert sorted(ours) == sorted(exact)
            for row, g in ours.items():
                assert np.all(np.abs(g - exact[row]) <= bound[row] / 2), knobs.describe()
            plain = {}
            for b in range(batch_size):
                for row in batch.bag(t, b):
                    row = int(row)
                    plain[row] = grad[t, b].copy() if row not in plain else plain[row] + grad[t, b]
            single = row_gradients(batch, grad, t, rows=rows)
            assert all(np.array_equal(single[r].view(np.uint32), plain[r].view(np.uint32)) for r in plain)


def test_sgd_matches_torch_sparse_sgd():
    torch = knobs.oracle("torch", TORCH)
    lr = 0.05
    for rng, tables, batch_size, rows in _cases(4, 20):
        batch = _batch(rng, tables=tables, batch=batch_size, rows=rows)
        weights = _weights(rng, tables, rows)
        grad = rng.standard_normal((tables, batch_size, DIM)).astype(np.float32)
        theirs = _torch_step(torch, weights, batch, grad, lambda p: torch.optim.SGD(p, lr=lr))
        for t in range(tables):
            g = row_gradients(batch, grad, t, rows=rows, nodes=2)
            ours, bad = sgd_rows(weights[t], g, lr=lr)
            assert bad == 0
            bounds = row_gradient_bound(batch, grad, t, rows=rows)
            untouched = sorted(set(range(rows)) - set(g))
            assert np.array_equal(ours[untouched].view(np.uint32), weights[t][untouched].view(np.uint32))
            for row in g:
                limit = update_bound(ours[row], g[row], bounds[row], multiplier=lr)
                gap = np.abs(ours[row].astype(np.float64) - theirs[t][0][row])
                assert np.all(gap <= limit), f"row {row}: largest gap {gap.max()}; {knobs.describe()}"


def test_rowwise_adagrad_matches_torch_adagrad_on_word_constant_gradients():
    """Row-wise AdaGrad equals torch's element-wise AdaGrad when every word of a row's gradient is equal."""
    torch = knobs.oracle("torch", TORCH)
    lr, eps = 0.1, 1e-8
    for rng, tables, batch_size, rows in _cases(5, 20):
        batch = _batch(rng, tables=tables, batch=batch_size, rows=rows)
        weights = _weights(rng, tables, rows)
        grad = np.repeat(rng.standard_normal((tables, batch_size, 1)), DIM, axis=2).astype(np.float32)
        theirs = _torch_step(torch, weights, batch, grad,
                             lambda p: torch.optim.Adagrad(p, lr=lr, eps=eps, initial_accumulator_value=0.0))
        for t in range(tables):
            g = row_gradients(batch, grad, t, rows=rows, nodes=3)
            ours, h, bad = rowwise_adagrad_rows(weights[t], np.zeros(rows, np.float32), g, lr=lr, eps=eps)
            assert bad == 0
            bounds = row_gradient_bound(batch, grad, t, rows=rows)
            for row in g:
                error = rowwise_multiplier_error(g[row], bounds[row], h[row])
                multiplier = lr / (np.sqrt(np.float64(h[row])) + eps)
                limit = update_bound(ours[row], g[row], bounds[row], multiplier=multiplier,
                                     multiplier_error=error)
                gap = np.abs(ours[row].astype(np.float64) - theirs[t][0][row])
                assert np.all(gap <= limit), f"row {row}: largest gap {gap.max()}; {knobs.describe()}"
                assert abs(h[row] - theirs[t][1][row, 0]) <= 2 * error * h[row], knobs.describe()


def test_rowwise_adagrad_by_float64_transcription_and_bad_rows():
    rng = knobs.rng(6)
    lr, eps = np.float32(0.01), np.float32(1e-6)
    for _ in range(knobs.vectors(200)):
        w = rng.standard_normal((3, DIM)).astype(np.float32)
        h0 = rng.random(3).astype(np.float32)
        g = {1: rng.standard_normal(DIM).astype(np.float32), 2: rng.standard_normal(DIM).astype(np.float32)}
        ours, h, bad = rowwise_adagrad_rows(w, h0, g, lr=lr, eps=eps)
        assert bad == 0 and np.array_equal(ours[0], w[0]) and h[0] == h0[0]
        for row, grad in g.items():
            g64 = grad.astype(np.float64)
            h64 = np.float64(h0[row]) + np.sum(g64 * g64) / DIM
            w64 = w[row] - lr / (np.sqrt(h64) + eps) * g64
            assert abs(h[row] - h64) <= (gamma(DIM) + 2 * 2.0 ** -24) * h64, knobs.describe()
            error = (gamma(DIM) + 6 * 2.0 ** -24)
            limit = update_bound(ours[row], grad, 0.0, multiplier=lr / (np.sqrt(h64) + eps),
                                 multiplier_error=error)
            assert np.all(np.abs(ours[row] - w64) <= limit), knobs.describe()
    g = {0: np.full(DIM, np.nan, np.float32), 1: np.ones(DIM, np.float32),
         2: np.full(DIM, np.inf, np.float32)}
    w = np.ones((3, DIM), np.float32)
    ours, h, bad = rowwise_adagrad_rows(w, np.zeros(3, np.float32), g, lr=1.0, eps=0.0)
    assert bad == 2 and np.array_equal(ours[[0, 2]], w[[0, 2]]) and list(h[[0, 2]]) == [0.0, 0.0]
    assert np.all(ours[1] == 0.0) and h[1] == 1.0  # w - 1 / (sqrt(1) + 0) * 1
    ours, bad = sgd_rows(w, g, lr=0.5)
    assert bad == 2 and np.array_equal(ours[[0, 2]], w[[0, 2]]) and np.all(ours[1] == 0.5)


def test_interleaved_issue_order_pools_as_a_keyed_reduction():
    """Pooling is the loss reduction keyed by (bag, line) over the interleaved order: same bits."""
    assert list(interleaved_lookups(JaggedBatch.from_bags([[[5, 6, 7], [8], [], [9, 10]]]), group=2)) == \
        [(0, 5), (1, 8), (0, 6), (0, 7), (3, 9), (3, 10)]
    with pytest.raises(ValueError, match="group"):
        list(interleaved_lookups(JaggedBatch.from_bags([[[1]]]), group=0))
    for rng, tables, batch_size, rows in _cases(7, 40):
        batch = _batch(rng, tables=tables, batch=batch_size, rows=rows)
        weights = _weights(rng, tables, rows)
        group = int(rng.integers(1, 9))
        lines = DIM // WORDS
        order = list(interleaved_lookups(batch, group=group))
        assert sorted(order) == sorted((t * batch_size + b, int(r)) for t in range(tables)
                                       for b in range(batch_size) for r in batch.bag(t, b))
        sums = []
        for first in range(0, tables * batch_size, group):  # a flush at the end of every group
            stream = [((slot, line), weights[slot // batch_size][row].view(np.uint32)[line * WORDS:][:WORDS])
                      for slot, row in order if first <= slot < first + group for line in range(lines)]
            emitted, overflows = reduce_gradients(stream, capacity=group * lines)
            sums.extend(emitted)
            assert overflows == 0
        pooled, _ = pool(weights, batch)
        got = dict(sums)
        assert len(got) == len(sums)  # no bag was split by a flush
        for (slot, line), words in got.items():
            expected = pooled[slot // batch_size, slot % batch_size, line * WORDS:(line + 1) * WORDS]
            assert np.array_equal(words, expected.view(np.uint32)), knobs.describe()
