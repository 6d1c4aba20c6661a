"""Host-side sparse preprocessing for the sparse tensor PEs: the dissertation's Algorithms 1 and 2
(Chapter 3.3.3-3.3.4, H-GCN), and the padded-CSR SpMM those PEs run.

Names mapped from the paper
---------------------------
=====================  =============================================================
paper                  here
=====================  =============================================================
``nnzs_rows``          ``nnz_per_row``
``tau``                ``change_threshold``
``moving_ave``         running mean of ``nnz_per_row`` since the group started
``pre_ave/cur_ave``    ``previous_mean`` / ``current_mean``
``group_dic``          list of row-index arrays (``groups``), in row order
``calc_density``       :func:`padded_density`
``delta``              ``imbalance_ratio`` (``max_nnz / ave_nnz`` that triggers FIND_NNZ)
``p``                  ``coverage``
``d``                  ``density_threshold``
``FIND_NNZ``           :func:`covering_nnz`
=====================  =============================================================

Where the printed pseudo-code is incomplete we follow the text and say so:

1. Algorithm 1 line 14 closes the group but never puts row ``i`` anywhere; the text says the closed
   group is rows ``j .. i-1``, so row ``i`` starts the next group. The last open group is closed
   after the loop (the pseudo-code drops it).
2. "Moving average" is read as the running mean of the rows in the current group (reset when a
   group closes, then updated with row ``i``, lines 15), so a group is a run of rows whose counts stay
   within ``change_threshold`` (relative) of their running mean.
3. Line 10's guard makes the relative change 0 when the previous mean is 0; when both means are 0
   (leading empty rows) the change is also 0.
4. Padding (the text after Algorithm 1): every row of a group is padded to the group's largest
   count, so a group's padding is ``sum(max - nnz)`` and the density after padding is
   ``sum(len(group) * max) / (rows * cols)``.

Padded-CSR arithmetic
---------------------
The sparse PE walks a row's stored slots in increasing column order, padding slots last. A padding
slot carries ``valid = 0`` and is **skipped**: it does not touch the accumulator. (Adding it as
``+0.0 * b`` would turn a ``-0.0`` accumulator into ``+0.0`` and ``0 * inf`` into NaN.) So an output
row with no stored non-zeros returns ``d`` unchanged, and the result equals the dense
:func:`golden.systolic.numerics.gemm` of the same matrix except possibly for the sign of zero results
(the dense PE also adds the zeros' products) and for non-finite ``b``.
"""

from dataclasses import dataclass

import numpy as np

from .numerics import ELEMENTS, decode_to_f32, f32_bits, mac_chain_f32, wrap_int32

__all__ = [
    "PaddedCSR",
    "RowGroup",
    "TileRowPlan",
    "choose_pe_kind",
    "covering_nnz",
    "group_rows",
    "padded_csr",
    "padded_density",
    "plan_tile_rows",
    "sparse_gemm",
]


def _check_unit_interval(value, name, *, open_low=False):
    low_ok = value > 0 if open_low else value >= 0
    if not (np.isscalar(value) and low_ok and value <= 1):
        interval = "(0, 1]" if open_low else "[0, 1]"
        raise ValueError(f"{name} must be a number in {interval}, not {value!r}")


