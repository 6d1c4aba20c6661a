"""golden.systolic.sparse: the dissertation's Algorithms 1 and 2 and the padded-CSR SpMM."""

import numpy as np
import pytest
import scipy.sparse

from golden.systolic.numerics import U_F32, U_F64, f32_from_bits, gemm
from golden.systolic.sparse import (
    choose_pe_kind,
    covering_nnz,
    group_rows,
    padded_csr,
    padded_density,
    plan_tile_rows,
    sparse_gemm,
)
from scripts.sim import knobs

DENSITIES = (0.001, 0.01, 0.1, 0.5)


def _sparse_matrix(rng, shape, density):
    """A float32 matrix with about ``density`` non-zeros, row counts deliberately uneven."""
    row_scale = rng.uniform(0.2, 1.8, size=(shape[0], 1))
    mask = rng.random(shape) < np.minimum(density * row_scale, 1)
    return np.where(mask, rng.standard_normal(shape), 0).astype(np.float32)


def test_group_rows_hand_example():
    # tau = 0.5 on counts [2, 2, 2, 8, 8, 0, 0]:
    #   rows 0-2 keep the mean at 2; row 3 moves it to 14/4 = 3.5, a 75 % change -> new group at row 3.
    #   In the new group the means are 8, 8, 16/3 (-33 %), 4 (-25 %): no more splits.
    groups = group_rows(np.array([2, 2, 2, 8, 8, 0, 0]), change_threshold=0.5)
    assert [g.tolist() for g in groups] == [[0, 1, 2], [3, 4, 5, 6]]
    # Padding to each group's maximum: 0 in the first, 0 + 0 + 8 + 8 = 16 in the second, over 7 x 10.
    assert padded_density(np.array([2, 2, 2, 8, 8, 0, 0]), groups, 10) == (3 * 2 + 4 * 8) / 70


def test_group_rows_leading_empty_rows_do_not_divide_by_zero():
    groups = group_rows(np.array([0, 0, 3, 3]), change_threshold=0.5)
    # Means 0, 0 (no change), then 1 with previous mean 0: the guard makes the change 0. Row 3 moves
    # the mean from 1 to 6/4 = 1.5, a 50 % change >= tau, so it opens the second group.
    assert [g.tolist() for g in groups] == [[0, 1, 2], [3]]


@pytest.mark.parametrize("density", DENSITIES)
def test_padded_csr_keeps_every_non_zero_once(density):
    rng = knobs.rng(10)
    for _ in range(knobs.vectors(4, limit=40)):  # whole random matrices through the Python model
        shape = tuple(rng.integers(20, 200, size=2))
        matrix = _sparse_matrix(rng, shape, density)
        tau = rng.uniform(0.05, 1.0)
        padded = padded_csr(matrix, change_threshold=tau)
        rebuilt = np.zeros_like(matrix)
        covered = np.concatenate([group.rows for group in padded.groups])
        assert np.array_equal(covered, np.arange(shape[0])), knobs.describe(4)  # each row once, in order
        padding, context = 0, f"density {density} tau {tau:.3f} {knobs.describe(4)}"
        for group in padded.groups:
            counts = group.valid.sum(axis=1)
            assert group.width == counts.max(initial=0), context
            # Valid slots first, in increasing column order; padding slots carry zeros.
            assert np.all(np.diff(group.valid.astype(int), axis=1) <= 0), context
            slots = zip(group.rows, group.columns, group.values, group.valid, strict=True)
            for row, columns, values, valid in slots:
                assert np.all(np.diff(columns[valid]) > 0), context
                assert np.all(values[~valid] == 0) and np.all(columns[~valid] == 0), context
                rebuilt[row, columns[valid]] += values[valid]
            padding += int((group.width - counts).sum())
        assert np.array_equal(rebuilt, matrix), knobs.describe(4)
        assert padded.nnz == np.count_nonzero(matrix) and padded.padding == padding, knobs.describe(4)
        assert padded.density_after_padding == (padded.nnz + padding) / matrix.size, context


@pytest.mark.parametrize("density", DENSITIES)
def test_sparse_gemm_matches_scipy_and_dense_gemm(density):
    rng = knobs.rng(11)
    for _ in range(knobs.vectors(4, limit=40)):  # whole random matrices through the Python model
        m, k, n = rng.integers(30, 300), rng.integers(30, 300), rng.integers(1, 12)
        matrix = _sparse_matrix(rng, (m, k), density)
        b = rng.standard_normal((k, n)).astype(np.float32)
        padded = padded_csr(matrix, change_threshold=0.3)
        c = f32_from_bits(sparse_gemm(padded, b)).astype(np.float64)
        reference = scipy.sparse.csr_matrix(matrix.astype(np.float64)) @ b.astype(np.float64)
        # Recursive f32 summation of each row's nnz exact-in-f64 products (see gemm_error_bound).
        terms = np.count_nonzero(matrix, axis=1)[:, None]
        magnitude = np.abs(matrix.astype(np.float64)) @ np.abs(b.astype(np.float64))
        bound = (terms + 1) * (U_F32 + U_F64) * magnitude * 1.001 + 2 * terms * 2.0**-150
        assert np.all(np.abs(c - reference) <= bound), f"{m}x{k}x{n} {knobs.describe(4)}"
        # Zeros add +-0 products in the dense PE: equal values, equal bits wherever the result is not 0.
        dense = f32_from_bits(gemm(matrix, b, element="f32"))
        assert np.array_equal(c, dense) and np.array_equal(c[c != 0], dense[c != 0]), knobs.describe(4)


