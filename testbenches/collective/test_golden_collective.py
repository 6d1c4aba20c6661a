"""golden.collective against oracles it did not write: SoftFloat's f32_add and NumPy float64 sums."""

import numpy as np
import pytest

from golden.collective import (
    LINE_WORDS,
    BarrierTable,
    Contribution,
    ReductionTable,
    TieredTable,
    add_lines,
    line_value,
    reduce_arrival_order,
    reduce_hierarchical,
    reduce_leaf_order,
)
from scripts.sim import knobs
from testbenches.collective.tb import (
    by_partition,
    check_recursive_sum_bound,
    leaf_traffic,
    random_words,
    reshuffled,
    softfloat_add,
)


def test_add_lines_matches_softfloat():
    rng = knobs.rng(1)
    count = knobs.vectors(400)
    a, b = (random_words(rng, (count, LINE_WORDS), specials=0.1) for _ in range(2))
    ours = add_lines(a, b)
    for index in np.ndindex(a.shape):
        assert int(ours[index]) == softfloat_add(a[index], b[index]), f"{index}: {knobs.describe()}"


def test_the_first_pass_is_exact():
    """``g + (-0.0)`` is ``g`` bit for bit for every non-NaN binary32 (the reducer's pass 0)."""
    bits = np.concatenate([np.arange(0, 1 << 32, 9973, dtype=np.uint64).astype(np.uint32),
                           np.array([0, 0x80000000, 1, 0x80000001, 0x7F800000, 0xFF800000], np.uint32)])
    finite_or_inf = bits[~np.isnan(bits.view(np.float32))]
    assert np.array_equal(add_lines(finite_or_inf, np.full(finite_or_inf.shape, 0x80000000, np.uint32)),
                          finite_or_inf)


@pytest.mark.parametrize("leaves", [2, 4, 16])
def test_leaf_order_sum_is_within_the_float64_bound(leaves):
    """|fp32 chain - exact| <= (n-1) u sum|g| / (1 - (n-1) u) (Higham, recursive summation)."""
    rng = knobs.rng(leaves)
    shape = (leaves, 64, LINE_WORDS)
    lines = (rng.standard_normal(shape) * 10.0 ** rng.integers(-4, 4, shape)).astype(np.float32)
    check_recursive_sum_bound(reduce_leaf_order(lines.view(np.uint32)), lines)


def test_leaf_order_is_numpy_float32_recursive_summation():
    rng = knobs.rng(3)
    lines = random_words(rng, (5, 32, LINE_WORDS), specials=0.0).view(np.float32)
    expected = lines[0].copy()
    for leaf in range(1, 5):
        expected = expected + lines[leaf]
    assert np.array_equal(reduce_leaf_order(lines.view(np.uint32)), expected.view(np.uint32))


@pytest.mark.parametrize("leaves,slots,chunks", [(3, 1, 2), (4, 2, 5), (16, 4, 3)])
def test_table_is_order_invariant_in_deterministic_mode(leaves, slots, chunks):
    rng = knobs.rng(leaves * 7 + chunks)
    shape = {"leaves": leaves, "partitions": 32, "slots": slots, "chunks": chunks}
    sequence = leaf_traffic(rng, **shape, count=6)
    first = ReductionTable(**shape).run(sequence)
    for _ in range(3):
        again = ReductionTable(**shape).run(reshuffled(rng, sequence))
        assert sorted(again) == sorted(first), knobs.describe()
    for partition, lines in first:
        contributions = by_partition(sequence)[partition]
        stacked = np.zeros((leaves, chunks, LINE_WORDS), np.uint32)
        for c in contributions:
            stacked[c.leaf, c.chunk] = c.words()
        assert lines == [line_value(line) for line in reduce_leaf_order(stacked)], knobs.describe()


def test_arrival_mode_follows_the_arrival_order():
    rng = knobs.rng(5)
    shape = {"leaves": 4, "partitions": 8, "slots": 2, "chunks": 3}
    sequence = leaf_traffic(rng, **shape, count=4)
    table = ReductionTable(**shape, mode="arrival")
    for partition, lines in table.run(sequence):
        contributions = by_partition(sequence)[partition]
        for chunk in range(shape["chunks"]):
            arrived = [c for c in contributions if c.chunk == chunk]
            stacked = np.zeros((shape["leaves"], LINE_WORDS), np.uint32)
            for c in arrived:
                stacked[c.leaf] = c.words()
            assert lines[chunk] == line_value(reduce_arrival_order(stacked, [c.leaf for c in arrived]))


def test_two_leaves_give_the_same_bits_in_both_modes():
    """Binary32 addition commutes, so with two leaves the orders cannot differ."""
    rng = knobs.rng(6)
    shape = {"leaves": 2, "partitions": 8, "slots": 2, "chunks": 4}
    sequence = leaf_traffic(rng, **shape, count=5)
    assert ReductionTable(**shape).run(sequence) == ReductionTable(**shape, mode="arrival").run(sequence)


def test_bad_contributions_are_counted_once_and_never_merged():
    table = ReductionTable(leaves=2, partitions=4, slots=2, chunks=1)
    one = 0x3F800000
    sequence = [Contribution(2, 0, 0, one), Contribution(0, 4, 0, one), Contribution(0, 0, 1, one),
                Contribution(0, 0, 0, one), Contribution(0, 0, 0, 0x40000000), Contribution(0, 2, 0, one),
                Contribution(1, 0, 0, one)]
    # Word 0: 1.0 from each leaf; the other words are +0.
    assert table.run(sequence) == [(0, [0x40000000])]
    assert table.counters == {"bad_leaf": 1, "bad_partition": 1, "bad_chunk": 1, "conflicts": 1,
                              "duplicates": 1}


