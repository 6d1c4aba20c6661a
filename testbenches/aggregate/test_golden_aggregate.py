"""golden.aggregate against oracles nobody here wrote: scipy.sparse in float64, NumPy scalar float32.

* ``aggregate`` on the five synthetic benchmark graphs (Boolean and GCN-weighted, F = 16) is
  within :func:`golden.aggregate.aggregate_bound` of ``scipy.sparse`` A @ B in float64, and
  exact where the exact result is representable (small integers);
* the accumulation order is the documented one: a scalar ``numpy.float32`` loop over the
  packets gives the same bits;
* the spawner's invariants (every nonzero once, slot i only rows of bank i, no row twice
  within the hazard window, one read per B bank) and the seed rule's (one 20-column block and
  one nonzero per row mod P class per packet);
* the drop-and-count rules of bad packets, against a straightforward per-slot loop;
* the cycle model on the hazard patterns; the GCN forward pass within its float64 bound.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from golden.aggregate import (
    BENCHMARK_GRAPHS,
    GRAPHS,
    HAZARD_WINDOW,
    TASK_AGGREGATION,
    PacketFormat,
    Packets,
    aggregate,
    aggregate_bound,
    balance_rows,
    cycle_estimate,
    execute,
    gcn_bound,
    gcn_forward,
    gcn_normalise,
    gcn_reference,
    gcn_weights,
    generate,
    graph_statistics,
    issue_cycles,
    seed_rule,
    spawn,
    with_self_loops,
)
from golden.aggregate.pipeline import accumulate_in_order
from scripts.sim import knobs

FEATURES = 16


@pytest.fixture(scope="module", params=BENCHMARK_GRAPHS)
def graph(request):
    return request.param, generate(request.param, seed=knobs.seed())


def _features(rng, rows, width=FEATURES):
    return rng.standard_normal((rows, width)).astype(np.float32)


def test_generator_statistics(graph):
    name, adjacency = graph
    spec = GRAPHS[name]
    stats = graph_statistics(adjacency)
    assert (stats["nodes"], stats["edges"]) == (spec.nodes, spec.edges)
    assert (adjacency != adjacency.T).nnz == 0, "not symmetric"
    assert adjacency.diagonal().sum() == 0, "self-loops"
    assert set(np.unique(adjacency.data)) == {1.0}
    # A power law: the largest degree near d_max, far above the mean.
    assert 0.7 * spec.max_degree <= stats["max_degree"] <= 1.3 * spec.max_degree, stats
    assert stats["max_degree"] > 10 * stats["mean_degree"]
    assert (generate(name, seed=knobs.seed()) != adjacency).nnz == 0, "not deterministic"


@pytest.mark.parametrize("weighted", [False, True], ids=["boolean", "weighted"])
def test_aggregate_within_float64_bound(graph, weighted):
    name, adjacency = graph
    operator = gcn_normalise(adjacency) if weighted else with_self_loops(adjacency)
    features = _features(knobs.rng(7), adjacency.shape[0])
    got = aggregate(operator, features, lanes=4, weighted=weighted)
    assert got.dtype == np.float32 and got.shape == features.shape
    reference = sp.csr_matrix(operator, dtype=np.float64) @ features.astype(np.float64)
    bound = aggregate_bound(operator, features, weighted=weighted)
    error = np.abs(got.astype(np.float64) - reference)
    worst = np.unravel_index(np.argmax(error - bound), error.shape)
    assert np.all(error <= bound), (f"{name}: |error| {error[worst]:.3g} > bound {bound[worst]:.3g} at "
                                    f"{worst}; {knobs.describe()}")
    assert error.max() > 0, "no rounding at all: the test data is too easy"


@pytest.mark.parametrize("lanes", [1, 2, 8])
def test_aggregate_exact_on_integers(lanes):
    """Small integers sum exactly in binary32: the result must equal scipy's exactly, for any P."""
    adjacency = with_self_loops(generate("cora", seed=knobs.seed()))
    rng = knobs.rng(8)
    features = rng.integers(-50, 50, (adjacency.shape[0], 4)).astype(np.float32)
    expected = (sp.csr_matrix(adjacency, dtype=np.float64) @ features.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(aggregate(adjacency, features, lanes=lanes), expected)


def _scalar_execute(packets, features, *, n_rows, n_cols, weighted, b_banks, lanes):
    """One packet and one slot at a time with numpy.float32 scalars: the documented semantics."""
    out = [[np.float32(0.0)] * features.shape[1] for _ in range(n_rows)]
    counts = dict(header_errors=0, range_errors=0, bank_errors=0, nonzeros=0)
    for index in range(len(packets)):
        mask = int(packets.mask[index])
        if (packets.task[index] != TASK_AGGREGATION or mask >> lanes or packets.weighted[index] != weighted):
            counts["header_errors"] += 1
            continue
        banks = []
        for slot in range(lanes):
            if not mask >> slot & 1:
                continue
            row, col = int(packets.rows[index, slot]), int(packets.cols[index, slot])
            if row >= n_rows or col >= n_cols:
                counts["range_errors"] += 1
                continue
            if row % lanes != slot or (b_banks > 1 and col % b_banks in banks):
                counts["bank_errors"] += 1
                continue
            banks.append(col % b_banks)
            counts["nonzeros"] += 1
            with np.errstate(all="ignore"):
                for f in range(features.shape[1]):
                    term = features[col, f] * packets.values[index, slot] if weighted else features[col, f]
                    out[row][f] = np.float32(out[row][f] + np.float32(term))
    return np.array(out, dtype=np.float32), counts


def _random_packets(rng, count, lanes, n_rows, n_cols, *, weighted, bad):
    """Random packets; with ``bad`` some have wrong headers, out-of-range ids and bank clashes."""
    rows = rng.integers(0, n_rows, (count, lanes)) // lanes * lanes + np.arange(lanes)
    cols = rng.integers(0, n_cols, (count, lanes))
    values = rng.standard_normal((count, lanes)).astype(np.float32)
    occupied = rng.random((count, lanes)) < 0.8
    packets = Packets.from_slots(rows % max(n_rows, 1), cols, values, occupied, weighted=weighted)
    if bad:
        pick = rng.random((count, lanes))
        packets.rows[pick < 0.05] = n_rows + rng.integers(0, 3)
        packets.cols[(pick >= 0.05) & (pick < 0.1)] = n_cols + 1
        packets.rows[(pick >= 0.1) & (pick < 0.15)] += 1
        header = rng.random(count)
        packets.task[header < 0.03] = 5
        packets.weighted[(header >= 0.03) & (header < 0.06)] ^= 1
        packets.mask[(header >= 0.06) & (header < 0.09)] |= np.uint8(0x80)
    return packets


@pytest.mark.parametrize("weighted", [False, True], ids=["boolean", "weighted"])
@pytest.mark.parametrize("lanes,b_banks", [(1, 1), (2, 4), (4, 1), (4, 8), (7, 1)])
def test_execute_equals_scalar_loop(lanes, b_banks, weighted):
    rng = knobs.rng(9 + lanes + b_banks)
    n_rows, n_cols = 24 + lanes, 19
    packets = _random_packets(rng, knobs.vectors(120), lanes, n_rows, n_cols, weighted=weighted,
                              bad=True)
    # Cancellation, subnormals, infinities and NaN in B.
    features = _features(rng, n_cols, 5) * np.float32(1e3)
    features[0, 0], features[1, 1], features[2, 2] = np.inf, np.nan, np.float32(1e-41)
    features[3, 3] = -np.inf
    got, counters = execute(packets, features, n_rows=n_rows, weighted=weighted, b_banks=b_banks)
    expected, counts = _scalar_execute(packets, features, n_rows=n_rows, n_cols=n_cols, weighted=weighted,
                                       b_banks=b_banks, lanes=lanes)
    expected = np.where(np.isnan(expected), np.uint32(0x7FC00000).view(np.float32), expected)
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert {name: getattr(counters, name) for name in counts} == counts
    assert counters.packets == len(packets)
    assert counts["header_errors"] and counts["range_errors"] and counts["nonzeros"], counts
    assert counts["bank_errors"] or (lanes == 1 and b_banks == 1), counts


def test_accumulation_order_is_packet_order():
    """Re-associating would change these bits: 1 + 2^-24 + 2^-24 vs 1 + (2^-24 + 2^-24)."""
    out = np.zeros((1, 1), np.float32)
    addends = np.array([[1.0], [2.0**-24], [2.0**-24]], np.float32)
    accumulate_in_order(out, np.zeros(3, np.int64), addends)
    assert out[0, 0] == np.float32(1.0)
    out[:] = 0
    accumulate_in_order(out, np.zeros(3, np.int64), addends[::-1].copy())
    assert out[0, 0] == np.float32(1.0 + 2.0**-23)


# Every graph at the default configuration; the other lane counts and banked B on the small ones (time).
SPAWNER_CASES = ([(name, 4, 1) for name in BENCHMARK_GRAPHS]
                 + [(name, lanes, b_banks) for name in ("cora", "citeseer")
                    for lanes, b_banks in [(1, 1), (2, 1), (8, 1), (4, 8), (8, 16)]])


@pytest.mark.parametrize("name,lanes,b_banks", SPAWNER_CASES)
def test_spawner_invariants(name, lanes, b_banks):
    adjacency = generate(name, seed=knobs.seed())
    looped = with_self_loops(adjacency)
    spawned = spawn(looped, lanes=lanes, b_banks=b_banks)
    packets, mask = spawned.packets, spawned.packets.slot_mask
    # The mapping: a permutation into the physical rows, at most ceil(n / P) rows per bank.
    physical = spawned.physical_of_row
    assert np.unique(physical).size == physical.size and physical.max() < spawned.n_rows
    assert np.bincount(physical % lanes, minlength=lanes).max() <= -(-looped.shape[0] // lanes)
    # Every nonzero exactly once.
    inverse = np.full(spawned.n_rows, -1)
    inverse[physical] = np.arange(physical.size)
    got = sp.coo_matrix((np.ones(mask.sum()), (inverse[packets.rows[mask]], packets.cols[mask])),
                        shape=looped.shape).tocsr()
    assert (got != looped).nnz == 0
    assert np.all(packets.rows[mask] % lanes == np.nonzero(mask)[1]), "slot outside its bank"
    if b_banks > 1:
        for index in np.flatnonzero(mask.sum(axis=1) > 1):
            banks = packets.cols[index][mask[index]] % b_banks
            assert np.unique(banks).size == banks.size
    # No stall: the cycle model's issue times are the spawner's steps, and the stream takes them.
    times = issue_cycles(packets)
    assert times[-1] + 1 == spawned.steps
    # The degree-only estimate (used for Reddit) is a lower bound, and tight with one B bank.
    estimate = cycle_estimate(np.diff(looped.indptr), lanes)
    assert estimate <= spawned.steps, (estimate, spawned.steps)
    assert b_banks > 1 or spawned.steps <= 1.01 * estimate + HAZARD_WINDOW, (estimate, spawned.steps)
    assert np.all(np.diff(times) >= 1)
    assert packets.fill() >= 0.95, (name, packets.fill())


def test_balance_rows_spreads_hubs():
    degrees = np.array([100, 100, 1, 1, 1, 1, 1, 1, 50, 50])
    physical = balance_rows(degrees, 4)
    loads = np.bincount(physical % 4, weights=degrees, minlength=4)
    assert loads.max() - loads.min() <= 100
    assert len({physical[0] % 4, physical[1] % 4, physical[8] % 4, physical[9] % 4}) == 4


def test_seed_rule_invariants(graph):
    name, adjacency = graph
    looped = with_self_loops(adjacency)
    spawned = seed_rule(looped, lanes=4)
    packets, mask = spawned.packets, spawned.packets.slot_mask
    assert mask.sum() == looped.nnz
    got = sp.coo_matrix((np.ones(mask.sum()), (packets.rows[mask], packets.cols[mask])), shape=looped.shape)
    assert (got.tocsr() != looped).nnz == 0
    assert np.all(packets.rows[mask] % 4 == np.nonzero(mask)[1])
    blocks = np.where(mask, packets.cols // 20, -1)
    assert np.all((blocks == blocks.max(axis=1, keepdims=True)) | ~mask), "packet spans two column blocks"
    # The same OUT as ours: only the order of the additions differs, so integers agree exactly.
    features = knobs.rng(3).integers(-9, 9, (looped.shape[0], 3)).astype(np.float32)
    out, _ = execute(packets, features, n_rows=spawned.n_rows)
    np.testing.assert_array_equal(out[:looped.shape[0]], aggregate(looped, features))


def test_issue_cycles_on_hazard_patterns():
    lanes, count = 4, 50
    hub = Packets.from_slots(np.tile(np.arange(lanes), (count, 1)), np.zeros((count, lanes), int))
    assert list(issue_cycles(hub)) == [k * HAZARD_WINDOW for k in range(count)]
    spread = Packets.from_slots(np.arange(count * lanes).reshape(count, lanes), np.zeros((count, lanes), int))
    assert list(issue_cycles(spread)) == list(range(count))
    # The same row twice in a row, then not for a while: one stall of window - 1 cycles.
    rows = np.arange(count * lanes).reshape(count, lanes)
    rows[1] = rows[0]
    times = issue_cycles(Packets.from_slots(rows, np.zeros((count, lanes), int)))
    assert times[1] == HAZARD_WINDOW and times[-1] == count - 1 + HAZARD_WINDOW - 1


def test_packet_format_layout():
    fmt = PacketFormat(lanes=8, row_bits=16, col_bits=16, weighted=True)
    assert fmt.packet_bits == 1024
    assert PacketFormat(lanes=8, row_bits=14, col_bits=14, weighted=True).packet_bits == 512
    assert PacketFormat(lanes=4, weighted=True).packet_bits == 512
    assert PacketFormat(lanes=8).packet_bits == 512
    fmt = PacketFormat(lanes=2, row_bits=5, col_bits=7, weighted=True)
    packets = Packets.from_slots([[4, 3]], [[100, 9]], [[1.5, -2.0]], [[True, False]], weighted=True)
    word = fmt.encode(packets)[0]
    offsets = fmt.field_offsets()

    def field(name):
        offset, width = offsets[name]
        return word >> offset & ((1 << width) - 1)

    assert (field("task"), field("mask"), field("weighted"), field("range_base")) == (6, 1, 1, 100)
    assert (field("slot0.row"), field("slot0.col"), field("slot0.value")) == (4, 100, 0x3FC00000)
    assert field("slot1.row") == 0 and word < 1 << (offsets["slot1.value"][0] + 32)


def test_gcn_forward_within_bound():
    adjacency = generate("cora", seed=knobs.seed())
    normalised = gcn_normalise(adjacency)
    rng = knobs.rng(11)
    x = (rng.random((adjacency.shape[0], 24)) < 0.1).astype(np.float32)
    w1, w2 = gcn_weights(24, 16, 7, seed=knobs.seed())
    result = gcn_forward(normalised, x, w1, w2)
    reference = gcn_reference(normalised, x, w1, w2)
    bound = gcn_bound(normalised, x, w1, w2, result)
    error = np.abs(result.logits.astype(np.float64) - reference)
    assert np.all(error <= bound), float((error - bound).max())
    assert error.max() > 0 and np.all(result.hidden >= 0)
    assert bound.max() < 1e-4 * np.abs(reference).max(), "the bound is too loose to mean anything"