def group_rows(nnz_per_row, *, change_threshold):
    """Algorithm 1: split rows into groups of similar non-zero counts by a running mean.

    Parameters
    ----------
    nnz_per_row : array_like of int
        Non-zeros (or target slots) of each row, in row order.
    change_threshold : float
        ``tau`` > 0: a row whose arrival moves the group's running mean by a relative amount
        ``>= tau`` starts a new group.

    Returns
    -------
    list of numpy.ndarray of int64
        Consecutive row indices; every row is in exactly one group.
    """
    counts = np.asarray(nnz_per_row)
    integers = np.issubdtype(counts.dtype, np.integer)
    if counts.ndim != 1 or (counts.size and (not integers or counts.min() < 0)):
        raise ValueError("nnz_per_row must be a 1-D array of non-negative integers")
    if not (np.isscalar(change_threshold) and change_threshold > 0):
        raise ValueError(f"change_threshold must be a number > 0, not {change_threshold!r}")
    groups, current = [], []
    group_sum, group_len, current_mean = 0, 0, 0.0
    for row, count in enumerate(counts.tolist()):
        previous_mean = current_mean
        group_sum, group_len = group_sum + count, group_len + 1
        current_mean = group_sum / group_len
        if previous_mean == 0:
            previous_mean = current_mean  # line 10-11: no division by zero
        change = 0.0 if previous_mean == 0 else abs(current_mean - previous_mean) / previous_mean
        if change >= change_threshold:
            groups.append(np.array(current, dtype=np.int64))
            current = [row]  # row i opens the next group (see the module notes)
            group_sum, group_len, current_mean = count, 1, float(count)
        else:
            current.append(row)
    if current:
        groups.append(np.array(current, dtype=np.int64))
    return groups


def padded_density(nnz_per_row, groups, cols):
    """Density after padding every row of each group to the group's largest count.

    Parameters
    ----------
    nnz_per_row : array_like of int
    groups : list of numpy.ndarray
        As returned by :func:`group_rows`.
    cols : int
        Columns of the matrix (or tile).

    Returns
    -------
    float
        ``sum(len(group) * max(nnz in group)) / (len(nnz_per_row) * cols)``.
    """
    counts = np.asarray(nnz_per_row)
    if cols < 1 or counts.size == 0:
        raise ValueError(f"cols must be >= 1 and nnz_per_row non-empty, not cols={cols}, size={counts.size}")
    stored = sum(len(group) * int(counts[group].max()) for group in groups if len(group))
    return stored / (counts.size * cols)


def _nonzero_mask(matrix, element):
    if element == "int8":
        return matrix != 0
    return decode_to_f32(matrix, element, "matrix") != 0  # +0.0 and -0.0 are zeros; NaN is stored


@dataclass(frozen=True)
class RowGroup:
    """One row group of a padded CSR matrix: every row holds ``width`` slots.

    Attributes
    ----------
    rows : numpy.ndarray of int64, shape (R,)
    width : int
        Slots per row (the group's largest non-zero count).
    columns : numpy.ndarray of int32, shape (R, width)
        Increasing along each row over the valid slots; padding slots hold 0.
    values : numpy.ndarray, shape (R, width)
        Raw element values; padding slots hold 0.
    valid : numpy.ndarray of bool, shape (R, width)
    """

    rows: np.ndarray
    width: int
    columns: np.ndarray
    values: np.ndarray
    valid: np.ndarray


@dataclass(frozen=True)
class PaddedCSR:
    """A matrix in padded CSR: Algorithm 1's row groups, each row padded to its group's width.

    Attributes
    ----------
    shape : tuple of int
    element : str
    groups : tuple of RowGroup
    """

    shape: tuple
    element: str
    groups: tuple

    @property
    def nnz(self):
        """Stored non-zeros (valid slots)."""
        return int(sum(group.valid.sum() for group in self.groups))

    @property
    def padding(self):
        """Padding slots, ``sum over groups of sum(width - nnz of row)``."""
        return int(sum(group.valid.size for group in self.groups)) - self.nnz

    @property
    def density_after_padding(self):
        """``(nnz + padding) / (rows * cols)``."""
        return (self.nnz + self.padding) / (self.shape[0] * self.shape[1])


