"""golden.dlrm against oracles it did not write: OrderedDict LRU, numpy.unique, SoftFloat and float64."""

import numpy as np
import pytest

from golden.dlrm import DATASETS, LruCache, add_words, lookup_trace, reduce_gradients, segments, zipf_ranks
from golden.dlrm.reduction import CANONICAL_NAN_BITS, WORDS
from scripts.sim import knobs
from testbenches.collective.tb import random_words, softfloat_add
from testbenches.dlrm.tb import ordered_dict_lru


@pytest.mark.parametrize("ways", [1, 2, 4, 8])
@pytest.mark.parametrize("law", ["zipf", "uniform"])
def test_lru_matches_an_ordered_dict(ways, law):
    rng = knobs.rng(ways)
    count = knobs.vectors(20000)
    if law == "zipf":
        rows = lookup_trace("criteo-kaggle", samples=count // 26 + 1, seed=knobs.seed() + ways,
                            rows=26 * 5000).ravel()[:count]
    else:
        rows = rng.integers(0, 40 * ways * 16, count)
    cache = LruCache(sets=16, ways=ways)
    ours = cache.run(rows)
    expected = ordered_dict_lru(rows, sets=16, ways=ways)
    mismatch = np.flatnonzero(ours != expected)
    assert mismatch.size == 0, f"first mismatch at lookup {mismatch[:1]}; {knobs.describe()}"
    assert cache.hits == int(expected.sum()) and cache.misses == count - cache.hits
    # Ages stay a permutation of 0 .. ways - 1 in every set.
    assert all(sorted(ages) == list(range(ways)) for ages in cache.age)


def test_lru_rejects_bad_shapes():
    with pytest.raises(ValueError, match="sets"):
        LruCache(sets=12, ways=2)
    with pytest.raises(ValueError, match="ways"):
        LruCache(sets=4, ways=0)


@pytest.mark.parametrize("capacity,positions", [(1000, 1000), (8, 64), (3, 5), (64, 16)])
def test_dedupe_segments_match_numpy_unique(capacity, positions):
    rng = knobs.rng(capacity + positions)
    rows = rng.zipf(1.3, knobs.vectors(600)) % 200
    cut, overflows = segments(rows, capacity=capacity, positions=positions)
    start = 0
    for unique, inverse in cut:
        part = rows[start:start + len(inverse)]
        start += len(inverse)
        values, first, inv = np.unique(part, return_index=True, return_inverse=True)
        # numpy sorts the unique rows; ours keep the order of first appearance.
        order = np.argsort(first)
        assert list(values[order]) == unique, knobs.describe()
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        assert list(rank[inv.ravel()]) == inverse, knobs.describe()
        assert len(unique) <= capacity and len(inverse) <= positions
    assert start == rows.size and overflows == len(cut) - 1
    # Only a full table ends a segment early.
    for unique, inverse in cut[:-1]:
        assert len(unique) == capacity or len(inverse) == positions


def test_dedupe_all_duplicates_and_all_unique():
    cut, overflows = segments([7] * 50, capacity=4, positions=64)
    assert cut == [([7], [0] * 50)] and overflows == 0
    cut, overflows = segments(range(10), capacity=4, positions=64)
    assert [unique for unique, _ in cut] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] and overflows == 2


def test_reduction_chains_softfloat_adds_in_arrival_order():
    rng = knobs.rng(7)
    count = knobs.vectors(300)
    keys = rng.integers(0, 12, count)
    grads = random_words(rng, (count, WORDS), specials=0.05)
    out, overflows = reduce_gradients(zip(keys.tolist(), grads, strict=True), capacity=5)
    expected, table, cuts = [], {}, 0
    for key, words in zip(keys.tolist(), grads, strict=True):
        if key not in table and len(table) == 5:
            expected.extend(table.items())
            table, cuts = {}, cuts + 1
        if key in table:
            table[key] = [softfloat_add(a, b) for a, b in zip(table[key], words, strict=True)]
        else:
            table[key] = [int(w) for w in words]
    expected.extend(table.items())
    assert overflows == cuts
    assert [(k, [int(w) for w in s]) for k, s in out] == expected, knobs.describe()


def test_reduction_is_within_the_float64_bound():
    """|fp32 chain - exact| <= (n-1) u sum|g| / (1 - (n-1) u) (Higham, recursive summation)."""
    rng = knobs.rng(8)
    n = 40
    grads = random_words(rng, (n, WORDS), specials=0.0)
    (key, total), = reduce_gradients([(3, g) for g in grads], capacity=2)[0]
    exact = grads.view(np.float32).astype(np.float64).sum(axis=0)
    u = 2.0 ** -24
    bound = (n - 1) * u * np.abs(grads.view(np.float32).astype(np.float64)).sum(axis=0) / (1 - (n - 1) * u)
    assert key == 3 and np.all(np.abs(total.view(np.float32).astype(np.float64) - exact) <= bound)


def test_add_words_is_exact_on_specials():
    a = np.array([0x7F800000, 0x80000000, 0x7F800001], np.uint32)
    b = np.array([0xFF800000, 0x80000000, 0x3F800000], np.uint32)
    assert list(add_words(a, b)) == [CANONICAL_NAN_BITS, 0x80000000, CANONICAL_NAN_BITS]


def test_traces_have_the_table_shapes_and_are_seeded():
    for name, spec in DATASETS.items():
        trace = lookup_trace(name, samples=50, seed=3)
        assert trace.shape == (50, spec.sparse)
        tables = trace // spec.per_table
        assert np.array_equal(tables, np.broadcast_to(np.arange(spec.sparse), trace.shape)), name
        assert np.array_equal(trace, lookup_trace(name, samples=50, seed=3))
    other = lookup_trace("avazu", samples=50, seed=4)
    assert not np.array_equal(lookup_trace("avazu", samples=50, seed=3), other)
    # The scatter constant is a prime: rank -> row is one to one in every table.
    assert all(40499 % d for d in range(2, 202))
    rows = lookup_trace("avazu", samples=4000, seed=1, rows=21 * 50, alpha=0.5)
    assert np.unique(rows).size == rows.max() - rows.min() + 1 == 21 * 50


@pytest.mark.parametrize("alpha", [0.8, 1.0, 1.2])
def test_zipf_ranks_follow_the_law(alpha):
    """Rank frequencies against the exact bounded Zipf probabilities (chi-square on the top ranks)."""
    n, count = 1000, 200_000
    ranks = zipf_ranks(np.random.default_rng(knobs.seed()), count, n=n, alpha=alpha)
    assert ranks.min() >= 1 and ranks.max() <= n
    # The continuous law puts rank k's mass on [k, k+1): integral of x^-a over it, normalised.
    edges = np.arange(1, n + 2, dtype=np.float64)
    mass = np.log(edges) if alpha == 1.0 else edges ** (1 - alpha) / (1 - alpha)
    p = np.diff(mass)
    p /= p.sum()
    observed = np.bincount(ranks, minlength=n + 1)[1:]
    top = 20
    expected = p[:top] * count
    chi2 = float(((observed[:top] - expected) ** 2 / expected).sum())
    assert chi2 < 60, f"chi2 {chi2:.1f} over {top} ranks; {knobs.describe()}"
    # And the head is heavier than the tail, as a power law's.
    assert observed[0] > observed[9] > observed[99]
