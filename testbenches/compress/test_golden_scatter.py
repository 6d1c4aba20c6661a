"""Tests of the FPGA-side decompression semantics of ``golden.compress``: the pair-order float32
scatter-add, the bad-input behaviour and status bits, the wire-format decoder, and the adversarial
index patterns the RTL tests reuse.

``scipy.sparse`` is an independent reference only without duplicate indices: it sums duplicates in
an order of its own, so with duplicates it is held to the float32 summation error bound, and bit
exactness is checked against an explicit pair-order loop instead.
"""

import numpy as np
import pytest
import scipy.sparse

from golden.compress import (
    ADVERSARIAL_KINDS,
    CANONICAL_NAN_F32,
    ScatterStatus,
    adversarial_indices,
    chunk_count,
    encode_pairs,
    encode_stream,
    group_by_chunk,
    scatter,
    scatter_checked,
    scatter_stream,
)
from golden.fp.formats import F32
from scripts.sim import knobs
from testbenches.compress.golden_oracle import (
    COUNTERS,
    assert_errors,
    assert_same_bits,
    random_values,
    reference_scatter,
)

FLOAT32_UNIT_ROUNDOFF = 2.0**-24


def scipy_sum(indices, values, size):
    matrix = scipy.sparse.coo_matrix((values.astype(np.float32), (indices, np.zeros_like(indices))),
                                     shape=(size, 1))
    return matrix.toarray().ravel()


@pytest.mark.parametrize("value_format", ["f32", "f16"])
@pytest.mark.parametrize("ratio", [0.001, 0.01, 0.1])
def test_scatter_without_duplicates_matches_scipy(ratio, value_format):
    size = max(knobs.vectors(200_000), 1)
    rng = knobs.rng(10)
    indices = rng.choice(size, max(1, int(ratio * size)), replace=False)
    values = random_values(rng, indices.size, value_format)
    # A lone value v lands as 0.0 + v, which turns -0.0 into +0.0; scipy stores v itself.
    expected = scipy_sum(indices, values, size) + np.float32(0.0)
    assert_same_bits(scatter(indices, values, size), expected, f"ratio={ratio} {value_format}")


@pytest.mark.parametrize("value_format", ["f32", "f16"])
def test_scatter_duplicates_accumulate_in_pair_order(value_format):
    size, count = 64, max(knobs.vectors(20_000), 2 * 64)  # enough pairs to repeat indices
    rng = knobs.rng(11)
    indices = rng.integers(size, size=count)
    values = random_values(rng, count, value_format)
    dense = scatter(indices, values, size)
    assert_same_bits(dense, reference_scatter(indices, values, size)[0], value_format)
    # Recursive float32 summation of m terms is within gamma(m - 1) * sum|v| of the exact sum.
    terms = np.bincount(indices, minlength=size)
    assert terms.max() > 1, "the test needs duplicate indices"
    gamma = (terms - 1) * FLOAT32_UNIT_ROUNDOFF / (1 - (terms - 1) * FLOAT32_UNIT_ROUNDOFF)
    magnitude = np.bincount(indices, np.abs(values.astype(np.float64)), minlength=size)
    exact = np.bincount(indices, values.astype(np.float64), minlength=size)
    for name, result in (("scatter", dense), ("scipy", scipy_sum(indices, values, size))):
        error = np.abs(result.astype(np.float64) - exact)
        assert np.all(error <= gamma * magnitude), (
            f"{name} exceeds the summation bound ({knobs.describe(20_000)})")


