"""golden.collective.ring against oracles it did not write: SoftFloat's f32_add and NumPy float64 sums."""

import collections

import numpy as np
import pytest

from golden.collective import (
    LINE_WORDS,
    ring_all_reduce,
    ring_counts,
    ring_messages,
    seed_ring_counts,
)
from scripts.sim import knobs
from testbenches.collective.tb import check_recursive_sum_bound, random_words, softfloat_add


@pytest.mark.parametrize("nodes", [2, 3, 5])
def test_ring_matches_a_softfloat_chain_in_ring_order(nodes):
    """Each segment's sum is SoftFloat's chain from its first node round the ring, NaN/Inf included."""
    rng = knobs.rng(100 + nodes)
    lines = knobs.vectors(3)
    gradients = random_words(rng, (nodes, nodes, lines, LINE_WORDS), specials=0.1)
    result = ring_all_reduce(gradients)
    for segment, line, word in np.ndindex(nodes, lines, LINE_WORDS):
        total = int(gradients[segment, segment, line, word])
        for hop in range(1, nodes):
            total = softfloat_add(total, gradients[(segment + hop) % nodes, segment, line, word])
        for node in range(nodes):
            assert int(result[node, segment, line, word]) == total, (
                f"node {node} segment {segment} line {line} word {word}; {knobs.describe()}")


@pytest.mark.parametrize("nodes", [2, 4, 16])
def test_ring_sum_is_within_the_float64_bound(nodes):
    """|fp32 chain - exact| <= (n-1) u sum|g| / (1 - (n-1) u) (Higham, recursive summation)."""
    rng = knobs.rng(nodes)
    shape = (nodes, nodes, knobs.vectors(4), LINE_WORDS)
    grads = (rng.standard_normal(shape) * 10.0 ** rng.integers(-4, 4, shape)).astype(np.float32)
    check_recursive_sum_bound(ring_all_reduce(grads.view(np.uint32))[0], grads)


def test_the_order_is_the_rings_not_the_node_ids():
    """With values where the order shows, segment s starts at node s (1e8 + 1 - 1e8 is 0, not 1)."""
    big, one = np.float32(1e8).view(np.uint32), np.float32(1.0).view(np.uint32)
    gradients = np.zeros((3, 3, 1, LINE_WORDS), np.uint32)
    gradients[1, 1, 0, 0] = one  # segment 1: node 1 (+1), node 2 (+1e8), node 0 (-1e8)
    gradients[2, 1, 0, 0] = big
    gradients[0, 1, 0, 0] = big | 0x80000000
    # ((1 + 1e8) - 1e8): 1 + 1e8 rounds to 1e8 in binary32, so the ring's sum is 0; node-id order gives 1.
    assert ring_all_reduce(gradients)[0, 1, 0, 0] == 0


@pytest.mark.parametrize("nodes,lines", [(2, 1), (3, 2), (8, 3), (16, 2)])
def test_messages_follow_the_ring_and_match_the_counts(nodes, lines):
    messages = ring_messages(nodes, lines)
    counts = ring_counts(nodes, lines)
    assert len(messages) == counts["packets"] == 2 * nodes * (nodes - 1) * lines
    assert counts["packet_hops"] == 2 * counts["packets"]
    sent = collections.Counter(m.src for m in messages)
    assert set(sent.values()) == {counts["packets_per_node"]}
    assert all(m.dst == (m.src + 1) % nodes for m in messages)
    # Each segment's line visits every node once per phase: it never reaches its first node again.
    for phase in (0, 1):
        for segment in range(nodes):
            receivers = [m.dst for m in messages if m.phase == phase and m.segment == segment and m.line == 0]
            assert len(set(receivers)) == nodes - 1


@pytest.mark.parametrize("nodes", [2, 4, 16])
def test_seed_formulas_equal_the_counts_with_a_segment_as_the_message(nodes):
    """The seed's Z/P is the size of one message, a segment: with it, per-host and total packets agree."""
    lines = 5
    ours, seed = ring_counts(nodes, lines), seed_ring_counts(nodes, lines)
    assert seed["packets_per_host"] == ours["packets_per_node"]
    assert seed["packets"] == ours["packets"]
    # Its hop formula takes N(N-1) as N^2; with one switch level (S = 0) the exact count is 4 N (N-1).
    assert seed["packet_hops"] - ours["packet_hops"] == 4 * nodes * lines


@pytest.mark.parametrize("gradients,message", [
    (np.zeros((2, 3, 1, LINE_WORDS), np.uint32), "shape"),
    (np.zeros((1, 1, 1, LINE_WORDS), np.uint32), "at least 2 nodes"),
    (np.zeros((2, 2, 0, LINE_WORDS), np.uint32), "lines per segment"),
])
def test_bad_shapes_are_refused(gradients, message):
    with pytest.raises(ValueError, match=message):
        ring_all_reduce(gradients)
