"""The flat-stream golden model of the paper mode (``topk_dram_scatter``) against the pair-by-pair rules.

``test_dram_scatter`` compares the RTL with ``scatter_stream(words, size, value_format=...,
pair_count=count, sorted_within_chunk=sorted)``. Here that exact call is checked against
``reference_scatter`` of ``golden_oracle`` (an explicit loop of scalar float32 adds in pair
order, with the documented checks applied one word at a time) on flat streams with every kind of
malformation, so the vectorised model (``np.add.at``, running maxima) is not trusted on its own.
"""

import numpy as np
import pytest

from golden.compress import encode_pairs, scatter_stream
from scripts.sim import knobs
from testbenches.compress.golden_oracle import (
    assert_errors,
    assert_same_bits,
    random_values,
    reference_scatter,
)


def flat_case(rng, kind, size, value_format):
    """(indices, values, declared, sorted) of one flat stream of ``kind``."""
    count = max(knobs.vectors(3_000), 200)
    indices = np.sort(rng.integers(0, size, count))       # duplicates included
    values = random_values(rng, count, value_format)
    declared, promised_sorted = count, True
    if kind == "out_of_range":
        far = rng.random(count) < 0.2
        indices[far] = rng.integers(size, 1 << 32, int(far.sum()))
        indices[0] = size
        promised_sorted = False
    elif kind == "unsorted":
        swap = rng.choice(count, count // 5, replace=False)
        indices[swap] = rng.permutation(indices[swap])
    elif kind == "excess":
        declared = int(rng.integers(0, count))
    elif kind == "missing":
        declared = count + int(rng.integers(1, 100))
    elif kind == "everything":
        far = rng.random(count) < 0.1
        indices[far] = rng.integers(size, 2 * size, int(far.sum()))
        swap = rng.choice(count, count // 10, replace=False)
        indices[swap] = rng.permutation(indices[swap])
        declared = int(rng.integers(count // 2, count))
    return indices, values, declared, promised_sorted


KINDS = ["well_formed", "out_of_range", "unsorted", "excess", "missing", "everything"]


@pytest.mark.parametrize("value_format", ["f32", "f16"])
@pytest.mark.parametrize("kind", KINDS)
def test_flat_stream_matches_the_pair_by_pair_rules(kind, value_format):
    rng = knobs.rng(17)
    size = 2_000
    indices, values, declared, promised_sorted = flat_case(rng, kind, size, value_format)
    words = encode_pairs(indices, values, value_format=value_format)
    dense, errors = scatter_stream(words, size, value_format=value_format, pair_count=declared,
                                   sorted_within_chunk=promised_sorted)
    expected_dense, expected_errors = reference_scatter(indices, values, size, declared=declared,
                                                        promised_sorted=promised_sorted)
    context = f"{kind} {value_format}"
    assert_errors(errors, expected_errors, context)
    assert_same_bits(dense, expected_dense, context)
    if kind != "well_formed":
        assert errors.status, f"{context}: the malformation was not flagged ({knobs.describe()})"


def test_flat_empty_and_zero_size():
    dense, errors = scatter_stream(np.zeros(0, np.uint64), 16, value_format="f32", pair_count=7)
    assert errors.missing == 7 and not dense.any()
    words = encode_pairs(np.arange(5), np.ones(5, np.float32), value_format="f32")
    dense, errors = scatter_stream(words, 0, value_format="f32", pair_count=5)
    assert errors.out_of_range == 5 and dense.size == 0