def test_scatter_zero_signs_specials_and_rounding():
    tiny = np.float32(2.0**-149)
    cases = [  # (indices, float32 values, expected bits of element 0)
        ([0], [-0.0], 0x00000000),
        ([0, 0], [-0.0, -0.0], 0x00000000),
        ([0, 0], [1.0, -1.0], 0x00000000),
        ([0, 0], [np.inf, -np.inf], CANONICAL_NAN_F32),
        ([0, 0], [tiny, tiny], np.float32(2 * 2.0**-149).view(np.uint32)),  # no flush to zero
        ([0, 0, 0], [1.0, 2.0**-24, 2.0**-24], 0x3F800000),  # each tie rounds to the even 1.0
        ([0, 0, 0], [2.0**-24, 2.0**-24, 1.0], 0x3F800001),  # the small terms first add up
    ]
    for indices, values, expected in cases:
        dense = scatter(np.array(indices), np.array(values, np.float32), 2)
        assert dense.view(np.uint32)[0] == expected, f"{indices} {values}: {dense.view(np.uint32)[0]:#x}"
        assert dense.view(np.uint32)[1] == 0, "an untouched element must be +0.0"
    payload_nan = np.array([0xFFC00001], np.uint32).view(np.float32)
    assert scatter(np.array([0]), payload_nan, 1).view(np.uint32)[0] == CANONICAL_NAN_F32 == F32.canonical_nan
    # float16 subnormals widen exactly.
    assert scatter(np.array([0]), np.array([2.0**-24], np.float16), 1)[0] == np.float32(2.0**-24)


@pytest.mark.parametrize("banks", [4, 8, 16])
@pytest.mark.parametrize("kind", ADVERSARIAL_KINDS)
def test_adversarial_patterns(kind, banks):
    count = max(knobs.vectors(1_024), 2)  # two indices at least, to have an order
    size = max(4096, 16 * count)  # room for count distinct indices in one of 16 banks
    rng = knobs.rng(12)
    indices = adversarial_indices(kind, count, size, banks, rng)
    context = f"kind={kind} banks={banks} ({knobs.describe(1_024)})"
    assert indices.shape == (count,) and indices.min() >= 0 and indices.max() < size, context
    assert np.all(np.diff(indices) >= 0), context
    distinct = np.unique(indices).size
    expected_shape = {
        "random": distinct == count,
        "same_bank": distinct == count and np.unique(indices % banks).size == 1,
        "same_index": distinct == 1,
        "consecutive": np.all(np.diff(indices) == 1),
    }[kind]
    assert expected_shape, context
    for value_format in ("f32", "f16"):
        values = random_values(rng, count, value_format)
        assert_same_bits(scatter(indices, values, size), reference_scatter(indices, values, size)[0], context)
        _, errors = scatter_checked(indices[::-1], values, size, sorted_within_chunk=True)
        assert errors.unsorted == (0 if kind == "same_index" else count - 1), context