def test_sparse_gemm_skips_padding_and_keeps_negative_zero():
    # Row 0 has two non-zeros, row 1 none (its slots are all padding after grouping them together).
    matrix = np.array([[2.0, 0, 3.0], [0, 0, 0]], np.float32)
    b = np.array([[1.0], [np.inf], [-1.0]], np.float32)
    d = np.array([[-0.0], [-0.0]], np.float32)
    padded = padded_csr(matrix, change_threshold=10.0)
    assert len(padded.groups) == 1 and padded.padding == 2
    c = sparse_gemm(padded, b, d)
    # Row 0: -0 + 2*1 + 3*(-1) = -1; the zero at column 1 never meets inf. Row 1: d untouched, -0.0.
    assert f32_from_bits(c)[0, 0] == -1.0 and c[1, 0] == 0x80000000
    dense = gemm(matrix, b, d, element="f32")
    assert np.isnan(f32_from_bits(dense)[0, 0])  # the dense PE multiplies 0 * inf


def test_sparse_gemm_int8_exact():
    rng = knobs.rng(12)
    matrix = np.where(rng.random((40, 60)) < 0.1, rng.integers(-128, 128, (40, 60)), 0).astype(np.int8)
    b = rng.integers(-128, 128, (60, 5), dtype=np.int8)
    c = sparse_gemm(padded_csr(matrix, change_threshold=0.5, element="int8"), b)
    assert np.array_equal(c, matrix.astype(np.int64) @ b.astype(np.int64)), knobs.describe()


def test_covering_nnz_and_pe_kind():
    assert covering_nnz([3, 0, 1, 2], 0.75) == 2  # 3 of 4 tiles hold <= 2
    assert covering_nnz([3, 0, 1, 2], 1.0) == 3
    assert choose_pe_kind(0.5) == "dense" and choose_pe_kind(0.49) == "sparse"
    with pytest.raises(ValueError, match="tile_row_density"):
        choose_pe_kind(1.5)
    with pytest.raises(ValueError, match="coverage"):
        covering_nnz([1, 2], 0)


def test_plan_tile_rows_hand_example():
    # One tile row of two 2 x 2 tiles. Row 0 has per-tile counts [2, 0]: max / mean = 2 >= delta = 1.5,
    # so FIND_NNZ(p = 0.5) picks 0 and both non-zeros overflow to the PL. Row 1 has [1, 1]: ratio 1,
    # max 1. Counts [0, 1] form one group (the first mean is 0, the guard makes the change 0) padded
    # to width 1: density 2 * 1 / (2 * 2) = 0.5, which reaches d = 0.5 -> dense PE.
    matrix = np.array([[1, 1, 0, 0], [1, 0, 0, 1]], np.float32)
    (plan,) = plan_tile_rows(matrix, tile_size=2, change_threshold=0.5, imbalance_ratio=1.5, coverage=0.5)
    assert plan.nnz_per_row.tolist() == [0, 1] and plan.overflow == 2
    assert [g.tolist() for g in plan.groups] == [[0, 1]] and plan.density == 0.5 and plan.pe_kind == "dense"


def test_plan_tile_rows_invariants():
    rng = knobs.rng(13)
    tile_size = 16
    matrix = _sparse_matrix(rng, (4 * tile_size, 6 * tile_size), 0.05)
    plans = plan_tile_rows(matrix, tile_size=tile_size, change_threshold=0.4, imbalance_ratio=2.0,
                           coverage=0.8)
    counts = (matrix != 0).reshape(4, tile_size, 6, tile_size).sum(axis=3)
    for plan in plans:
        slots = plan.nnz_per_row[:, None]
        # Every non-zero either fits its row's slots in its tile or overflows to the PL, exactly once.
        kept = np.minimum(counts[plan.index], slots).sum()
        assert plan.overflow + kept == counts[plan.index].sum(), knobs.describe()
        assert plan.pe_kind == choose_pe_kind(plan.density), knobs.describe()
        assert np.all(plan.nnz_per_row <= counts[plan.index].max(axis=1)), knobs.describe()


@pytest.mark.parametrize("call, match", [
    (lambda: group_rows(np.array([1, -1]), change_threshold=0.5), "nnz_per_row"),
    (lambda: group_rows(np.array([1, 2]), change_threshold=0), "change_threshold"),
    (lambda: padded_csr(np.ones((2, 2), np.float32), change_threshold=0.5, element="fp8"), "element"),
    (lambda: plan_tile_rows(np.ones((3, 4)), tile_size=2, change_threshold=0.5, imbalance_ratio=2,
                            coverage=0.9), "multiples of tile_size"),
])
def test_sparse_rejects_bad_parameters(call, match):
    with pytest.raises(ValueError, match=match):
        call()