def test_a_bad_mode_is_refused():
    with pytest.raises(ValueError, match="mode must be one of"):
        ReductionTable(leaves=2, partitions=1, slots=1, chunks=1, mode="fastest")


@pytest.mark.parametrize("leaves", [2, 3, 16])
def test_barrier_keeps_leaves_within_one_iteration_and_acknowledges_every_barrier(leaves):
    """Leaves that wait for their acks, at random speeds: the spread never exceeds one iteration."""
    rng = knobs.rng(70 + leaves)
    table = BarrierTable(leaves=leaves)
    completed = [0] * leaves  # iterations each leaf has been acknowledged for
    waiting = [False] * leaves
    for _ in range(knobs.vectors(2000)):
        leaf = int(rng.integers(0, leaves))
        if not waiting[leaf]:
            waiting[leaf] = True
            table.barrier(leaf)
        for who, iteration in table.acks:
            assert iteration == (completed[who] + 1) % 256, knobs.describe()  # iterations count mod 256
            completed[who] += 1
            waiting[who] = False
        table.acks.clear()
        assert max(completed) - min(completed) <= 1, knobs.describe()
        assert table.base == min(completed) % 256
    assert min(completed) > 10, "the leaves made no progress"
    assert table.counters == {"bad_leaf": 0, "duplicates": 0}


@pytest.mark.parametrize("regions,region_leaves,slots,chunks", [(2, 2, 2, 3), (4, 4, 2, 2), (2, 8, 1, 1)])
def test_tiered_table_is_order_invariant_and_hierarchical(regions, region_leaves, slots, chunks):
    """Two levels in deterministic mode: the same bits in any arrival order, and they are
    :func:`reduce_hierarchical`'s (regions in order, each its leaves in order)."""
    rng = knobs.rng(regions * 31 + region_leaves)
    leaves = regions * region_leaves
    traffic = {"leaves": leaves, "partitions": 16, "slots": slots, "chunks": chunks}
    shape = {"regions": regions, "region_leaves": region_leaves, "partitions": 16, "slots": slots,
             "chunks": chunks}
    sequence = leaf_traffic(rng, **traffic, count=5)
    first = TieredTable(**shape).run(sequence)
    assert len(first) == 5, knobs.describe()
    for _ in range(3):
        assert sorted(TieredTable(**shape).run(reshuffled(rng, sequence))) == sorted(first), knobs.describe()
    for partition, lines in first:
        stacked = np.zeros((leaves, chunks, LINE_WORDS), np.uint32)
        for c in by_partition(sequence)[partition]:
            stacked[c.leaf, c.chunk] = c.words()
        assert lines == [line_value(line) for line in reduce_hierarchical(stacked, regions)], knobs.describe()


def test_the_hierarchical_sum_is_not_the_flat_one():
    """(g0 + g1) + (g2 + g3) differs from ((g0 + g1) + g2) + g3 somewhere: a test against the
    hierarchical golden can tell a flat reduction from a two-level one."""
    lines = random_words(knobs.rng(9), (4, 64, LINE_WORDS), specials=0.0)
    assert not np.array_equal(reduce_hierarchical(lines, 2), reduce_leaf_order(lines))
    assert np.array_equal(reduce_hierarchical(lines, 4), reduce_leaf_order(lines))


def test_iteration_filter_drops_a_late_duplicate_and_admits_the_next_iteration():
    from golden.collective import IterationFilter

    gate = IterationFilter(partitions=2)
    assert gate.admit(0, 1) and gate.admit(1, 1)
    gate.close(0)
    assert not gate.admit(0, 1), "a line of the closed reduction of partition 0 was admitted again"
    assert gate.admit(0, 2) and gate.admit(1, 1) and not gate.admit(1, 2)
    assert gate.admit(5, 77)  # an unknown partition goes on: the table counts it as bad_partition
    assert gate.late_gradients == 2
    for _ in range(255):
        gate.close(1)
    assert gate.admit(1, 0)  # tags wrap with the version, mod 256


def test_fetch_retry_asks_again_for_a_lost_line_and_gives_up_at_its_limit():
    from golden.collective import FetchRetry

    clean = FetchRetry(partition=3, chunks=3, limit=2, version=7)
    assert all(clean.line(3, line) for line in range(3))
    assert (clean.open, clean.version, clean.asks) == (False, 8, 1)
    assert not clean.line(3, 2) and clean.counters["unexpected_replies"] == 1  # no fetch open
    middle = FetchRetry(partition=3, chunks=3, limit=2)
    middle.line(3, 0)
    middle.line(3, 2)  # line 1 was lost: the last comes after a gap
    assert (middle.open, middle.version, middle.asks) == (True, 0, 2)
    for line in range(3):
        middle.line(3, line)
    assert (middle.open, middle.version, middle.counters["retries"]) == (False, 1, 1)
    last = FetchRetry(partition=1, chunks=2, limit=2)
    last.line(1, 0)
    last.silence()  # the last line was lost: nothing more comes
    assert not last.line(0, 1), "a line of another partition was taken for the open fetch"
    last.line(1, 0)
    last.line(1, 1)
    assert (last.open, last.version, last.counters["retries"]) == (False, 1, 1)
    lost = FetchRetry(partition=0, chunks=1, limit=2)
    for _ in range(3):
        lost.silence()
    assert (lost.open, lost.version, lost.asks) == (False, 0, 3)
    assert lost.counters == {"retries": 2, "lost_fetches": 1, "unexpected_replies": 0}