@pytest.mark.parametrize("call, name", [
    (lambda: adversarial_indices("strided", 4, 64, 4, np.random.default_rng()), "kind"),
    (lambda: adversarial_indices("same_bank", 17, 64, 4, np.random.default_rng()), "n must be <= 16"),
    (lambda: adversarial_indices("random", 65, 64, 4, np.random.default_rng()), "n must be <= 64"),
    (lambda: adversarial_indices("random", 4, 64, 0, np.random.default_rng()), "banks"),
    (lambda: adversarial_indices("random", 4, 64, 4, 7), "rng"),
])
def test_adversarial_rejects_bad_arguments(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_status_bit_positions():
    # These positions are the RTL status register; changing them breaks the hardware interface.
    assert [(flag.name, flag.value) for flag in ScatterStatus] == [
        ("OUT_OF_RANGE", 1), ("CHUNK_VIOLATION", 2), ("UNSORTED", 4), ("EXCESS_PAIRS", 8), ("MISSING", 16)]


def test_each_bad_input_case():
    size = 10  # with chunk_size=4 the chunks are [0, 4), [4, 8) and the partial [8, 10)
    ones = np.ones(6, np.float32)
    none = dict.fromkeys(COUNTERS, 0)
    cases = [  # (pairs, scatter_checked options, expected counters, applied indices)
        ([1, 10, 2**32 - 1, 9], {}, dict(none, out_of_range=2), [1, 9]),
        ([1, 5, 4, 9], dict(chunk_size=4, chunk_counts=[2, 1, 1]), dict(none, chunk_violation=1), [1, 4, 9]),
        ([5, 9, 7, 9, 3], dict(sorted_within_chunk=True), dict(none, unsorted=2), [5, 9, 9]),
        ([5, 10, 6], dict(sorted_within_chunk=True), dict(none, out_of_range=1), [5, 6]),
        ([1, 9, 2], dict(chunk_size=4, chunk_counts=[3, 0, 0], sorted_within_chunk=True),
         dict(none, chunk_violation=1), [1, 2]),
        ([3, 2, 8], dict(chunk_size=4, chunk_counts=[1, 0, 2], sorted_within_chunk=True),
         dict(none, chunk_violation=1), [3, 8]),
        ([1, 2, 12], dict(declared_count=1), dict(none, excess_pairs=2), [1]),
        ([1, 2, 12], dict(chunk_size=4, chunk_counts=[2, 0, 0]), dict(none, excess_pairs=1), [1, 2]),
        ([1, 2], dict(declared_count=5), dict(none, missing=3), [1, 2]),
        ([1], dict(chunk_size=4, chunk_counts=[1, 0, 2]), dict(none, missing=2), [1]),
        ([8, 9, 9], dict(chunk_size=4, chunk_counts=[0, 0, 3], sorted_within_chunk=True), none, [8, 9, 9]),
        ([], dict(chunk_size=4, chunk_counts=[0, 0, 0]), none, []),
    ]
    for indices, options, expected, applied in cases:
        indices = np.array(indices, np.int64)
        dense, errors = scatter_checked(indices, ones[: indices.size], size, **options)
        what = f"{indices.tolist()} {options}"
        assert_errors(errors, expected, what)
        assert errors.status == sum(flag for flag in ScatterStatus if expected[flag.name.lower()]), what
        assert_same_bits(dense, scatter(np.array(applied, np.int64), ones[: len(applied)], size), what)


def test_stream_excess_and_truncation():
    size, chunk_size = 10, 4
    indices, values = np.array([1, 2, 9]), np.array([1.0, 2.0, 3.0], np.float32)
    stream = encode_stream(indices, values, value_format="f32", counts=[2, 0, 1])
    extra = encode_pairs([0, 5], np.ones(2, np.float32), value_format="f32")
    options = dict(value_format="f32", chunk_size=chunk_size)
    dense, errors = scatter_stream(np.concatenate([stream, extra]), size, **options)
    assert_errors(errors, dict.fromkeys(COUNTERS, 0) | {"excess_pairs": 2}, "trailing words")
    assert_same_bits(dense, scatter(indices, values, size), "trailing words")
    # Header bits [63:32] are reserved and ignored.
    tagged = stream.copy()
    tagged[[0, 3, 4]] |= np.uint64(0xDEADBEEF << 32)
    dense, errors = scatter_stream(tagged, size, **options)
    assert errors.status == 0, f"reserved header bits: {errors}"
    assert_same_bits(dense, scatter(indices, values, size), "reserved header bits")
    # Cut inside chunk 0's pairs: one pair and two headers never arrive.
    dense, errors = scatter_stream(stream[:2], size, **options)
    assert_errors(errors, dict.fromkeys(COUNTERS, 0) | {"missing": 3}, "truncated")
    assert errors.status == ScatterStatus.MISSING
    assert_same_bits(dense, scatter(indices[:1], values[:1], size), "truncated")
    flat_stream = encode_stream(indices, values, value_format="f32")
    dense, errors = scatter_stream(flat_stream, size, value_format="f32", pair_count=2)
    assert errors.excess_pairs == 1 and errors.status == ScatterStatus.EXCESS_PAIRS


def corrupted_chunked_pairs(rng, size, chunk_size, value_format):
    """A sorted chunked pair list with every kind of corruption sprinkled in."""
    count = max(knobs.vectors(20_000), 500)  # enough pairs for every corruption to occur
    indices = np.sort(rng.integers(size, size=count))
    values = random_values(rng, count, value_format)
    indices, values, counts = group_by_chunk(indices, values, size=size, chunk_size=chunk_size,
                                             sort_within_chunk=True)
    corrupt = rng.random(count)
    out_of_range, wrong_chunk = corrupt < 0.02, (corrupt >= 0.02) & (corrupt < 0.04)
    indices = np.where(out_of_range, size + rng.integers(0, 2**31, count), indices)
    indices = np.where(wrong_chunk, rng.integers(size, size=count), indices)
    swap = np.flatnonzero((corrupt >= 0.04) & (corrupt < 0.08))[:-1]  # local disorder
    indices[swap], indices[swap + 1] = indices[swap + 1], indices[swap].copy()
    excess = rng.integers(1, 20)
    indices = np.concatenate([indices, rng.integers(size + 100, size=excess)])
    values = np.concatenate([values, random_values(rng, excess, value_format)])
    return indices, values, counts


@pytest.mark.parametrize("value_format", ["f32", "f16"])
@pytest.mark.parametrize("promised_sorted", [False, True])
def test_checked_scatter_matches_the_pair_by_pair_rules(promised_sorted, value_format):
    size, chunk_size = 5_000, 128
    rng = knobs.rng(13)
    indices, values, counts = corrupted_chunked_pairs(rng, size, chunk_size, value_format)
    context = f"sorted={promised_sorted} {value_format}"
    expected_dense, expected_errors = reference_scatter(indices, values, size, chunk_size=chunk_size,
                                                        counts=counts, promised_sorted=promised_sorted)
    wanted = ("out_of_range", "chunk_violation", "excess_pairs") + (("unsorted",) if promised_sorted else ())
    assert all(expected_errors[name] for name in wanted), f"no corruption of some kind: {expected_errors}"
    dense, errors = scatter_checked(indices, values, size, chunk_size=chunk_size, chunk_counts=counts,
                                    sorted_within_chunk=promised_sorted)
    assert_errors(errors, expected_errors, context)
    assert_same_bits(dense, expected_dense, context)
    # The same pairs as a wire-format stream decode to the same result.
    declared = int(counts.sum())
    stream = np.concatenate([
        encode_stream(indices[:declared], values[:declared], value_format=value_format, counts=counts),
        encode_pairs(indices[declared:], values[declared:], value_format=value_format)])
    stream_dense, stream_errors = scatter_stream(
        stream, size, value_format=value_format, chunk_size=chunk_size, sorted_within_chunk=promised_sorted)
    assert stream_errors == errors, f"{context}: stream {stream_errors} != arrays {errors}"
    assert_same_bits(stream_dense, dense, f"{context} stream")


@pytest.mark.parametrize("call, name", [
    (lambda: scatter([3], np.ones(1, np.float32), 3), "indices must be < size"),
    (lambda: scatter([-1], np.ones(1, np.float32), 3), "indices must be >= 0"),
    (lambda: scatter([0], np.ones(1), 3), "dtype float32 or float16"),
    (lambda: scatter([0, 1], np.ones(1, np.float32), 3), "one per value"),
    (lambda: scatter([0], np.ones(1, np.float32), -1), "size"),
    (lambda: scatter_checked([0], np.ones(1, np.float32), 3, chunk_size=2), "together"),
    (lambda: scatter_checked([0], np.ones(1, np.float32), 3, chunk_size=2, chunk_counts=[1]), "chunk_counts"),
    (lambda: scatter_checked([0], np.ones(1, np.float32), 3, chunk_size=2, chunk_counts=[1, -1]),
     "chunk_counts"),
    (lambda: scatter_checked([0], np.ones(1, np.float32), 3, chunk_size=2, chunk_counts=[1, 0],
                             declared_count=1), "declared_count"),
    (lambda: scatter_checked([0], np.ones(1, np.float32), 3, declared_count=-1), "declared_count"),
    (lambda: scatter_stream([0], 3, value_format="f32", chunk_size=2, pair_count=1), "pair_count"),
    (lambda: scatter_stream([0], 3, value_format="f8"), "value_format"),
])
def test_scatter_rejects_bad_arguments(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_chunk_count():
    assert [chunk_count(size, 4) for size in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]