def padded_csr(matrix, *, change_threshold, element="f32"):
    """Convert a dense matrix to padded CSR grouped by Algorithm 1.

    Parameters
    ----------
    matrix : numpy.ndarray, shape (M, K)
        Raw element values as for :func:`golden.systolic.numerics.gemm` (float32 is accepted for f32).
    change_threshold : float
        Algorithm 1's ``tau`` (> 0).
    element : {"f16", "bf16", "f32", "int8"}

    Returns
    -------
    PaddedCSR
    """
    if element not in ELEMENTS:
        raise ValueError(f"element must be one of {sorted(ELEMENTS)}, not {element!r}")
    matrix = np.asarray(matrix)
    if matrix.ndim != 2 or 0 in matrix.shape:
        raise ValueError(f"matrix must be a non-empty 2-D array, not shape {matrix.shape}")
    mask = _nonzero_mask(matrix, element)
    nnz_per_row = mask.sum(axis=1)
    groups = []
    for rows in group_rows(nnz_per_row, change_threshold=change_threshold):
        width = int(nnz_per_row[rows].max())
        # A stable sort puts each row's non-zero columns first, in increasing column order.
        order = np.argsort(~mask[rows], axis=1, kind="stable")[:, :width]
        valid = np.take_along_axis(mask[rows], order, axis=1)
        columns = np.where(valid, order, 0).astype(np.int32)
        values = np.where(valid, np.take_along_axis(matrix[rows], order, axis=1), 0).astype(matrix.dtype)
        groups.append(RowGroup(rows, width, columns, values, valid))
    return PaddedCSR(matrix.shape, element, tuple(groups))


def sparse_gemm(padded, b, d=None):
    """``c = d + A @ b`` on the sparse tensor PE: only valid slots, in increasing column order.

    Parameters
    ----------
    padded : PaddedCSR
        ``A``, shape (M, K).
    b : numpy.ndarray, shape (K, N)
        Raw bits of ``padded.element`` (as for :func:`golden.systolic.numerics.gemm`).
    d : numpy.ndarray, shape (M, N), optional
        Initial accumulator (f32 raw bits or float32; int32 for int8). Defaults to zeros.

    Returns
    -------
    numpy.ndarray, shape (M, N)
        uint32 raw binary32 bits (canonical NaN), or int32 for int8.
    """
    b = np.asarray(b)
    m, k = padded.shape
    if b.ndim != 2 or b.shape[0] != k:
        raise ValueError(f"b must be a 2-D (K, N) array with K = {k}, not shape {b.shape}")
    if d is not None and np.shape(d) != (m, b.shape[1]):
        raise ValueError(f"d must have shape (M, N) = {(m, b.shape[1])}, not {np.shape(d)}")
    if padded.element == "int8":
        total = np.zeros((m, b.shape[1]), np.int64) if d is None else np.asarray(d, dtype=np.int64).copy()
        for group in padded.groups:
            products = group.values.astype(np.int64)[:, :, None] * b.astype(np.int64)[group.columns]
            total[group.rows] += np.where(group.valid[:, :, None], products, 0).sum(axis=1)
        return wrap_int32(total)
    b32 = decode_to_f32(b, padded.element, "b")
    acc = np.zeros((m, b.shape[1]), np.float32) if d is None else decode_to_f32(d, "f32", "d").copy()
    for group in padded.groups:
        values = decode_to_f32(group.values, padded.element, "values")
        steps = range(group.width)
        acc[group.rows] = mac_chain_f32(acc[group.rows], [values[:, s, None] for s in steps],
                                        [b32[group.columns[:, s]] for s in steps],
                                        [group.valid[:, s, None] for s in steps])
    return f32_bits(acc)


def covering_nnz(tile_counts, coverage):
    """FIND_NNZ: the smallest count ``n`` such that a fraction ``>= coverage`` of tiles hold ``<= n``.

    Parameters
    ----------
    tile_counts : array_like of int
        Non-zeros of one row in each tile of a tile row.
    coverage : float
        ``p`` in (0, 1].

    Returns
    -------
    int
    """
    _check_unit_interval(coverage, "coverage", open_low=True)
    ordered = np.sort(np.asarray(tile_counts))
    # A small tolerance keeps coverage * n that is an integer in exact arithmetic from rounding up.
    return int(ordered[int(np.ceil(coverage * ordered.size - 1e-9)) - 1])


