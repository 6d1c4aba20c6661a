"""golden.dlrm.graph_batches (Algorithm 1): the seed's Figure 5-7 by hand, a refill case by hand,
an incremental reference written from the pseudo-code, the regrouping invariant and determinism."""

import heapq
from collections import Counter

import numpy as np
import pytest

from golden.dlrm import LruCache, graph_batches, lookup_trace
from scripts.sim import knobs
from testbenches.dlrm.tb import ordered_dict_lru

# Figure 5-7: table 0 row 0 (T0i0) is looked up by samples 0, 1, 4, 5, 7 and table 1 row 0 (here
# global row 10, T1i0) by samples 0, 1, 3, 4; every other row by one sample.
FIGURE_5_7 = [(0, 10), (0, 10), (1, 11), (2, 10), (0, 10), (0, 12), (3, 13), (0, 14)]


def test_figure_5_7_by_hand():
    order, waits = graph_batches(FIGURE_5_7, mini_batch=3, pool=8, threshold=2)
    # Step 0: edges T0i0 (degree 5) and T1i0 (4); samples 0, 1, 4 score 2 (the seed's mini-batch).
    # Step 1: pool 2, 3, 5, 6, 7; row 0 (degree 2: samples 5, 7), then row 1 (degree 1, lowest id:
    # sample 2); scores 1 for 2, 5, 7. Step 2: what is left, 3 and 6.
    assert order.tolist() == [0, 1, 4, 2, 5, 7, 3, 6]
    assert waits.tolist() == [0, 0, 1, 2, 0, 1, 2, 1]


def test_refill_and_refresh_by_hand():
    rows = [[5], [7], [7], [5], [5], [9]]
    order, waits = graph_batches(rows, mini_batch=1, pool=3, threshold=1)
    # Pools: {0,1,2} row 7 -> 1; {0,2,3} row 5 -> 0; {2,3,4} row 5 -> 3 (older than 4);
    # {2,4,5} all degree 1, lowest row 5 -> 4; {2,5} lowest row 7 -> 2; {5} -> 5.
    assert order.tolist() == [1, 0, 3, 4, 2, 5]
    assert waits.tolist() == [1, 0, 4, 1, 1, 2]
    # max_wait=2: at step 2 sample 2 has waited 2, so {2,3,4} drains (3, 4, 2) before 5 is loaded.
    order, waits = graph_batches(rows, mini_batch=1, pool=3, threshold=1, max_wait=2)
    assert order.tolist() == [1, 0, 3, 4, 2, 5]
    assert waits.tolist() == [1, 0, 4, 1, 1, 0]


def incremental_reference(trace, *, mini_batch, pool, threshold, max_wait=None):
    """Algorithm 1 as its pseudo-code keeps it: edge counters and edge-to-sample sets updated on
    every load (line 9) and deletion (line 24), and a heap as the priority queue (line 13)."""
    counter, members = Counter(), {}
    pooled, entered, order, waits = [], {}, [], {}
    loaded = step = 0
    draining = False
    while True:
        while not draining and len(pooled) < pool and loaded < len(trace):
            pooled.append(loaded)
            entered[loaded] = step
            for row in set(trace[loaded]):
                counter[row] += 1
                members.setdefault(row, set()).add(loaded)
            loaded += 1
        if not pooled:
            break
        draining = draining or (max_wait is not None and any(step - entered[s] >= max_wait for s in pooled))
        popular = sorted(counter, key=lambda row: (-counter[row], row))[:threshold]
        score = Counter(sample for row in popular for sample in members[row])
        queue = [(-score[sample], sample) for sample in pooled]
        heapq.heapify(queue)
        batch = [heapq.heappop(queue)[1] for _ in range(min(mini_batch, len(queue)))]
        for sample in batch:
            pooled.remove(sample)
            waits[sample] = step - entered[sample]
            for row in set(trace[sample]):
                counter[row] -= 1
                members[row].discard(sample)
                if not counter[row]:
                    del counter[row], members[row]
        order += batch
        draining = draining and bool(pooled)
        step += 1
    return order, [waits[sample] for sample in range(len(trace))]


