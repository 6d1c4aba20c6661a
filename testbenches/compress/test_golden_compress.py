"""Tests of the GPU-side Top-K compressor, the pair layout (shards, chunks, wire format) and the
traffic model of ``golden.compress``. The scatter semantics are tested in ``test_golden_scatter.py``."""

import math

import numpy as np
import pytest

from golden.compress import (
    ErrorFeedbackCompressor,
    chunk_count,
    compressed_fraction,
    decode_pairs,
    dram_bytes_per_parameter,
    dram_traffic,
    encode_pairs,
    encode_stream,
    even_shard_bounds,
    group_by_chunk,
    keep_count,
    scatter,
    scatter_stream,
    shard_pairs,
    topk_compress,
)
from scripts.sim import knobs

RATIOS = (0.001, 0.01, 0.02, 0.1)
FLOAT32_UNIT_ROUNDOFF = 2.0**-24


def wide_gradient(rng, size):
    """Gradient values over 2**-20 .. 2**20 with exact magnitude ties (sign flips and zeros) mixed in."""
    grad = (rng.standard_normal(size) * 2.0 ** rng.integers(-20, 21, size)).astype(np.float32)
    copies = rng.integers(size, size=size // 20)
    grad[rng.integers(size, size=copies.size)] = -grad[copies]
    grad[rng.integers(size, size=size // 50)] = 0.0
    return grad


def reference_topk(flat, ratio, block):
    """Per-block argpartition Top-K; magnitude ties at the threshold go to the lowest indices."""
    kept = []
    for start in range(0, flat.size, block):
        magnitudes = np.abs(flat[start: start + block].astype(np.float64))
        k = math.ceil(round(ratio * magnitudes.size, 6))
        threshold = magnitudes[np.argpartition(magnitudes, magnitudes.size - k)[magnitudes.size - k]]
        above = np.flatnonzero(magnitudes > threshold)
        at_threshold = np.flatnonzero(magnitudes == threshold)[: k - above.size]
        kept.append(np.sort(np.concatenate([above, at_threshold])) + start)
    return np.concatenate(kept)


def assert_same_bits(actual, expected, what):
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    mismatch = np.flatnonzero(actual.view(np.uint8).reshape(actual.size, -1)
                              != expected.view(np.uint8).reshape(expected.size, -1))
    assert mismatch.size == 0, f"{what}: bits differ at byte {mismatch[:5]} ({knobs.describe()})"


@pytest.mark.parametrize("block", [4096, 1000])
@pytest.mark.parametrize("value_format", ["f32", "f16"])
@pytest.mark.parametrize("ratio", RATIOS)
def test_topk_matches_argpartition_reference(ratio, value_format, block):
    size = max(knobs.vectors(200_000), 1)
    grad = wide_gradient(knobs.rng(1), size)
    indices, values = topk_compress(grad, ratio=ratio, block=block, value_format=value_format)
    expected = reference_topk(grad, ratio, block)
    context = f"ratio={ratio} block={block} size={size} ({knobs.describe(200_000)})"
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(indices, expected, err_msg=context)
    with np.errstate(over="ignore"):  # the widest gradients overflow float16 to inf, as documented
        assert_same_bits(values, grad[expected].astype(values.dtype), context)
    assert values.dtype == np.dtype(np.float32 if value_format == "f32" else np.float16)
    assert indices.size >= ratio * size and indices.size < ratio * size + math.ceil(size / block), context


def test_topk_ties_go_to_the_lower_index():
    grad = np.array([0.5, -2.0, 2.0, 1.0, -2.0, 0.0, -0.0, 0.0], np.float32)
    indices, _ = topk_compress(grad, ratio=0.25, block=8)
    np.testing.assert_array_equal(indices, [1, 2])
    zeros, _ = topk_compress(np.array([0.0, -0.0, 0.0, -0.0], np.float32), ratio=0.5, block=4)
    np.testing.assert_array_equal(zeros, [0, 1])


def test_topk_infinities_formats_and_shapes():
    grad = np.array([[1.0, -np.inf], [3.0, 1e5]], np.float64)
    indices, values = topk_compress(grad, ratio=0.5, block=4, value_format="f16")
    np.testing.assert_array_equal(indices, [1, 3])
    # 1e5 overflows float16 to +inf, as a GPU cast does.
    np.testing.assert_array_equal(values, np.array([-np.inf, np.inf], np.float16))
    # RNE to float16: 1 + 2**-11 is a tie between 1 and 1 + 2**-10 and goes to the even 1.0.
    _, halfway = topk_compress(np.array([1 + 2.0**-11], np.float32), ratio=1, block=1, value_format="f16")
    assert halfway[0] == np.float16(1.0)
    # float64 input is rounded to float32 before selection.
    _, rounded = topk_compress(np.array([1 + 2.0**-30]), ratio=1, block=1)
    assert rounded.dtype == np.float32 and rounded[0] == np.float32(1.0)
    empty_indices, empty_values = topk_compress(np.zeros(0, np.float32))
    assert empty_indices.size == 0 and empty_values.dtype == np.float32


def test_keep_count_rounds_the_decimal_ratio_up():
    assert keep_count(0.07, 100) == 7
    assert keep_count(0.001, 4096) == 5
    assert keep_count(0.01, 1) == 1
    assert keep_count(1, 3) == 3
    assert keep_count(0.5, 0) == 0


@pytest.mark.parametrize("call, name", [
    (lambda: topk_compress(np.ones(4, np.float32), ratio=0), "ratio"),
    (lambda: topk_compress(np.ones(4, np.float32), ratio=1.5), "ratio"),
    (lambda: topk_compress(np.ones(4, np.float32), block=0), "block"),
    (lambda: topk_compress(np.ones(4, np.float32), value_format="bf8"), "value_format"),
    (lambda: topk_compress(np.array([1.0, np.nan], np.float32)), "NaN"),
    (lambda: topk_compress(np.arange(4)), "floating-point"),
    (lambda: keep_count(0.1, -1), "length"),
    (lambda: ErrorFeedbackCompressor(0), "size"),
    (lambda: ErrorFeedbackCompressor(8).compress(np.ones(9, np.float32)), "size=8"),
])
def test_compressor_rejects_bad_arguments(call, name):
    with pytest.raises(ValueError, match=name):
        call()


@pytest.mark.parametrize("value_format", ["f32", "f16"])
def test_error_feedback_conserves_mass(value_format):
    size, steps, ratio = max(knobs.vectors(50_000), 100), 8, 0.01  # >= 100: most elements stay unsent
    rng = knobs.rng(2)
    compressor = ErrorFeedbackCompressor(size, ratio=ratio, block=1024, value_format=value_format)
    sent_total, grad_total, bound = np.zeros(size), np.zeros(size), np.zeros(size)
    for step in range(steps):
        grad = (rng.standard_normal(size) * 2.0 ** rng.integers(-8, 8, size)).astype(np.float32)
        carried = compressor.residual.astype(np.float64)
        indices, values = compressor.compress(grad)
        if step == 0:
            np.testing.assert_array_equal(indices, topk_compress(grad, ratio=ratio, block=1024)[0])
        if value_format == "f32":
            assert not compressor.residual[indices].any(), knobs.describe(50_000)
        np.add.at(sent_total, indices, values.astype(np.float64))
        grad_total += grad
        # The only rounding is that of acc = grad + residual: half an ulp of |acc| per element and step.
        bound += FLOAT32_UNIT_ROUNDOFF * (np.abs(grad) + np.abs(carried)) * (1 + FLOAT32_UNIT_ROUNDOFF)
    error = np.abs(sent_total + compressor.residual - grad_total)
    worst = int(np.argmax(error - bound))
    assert np.all(error <= bound), (f"element {worst}: error {error[worst]:.3g} > bound {bound[worst]:.3g} "
                                    f"({knobs.describe(50_000)})")
    assert np.count_nonzero(compressor.residual) > size // 2, "the residual must carry the unsent mass"


def duplicated_pairs(rng, size, count):
    """Random pairs with many duplicate indices, in random order."""
    indices = rng.integers(size, size=count)
    quarter = count // 4
    indices[:quarter] = indices[quarter: 2 * quarter]
    rng.shuffle(indices)
    return indices, rng.standard_normal(count).astype(np.float32)


@pytest.mark.parametrize("devices", [1, 3, 4, 7])
def test_sharding_round_trip(devices):
    size = max(knobs.vectors(100_000), 10)  # >= 10 so that there are pairs to shard
    indices, values = duplicated_pairs(knobs.rng(3), size, size // 10)
    expected = scatter(indices, values, size)
    bounds = even_shard_bounds(size, devices)
    assert np.ptp(np.diff(bounds)) <= 1 and bounds[-1] == size
    shard_size = -(-size // devices)
    for shards, edges in [(shard_pairs(indices, values, shard_bounds=bounds), bounds),
                          (shard_pairs(indices, values, size=size, shard_size=shard_size),
                           np.append(np.arange(0, size, shard_size), size))]:
        assert len(shards) == len(edges) - 1
        pieces = [scatter(shard_indices, shard_values, int(length))
                  for (shard_indices, shard_values), length in zip(shards, np.diff(edges), strict=True)]
        assert_same_bits(np.concatenate(pieces), expected, f"devices={devices}")


@pytest.mark.parametrize("sort_within_chunk", [False, True])
def test_chunk_grouping_round_trip(sort_within_chunk):
    chunk_size = 96
    size = max(knobs.vectors(100_000), 20 * chunk_size)  # enough pairs and chunks to leave some empty
    rng = knobs.rng(4)
    indices, values = duplicated_pairs(rng, size, size // 20)
    # Leave some chunks empty so that they are exercised.
    keep = (indices // chunk_size) % 5 != 2
    indices, values = indices[keep], values[keep]
    grouped_indices, grouped_values, counts = group_by_chunk(
        indices, values, size=size, chunk_size=chunk_size, sort_within_chunk=sort_within_chunk)
    context = f"size={size} sort={sort_within_chunk} ({knobs.describe(100_000)})"
    assert counts.size == chunk_count(size, chunk_size) and counts.sum() == indices.size, context
    assert np.any(counts == 0), context
    chunk_of_pair = np.repeat(np.arange(counts.size), counts)
    np.testing.assert_array_equal(grouped_indices // chunk_size, chunk_of_pair, err_msg=context)
    if sort_within_chunk:
        assert np.all(np.diff(grouped_indices) >= 0), context
    # Stability, which keeps duplicate accumulation order: input positions ride along as the values.
    _, positions, _ = group_by_chunk(indices, np.arange(indices.size), size=size, chunk_size=chunk_size,
                                     sort_within_chunk=sort_within_chunk)
    key = grouped_indices if sort_within_chunk else grouped_indices // chunk_size
    assert np.all(np.lexsort((positions, key)) == np.arange(positions.size)), f"unstable: {context}"
    assert_same_bits(scatter(grouped_indices, grouped_values, size), scatter(indices, values, size), context)
    stream = encode_stream(grouped_indices, grouped_values, value_format="f32", counts=counts)
    dense, errors = scatter_stream(stream, size, value_format="f32", chunk_size=chunk_size,
                                   sorted_within_chunk=sort_within_chunk)
    assert errors.status == 0, f"{errors} {context}"
    assert_same_bits(dense, scatter(indices, values, size), context)


def test_wire_format_words():
    words = encode_pairs(np.array([5, 0xFFFFFFFF]), np.array([1.0, -2.0], np.float32), value_format="f32")
    np.testing.assert_array_equal(words, np.array([0x3F800000_00000005, 0xC0000000_FFFFFFFF], np.uint64))
    half = encode_pairs(np.array([7]), np.array([1.0], np.float16), value_format="f16")
    np.testing.assert_array_equal(half, np.array([0x00003C00_00000007], np.uint64))
    stream = encode_stream(np.array([1, 2, 9]), np.array([1, 2, 3], np.float16), value_format="f16",
                           counts=[2, 0, 1])
    np.testing.assert_array_equal(stream[[0, 3, 4]], [2, 0, 1])
    # Bits [63:48] of an f16 pair word are ignored on read.
    _, values = decode_pairs(half | np.uint64(0xABCD << 48), value_format="f16")
    assert values[0] == np.float16(1.0)


@pytest.mark.parametrize("value_format", ["f32", "f16"])
def test_wire_format_round_trip_keeps_every_bit_pattern(value_format):
    rng = knobs.rng(5)
    count = knobs.vectors(20_000)
    dtype = np.float32 if value_format == "f32" else np.float16
    bit_dtype = np.uint32 if value_format == "f32" else np.uint16
    values = rng.integers(np.iinfo(bit_dtype).max, size=count, endpoint=True).astype(bit_dtype).view(dtype)
    indices = rng.integers(2**32, size=count)
    decoded_indices, decoded_values = decode_pairs(encode_pairs(indices, values, value_format=value_format),
                                                   value_format=value_format)
    np.testing.assert_array_equal(decoded_indices, indices, err_msg=knobs.describe(20_000))
    np.testing.assert_array_equal(decoded_values.view(bit_dtype), values.view(bit_dtype),
                                  err_msg=knobs.describe(20_000))


@pytest.mark.parametrize("call, name", [
    (lambda: shard_pairs([1], np.ones(1), size=4), "exactly one"),
    (lambda: shard_pairs([1], np.ones(1), shard_size=2), "size is required"),
    (lambda: shard_pairs([4], np.ones(1), size=4, shard_size=2), "indices must be < size"),
    (lambda: shard_pairs([1], np.ones(1), shard_bounds=[1, 4]), "shard_bounds"),
    (lambda: shard_pairs([1], np.ones(1), size=5, shard_bounds=[0, 4]), "size must equal"),
    (lambda: shard_pairs([-1], np.ones(1), size=4, shard_size=2), "indices must be >= 0"),
    (lambda: shard_pairs([1, 2], np.ones(1), size=4, shard_size=2), "values must have the shape"),
    (lambda: even_shard_bounds(4, 0), "devices"),
    (lambda: group_by_chunk([1], np.ones(1), size=4, chunk_size=0), "chunk_size"),
    (lambda: group_by_chunk([4], np.ones(1), size=4, chunk_size=2), "indices must be < size"),
    (lambda: encode_pairs([2**32], np.ones(1, np.float32), value_format="f32"), "2\\*\\*32"),
    (lambda: encode_pairs([1], np.ones(1), value_format="f32"), "dtype float32"),
    (lambda: encode_stream([1], np.ones(1, np.float32), value_format="f32", counts=[0, 2]), "counts"),
])
def test_layout_rejects_bad_arguments(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_traffic_matches_the_targets_and_table_one():
    # targets.md: dense Adam moves 30 bytes per element; the paper's decompression path 36 or more.
    assert dram_bytes_per_parameter("dense") == 30
    paper = dram_traffic("zero_fill_scatter", ratio=0.0, param_copy_bytes=4)
    assert paper.total == 36 and paper.dense_gradient == 8
    scattered = dram_traffic("zero_fill_scatter", ratio=0.01, scatter_access_bytes=64)
    assert scattered.gradient_write == pytest.approx(4 + 0.64)
    assert scattered.gradient_read == pytest.approx(4 + 0.64)
    assert dram_traffic("zero_fill_scatter", accumulate=False).gradient_read == 4
    for optimizer in ("sgd", "sgd_momentum", "adagrad", "adam", "adamw"):
        fused = dram_traffic("fused", optimizer=optimizer, ratio=0.01, chunk_size=512)
        assert fused.dense_gradient == 0
        assert fused.total < dram_bytes_per_parameter("dense", optimizer=optimizer)
    assert dram_traffic("fused", ratio=0.01, chunk_size=512).total == pytest.approx(26 + 0.08 + 8 / 512)
    # Table I's default: top 1 % with an index per value is c = 2 % of the gradient offload.
    assert compressed_fraction(0.01) == pytest.approx(0.02)
    wide_pairs = compressed_fraction(0.01, value_bytes=4, index_bytes=4, dense_gradient_bytes=4)
    assert wide_pairs == pytest.approx(0.02)


def test_traffic_model_counts_the_wire_format_stream():
    chunk_size = 1024
    size = max(knobs.vectors(500_000), 1)
    grad = wide_gradient(knobs.rng(6), size)
    indices, values = topk_compress(grad, ratio=0.02)
    grouped_indices, grouped_values, counts = group_by_chunk(
        indices, values, size=size, chunk_size=chunk_size, sort_within_chunk=True)
    stream = encode_stream(grouped_indices, grouped_values, value_format="f32", counts=counts)
    modelled = dram_traffic("fused", ratio=indices.size / size, chunk_size=chunk_size).pair_read * size
    # The model spreads the headers of a partial last chunk evenly, so allow less than one header.
    assert abs(stream.nbytes - modelled) < 8, f"{stream.nbytes} vs {modelled} ({knobs.describe(500_000)})"


@pytest.mark.parametrize("call, name", [
    (lambda: dram_traffic("sparse"), "mode"),
    (lambda: dram_traffic("dense", optimizer="lion"), "optimizer"),
    (lambda: dram_traffic("fused", ratio=2), "ratio"),
    (lambda: dram_traffic("fused", index_bytes=-1), "index_bytes"),
    (lambda: dram_traffic("fused", chunk_size=0), "chunk_size"),
    (lambda: compressed_fraction(0.01, dense_gradient_bytes=0), "dense_gradient_bytes"),
])
def test_traffic_rejects_bad_arguments(call, name):
    with pytest.raises(ValueError, match=name):
        call()