def choose_pe_kind(tile_row_density, threshold=0.5):
    """Algorithm 2 lines 18-22: a dense tensor PE when the padded density reaches the threshold.

    Parameters
    ----------
    tile_row_density : float
        Density after padding, in [0, 1].
    threshold : float
        ``d`` in [0, 1]; the dissertation measured no sparse speedup above 50 %.

    Returns
    -------
    str
        ``"dense"`` if ``tile_row_density >= threshold``, else ``"sparse"``.
    """
    _check_unit_interval(tile_row_density, "tile_row_density")
    _check_unit_interval(threshold, "threshold")
    return "dense" if tile_row_density >= threshold else "sparse"


@dataclass(frozen=True)
class TileRowPlan:
    """Algorithm 2's decision for one tile row.

    Attributes
    ----------
    index : int
        Tile-row index ``i``.
    nnz_per_row : numpy.ndarray of int64, shape (tile_size,)
        Slots per row in every tile of this tile row (max count, or FIND_NNZ's count).
    groups : list of numpy.ndarray
        Algorithm 1's groups of the tile's rows (indices within the tile).
    density : float
        Density of one tile after padding.
    pe_kind : str
        ``"dense"`` or ``"sparse"``.
    overflow : int
        Non-zeros beyond ``nnz_per_row`` in their tile: left to the SpMM unit in programmable logic.
    """

    index: int
    nnz_per_row: np.ndarray
    groups: list
    density: float
    pe_kind: str
    overflow: int


def plan_tile_rows(matrix, *, tile_size, change_threshold, imbalance_ratio, coverage, density_threshold=0.5,
                   element="f32"):
    """Algorithm 2: choose slots per row, row groups and the PE kind for each tile row.

    Parameters
    ----------
    matrix : numpy.ndarray, shape (rows, cols)
        Both dimensions must be multiples of ``tile_size``.
    tile_size : int
    change_threshold : float
        Algorithm 1's ``tau``.
    imbalance_ratio : float
        ``delta`` > 0: when ``max_nnz / ave_nnz >= delta`` over a row's tiles, FIND_NNZ picks the count.
    coverage : float
        ``p`` in (0, 1] for FIND_NNZ.
    density_threshold : float
        ``d`` in [0, 1].
    element : str
        How to read zeros in ``matrix`` (see :func:`padded_csr`).

    Returns
    -------
    list of TileRowPlan
    """
    matrix = np.asarray(matrix)
    if not isinstance(tile_size, (int, np.integer)) or tile_size < 1:
        raise ValueError(f"tile_size must be an integer >= 1, not {tile_size!r}")
    if matrix.ndim != 2 or 0 in matrix.shape or matrix.shape[0] % tile_size or matrix.shape[1] % tile_size:
        raise ValueError(f"matrix must be 2-D with both dimensions multiples of tile_size = {tile_size}, "
                         f"not shape {matrix.shape}")
    if not (np.isscalar(imbalance_ratio) and imbalance_ratio > 0):
        raise ValueError(f"imbalance_ratio must be a number > 0, not {imbalance_ratio!r}")
    _check_unit_interval(coverage, "coverage", open_low=True)
    mask = _nonzero_mask(matrix, element)
    tiles_row, tiles_col = matrix.shape[0] // tile_size, matrix.shape[1] // tile_size
    # counts[i, j, k]: non-zeros of row j of tile row i inside tile column k (lines 4-8).
    counts = mask.reshape(tiles_row, tile_size, tiles_col, tile_size).sum(axis=3)
    plans = []
    for i in range(tiles_row):
        nnz_per_row = np.zeros(tile_size, dtype=np.int64)
        for j in range(tile_size):
            row_counts = counts[i, j]
            ave_nnz, max_nnz = row_counts.mean(), row_counts.max()
            imbalanced = ave_nnz > 0 and max_nnz / ave_nnz >= imbalance_ratio
            nnz_per_row[j] = covering_nnz(row_counts, coverage) if imbalanced else max_nnz
        groups = group_rows(nnz_per_row, change_threshold=change_threshold)
        density = padded_density(nnz_per_row, groups, tile_size)
        overflow = int(np.maximum(counts[i] - nnz_per_row[:, None], 0).sum())
        plans.append(TileRowPlan(i, nnz_per_row, groups, density, choose_pe_kind(density, density_threshold),
                                 overflow))
    return plans