def shape(mini_batch, pool, threshold, max_wait=None):
    return {"mini_batch": mini_batch, "pool": pool, "threshold": threshold, "max_wait": max_wait}


def named(config):
    return "-".join(f"{key}{value}" for key, value in config.items())


@pytest.mark.parametrize("config", [shape(4, 16, 3), shape(8, 40, 20), shape(5, 23, 1, 3), shape(6, 6, 4),
                                    shape(3, 30, 50, 0)], ids=named)
def test_matches_the_incremental_reference(config):
    rng = knobs.rng(config["pool"] + config["threshold"])
    # Multi-hot samples, some looking a row up twice (it counts once towards the edge degree).
    trace = (rng.zipf(1.4, (knobs.vectors(150), 5)) % 60).astype(np.int64)
    order, waits = graph_batches(trace, **config)
    expected = incremental_reference(trace.tolist(), **config)
    assert (order.tolist(), waits.tolist()) == expected, knobs.describe()


@pytest.mark.parametrize("config", [shape(16, 128, 8), shape(16, 128, 8, 4), shape(7, 7, 3)], ids=named)
def test_batching_only_regroups_lookups(config):
    mini_batch, pool, max_wait = config["mini_batch"], config["pool"], config["max_wait"]
    trace = lookup_trace("avazu", samples=knobs.vectors(500), seed=knobs.seed(), rows=21 * 3000)
    order, waits = graph_batches(trace, **config)
    # A permutation of the samples, each with its lookups intact: none dropped, none duplicated.
    assert np.array_equal(np.sort(order), np.arange(len(trace))), knobs.describe()
    assert np.array_equal(np.sort(trace[order].ravel()), np.sort(trace.ravel()))
    steps = -(-len(trace) // mini_batch)
    if pool == mini_batch:
        # Plain batching: mini-batch k holds samples k * mini_batch onwards (in score order).
        for k in range(steps):
            chunk = order[k * mini_batch:(k + 1) * mini_batch]
            first = k * mini_batch
            assert np.array_equal(np.sort(chunk), np.arange(first, first + chunk.size))
        assert not waits.any()
    if max_wait is not None:
        assert waits.max() <= max_wait + -(-pool // mini_batch) - 1, knobs.describe()


def test_deterministic_from_the_seed():
    def run(seed):
        trace = lookup_trace("criteo-kaggle", samples=300, seed=seed, rows=26 * 2000)
        return graph_batches(trace, mini_batch=16, pool=96, threshold=6)[0]

    assert np.array_equal(run(knobs.seed()), run(knobs.seed()))
    assert not np.array_equal(run(knobs.seed()), run(knobs.seed() + 1))


def test_lru_on_graph_batches_matches_an_ordered_dict():
    """The bench's hit rates: the golden LRU on the regrouped trace against an OrderedDict LRU."""
    trace = lookup_trace("criteo-terabyte", samples=knobs.vectors(400), seed=knobs.seed(), rows=26 * 4000)
    order, _ = graph_batches(trace, mini_batch=32, pool=128, threshold=16)
    rows = trace[order].ravel()
    cache = LruCache(sets=32, ways=8)
    assert np.array_equal(cache.run(rows), ordered_dict_lru(rows, sets=32, ways=8)), knobs.describe()


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="2-D integer"):
        graph_batches([1, 2, 3], mini_batch=1, pool=1, threshold=1)
    with pytest.raises(ValueError, match="2-D integer"):
        graph_batches([[1.0]], mini_batch=1, pool=1, threshold=1)
    with pytest.raises(ValueError, match="at least a mini-batch"):
        graph_batches([[1]], mini_batch=4, pool=2, threshold=1)
    with pytest.raises(ValueError, match="threshold"):
        graph_batches([[1]], mini_batch=1, pool=1, threshold=0)
    with pytest.raises(ValueError, match="max_wait"):
        graph_batches([[1]], mini_batch=1, pool=1, threshold=1, max_wait=-1)
    assert graph_batches(np.zeros((0, 3), np.int64), mini_batch=1, pool=1, threshold=1)[0].size == 0
