"""sparse_tensor_array: cocotb tests of :class:`rtl.systolic.sparse_tensor_array.SparseTensorArray` (padded
CSR, gathered B) against golden.systolic.sparse, and their pytest runners (at the bottom).

The host side of H-GCN's sparse path runs here: A is converted with
:func:`golden.systolic.padded_csr` (Algorithm 1 row groups, random ``change_threshold``), cut into
output tiles of ``rows t T`` rows, each tile padded to its widest row (at least one slot),
consecutive tiles merged into jobs where that lowers the cycle model (:func:`plan_jobs`), and B
loaded one column tile of ``cols t`` lanes at a time. Every result row is checked bit for bit against
:func:`golden.systolic.sparse_gemm` (or, for the tile rows that :func:`golden.systolic.plan_tile_rows`
sends to the dense path, :func:`golden.systolic.gemm`), and without stalls every job's cycle count
against ``gemm_cycles(tiles rows t T, W, cols t, ..., tensor=t)``.
"""

from functools import partial

import cocotb
import numpy as np
import pytest
from cocotb.triggers import with_timeout

from golden.systolic import choose_pe_kind, gemm, padded_csr, plan_tile_rows, sparse_gemm
from rtl.systolic.sparse_tensor_array import SparseTensorArray
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.systolic.commands import bad_commands, reject_then_run, reset_then_clean, size_limits
from testbenches.systolic.tb import (
    OutputStationaryTB,
    parametrize_cases,
    random_accumulator,
    random_matrix,
    stalled_start,
)

MODULE = __name__
DEFAULT_GEMMS = 4
DENSITIES = (0.001, 0.01, 0.05, 0.2, 0.5)
PAD = {"value": 0, "index": 0, "valid": 0}


def sparse_matrix(rng, shape, element, density, specials=0.0):
    """Raw ``element`` values, ``round(density M K)`` non-zeros (at least one if density > 0), zeros ±0."""
    m_size, k_size = shape
    values = random_matrix(rng, shape, element, specials)
    if element == "int8":
        values = np.where(values == 0, 1, values).astype(np.int8)
        zeros = np.zeros(shape, np.int8)
    else:
        zeros = (rng.integers(0, 2, shape) << (15 if element != "f32" else 31)).astype(values.dtype)  # ±0
    keep = np.zeros(m_size * k_size, bool)
    count = max(int(density > 0), round(density * m_size * k_size))
    keep[rng.choice(m_size * k_size, size=count, replace=False)] = True
    return np.where(keep.reshape(shape), values, zeros)


def row_slots(padded):
    """``{row: [(value, column) for each valid slot, in slot order]}`` from a PaddedCSR."""
    slots = {}
    for group in padded.groups:
        for position, row in enumerate(group.rows):
            slots[int(row)] = [
                (int(group.values[position, s]), int(group.columns[position, s]))
                for s in range(group.width)
                if group.valid[position, s]
            ]
    return slots


def dense_slots(a):
    """Every column of every row as a valid slot: the dense path on the same PEs."""
    return {m: [(int(a[m, k]), k) for k in range(a.shape[1])] for m in range(a.shape[0])}


class SparseTB(OutputStationaryTB):
    """The output-stationary bench (clock, streams, stamps, stalls) with a load-and-jobs driver."""

    async def run_tile_rows(self, slots, widths, b, d, reference, *, exact_cycles):
        """Run tile rows ``m0 = i rows t T`` with ``widths[i]`` slots per row on every column tile.

        ``slots[m]`` lists row m's valid (value, column) slots; rows past the matrix are padding
        (all slots invalid: their results are D's padding, +0). ``reference(b_pad, d_pad)`` is the
        golden result of the matrix's rows with B and D padded by zero columns to whole column
        tiles, so every lane of every result row is checked. Returns (measured, model) cycles
        summed over the jobs.
        """
        tile_m, lanes = self.rows * self.slots, self.cols
        m_pad = len(widths) * tile_m
        k_size, n_size = b.shape
        assert k_size <= self.params["max_k"], f"K = {k_size} does not fit max_k = {self.params['max_k']}"
        n_pad = -(-n_size // lanes) * lanes
        b_pad = np.zeros((k_size, n_pad), b.dtype)
        b_pad[:, :n_size] = b
        d_pad = None
        if d is not None:
            d_pad = np.zeros((d.shape[0], n_pad), d.dtype)
            d_pad[:, :n_size] = d
        result = reference(b_pad, d_pad)
        expected = np.zeros((m_pad, n_pad), result.dtype)
        expected[: result.shape[0]] = result
        if d_pad is not None:
            d_all = np.zeros((m_pad, n_pad), d.dtype)
            d_all[: d.shape[0]] = d_pad
            d_pad = d_all
        measured_total = model_total = 0
        for n0 in range(0, n_pad, lanes):
            self.cmd.send_nowait({"load": 1, "k": k_size, "tiles": 0})
            self.b.send_many([[int(x) for x in b_pad[k, n0 : n0 + lanes]] for k in range(k_size)])
            for first, count, width in plan_jobs(widths, self.job_cycles):
                measured, model = await self._job(
                    slots, range(first, first + count), width, n0, d_pad, expected, exact_cycles=exact_cycles
                )
                measured_total += measured
                model_total += model
        return measured_total, model_total

    def job_cycles(self, tiles, width):
        """The cycle model of one job: ``tiles`` output tiles of ``width`` slots per row."""
        return self.model_cycles(tiles * self.rows * self.slots, width, self.cols)

    async def _job(self, slots, tiles, width, n0, d, expected, *, exact_cycles):
        tile_m, lanes = self.rows * self.slots, self.cols
        scoreboard = Scoreboard(
            f"sparse_tensor_array {self.params} job tiles {list(tiles)} W={width} n0={n0}"
        )
        a_items, d_items = [], []
        for tile in tiles:
            m0 = tile * tile_m
            for s in range(width):
                for u in range(self.slots):
                    beat = []
                    for lane in range(self.rows):
                        row = slots.get(m0 + lane * self.slots + u, [])
                        beat.append(
                            {"value": row[s][0], "index": row[s][1], "valid": 1} if s < len(row) else PAD
                        )
                    a_items.append(beat)
            for m in range(m0, m0 + tile_m):
                scoreboard.expect(
                    [int(x) & 0xFFFFFFFF for x in expected[m, n0 : n0 + lanes]], {"row": m, "n0": n0}
                )
                if d is not None:
                    d_items.append([int(x) for x in d[m, n0 : n0 + lanes]])
        self.first_in = self.last_c = None
        self.cmd.send_nowait({"load": 0, "k": width, "tiles": len(tiles)})
        self.a.send_many(a_items)
        if self.d:
            self.d.send_many(d_items)
        rows_out = len(tiles) * tile_m

        async def drain():
            for _ in range(rows_out):
                scoreboard.check(await self.c.recv())

        await with_timeout(drain(), (50 * (len(a_items) + len(d_items) + rows_out) + 4000) * 10, "ns")
        await self.cycles(3)
        scoreboard.check_complete()
        assert self.c.empty(), f"extra result rows after a job; {knobs.describe()}"
        assert int(self.dut.error.value) == 0, f"error raised by in-range indices; {knobs.describe()}"
        model = self.model_cycles(rows_out, width, lanes)
        measured = self.last_c - self.first_in
        self.check_cycles(f"job W={width} x {len(tiles)} tiles", measured, model, exact_cycles=exact_cycles)
        return measured, model


def plan_jobs(widths, cost):
    """Cut consecutive tiles into jobs with the least summed ``cost(tiles, W)`` (dynamic programming).

    A job runs every tile at its widest tile's W (shorter rows get padding slots, which the PEs
    skip), so merging tiles trades padding slots for one pipeline fill and drain per job.
    Returns ``[(first tile, tiles, W)]``.
    """
    best, cut = [0] + [None] * len(widths), [0] * (len(widths) + 1)
    for end in range(1, len(widths) + 1):
        for start in range(end):
            total = best[start] + cost(end - start, max(widths[start:end]))
            if best[end] is None or total < best[end]:
                best[end], cut[end] = total, start
    jobs, end = [], len(widths)
    while end:
        start = cut[end]
        jobs.append((start, end - start, max(widths[start:end])))
        end = start
    return jobs[::-1]


def tile_widths(slots, m_size, tile_m):
    """Slots per row of each output tile: its widest row (at least one slot, all padding if empty)."""
    tiles = -(-m_size // tile_m)
    return [
        max([1] + [len(slots.get(m, [])) for m in range(i * tile_m, (i + 1) * tile_m)]) for i in range(tiles)
    ]


async def run_sparse(dut, *, idle, backpressure, specials):
    tb = SparseTB(dut)
    rng = await stalled_start(tb, idle, backpressure, 4 * specials + 2 * idle + backpressure + 100)
    fraction = 0.2 if specials else 0.0
    tile_m = tb.rows * tb.slots
    shapes = [(1, 1, 1, 0.5), (32, 32, tb.cols + 1, 0.001), (3 * tile_m - 1, 20, 2, 0.01),
              (5, 7, 2 * tb.cols + 1, 0.5)]
    shapes += [(int(rng.integers(1, 3 * tile_m + 2)), int(rng.integers(1, 40)),
                int(rng.integers(1, 2 * tb.cols + 2)), float(rng.choice(DENSITIES)))
               for _ in range(knobs.vectors(DEFAULT_GEMMS, limit=40))]
    for m_size, k_size, n_size, density in shapes:
        a = sparse_matrix(rng, (m_size, k_size), tb.element, density, fraction)
        b = random_matrix(rng, (k_size, n_size), tb.element, fraction)
        d = random_accumulator(rng, (m_size, n_size), tb.element, fraction) if tb.accumulate else None
        tau = float(rng.uniform(0.1, 1.0))
        padded = padded_csr(a, change_threshold=tau, element=tb.element)
        slots = row_slots(padded)
        widths = tile_widths(slots, m_size, tile_m)
        measured, model = await tb.run_tile_rows(
            slots, widths, b, d, partial(sparse_gemm, padded), exact_cycles=not (idle or backpressure)
        )
        dense = tb.model_cycles(m_size, k_size, n_size)
        dut._log.info("sparse GEMM %dx%dx%d, %d non-zeros (%.2f%%), tau %.2f, %d groups, widths %s: "
                      "%d cycles (model %d; dense %d)", m_size, k_size, n_size, padded.nnz,
                      100 * padded.nnz / a.size, tau, len(padded.groups), widths, measured, model, dense)


def _stacked(paths, tile_m, b_pad, d_pad):
    return np.concatenate([path(b_pad, None if d_pad is None else d_pad[i * tile_m : (i + 1) * tile_m])
                           for i, path in enumerate(paths)])


async def run_mixed(dut, *, thresholds):
    """Algorithm 2 picks dense or sparse per tile row; run each tile row that way; check bits and cycles."""
    tb = SparseTB(dut)
    rng = await stalled_start(tb, False, False, 200)
    tile_m = tb.rows * tb.slots
    max_k = tb.params["max_k"]  # K = tile_cols tile_m must fit the B buffer and the command
    assert max_k >= tile_m, f"max_k = {max_k} holds no square tile of {tile_m} rows"
    for threshold in [threshold for threshold in thresholds for _ in range(knobs.vectors(2, limit=20))]:
        tile_rows, tile_cols = int(rng.integers(3, 6)), int(rng.integers(1, min(3, max_k // tile_m) + 1))
        k_size, n_size = tile_cols * tile_m, int(rng.integers(1, 2 * tb.cols + 2))
        # Tile row densities over 0 .. 100 %: a full and an empty one (dense and sparse under every
        # threshold in (0, 1]), the rest drawn, so the threshold decides them.
        densities = [1.0, 0.0] + [
            float(x) for x in rng.choice([0.001, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9], tile_rows - 2)
        ]
        rng.shuffle(densities)
        a = np.concatenate([sparse_matrix(rng, (tile_m, k_size), tb.element, rho) for rho in densities])
        b = random_matrix(rng, (k_size, n_size), tb.element)
        d = random_accumulator(rng, (a.shape[0], n_size), tb.element) if tb.accumulate else None
        tau = float(rng.uniform(0.1, 1.0))
        plans = plan_tile_rows(a, tile_size=tile_m, change_threshold=tau, imbalance_ratio=1e9, coverage=1.0,
                               density_threshold=threshold, element=tb.element)
        kinds = [plan.pe_kind for plan in plans]
        for plan in plans:  # the choice follows the threshold, both ways
            assert plan.pe_kind == ("dense" if plan.density >= threshold else "sparse"), (plan, threshold)
            assert plan.pe_kind == choose_pe_kind(plan.density, threshold)
            assert plan.overflow == 0
        assert "dense" in kinds and "sparse" in kinds, (kinds, [plan.density for plan in plans])
        slots, widths, paths = {}, [], []
        for plan in plans:
            rows = slice(plan.index * tile_m, (plan.index + 1) * tile_m)
            if plan.pe_kind == "dense":
                tile_slots = dense_slots(a[rows])
                paths.append(partial(gemm, a[rows], element=tb.element))
            else:
                padded = padded_csr(a[rows], change_threshold=tau, element=tb.element)
                tile_slots = row_slots(padded)
                paths.append(partial(sparse_gemm, padded))
            slots.update({plan.index * tile_m + m: row for m, row in tile_slots.items()})
            widths.append(max([1] + [len(row) for row in tile_slots.values()]))

        mixed = partial(_stacked, paths, tile_m)  # each tile row through its own golden path
        measured, model = await tb.run_tile_rows(slots, widths, b, d, mixed, exact_cycles=True)
        all_dense = tb.model_cycles(a.shape[0], k_size, n_size)
        dut._log.info("mixed GEMM %dx%dx%d, threshold %.2f: tile rows %s (densities %s), widths %s: "
                      "%d cycles (model %d; all dense %d)", a.shape[0], k_size, n_size, threshold, kinds,
                      [round(plan.density, 3) for plan in plans], widths, measured, model, all_dense)


@cocotb.test()
async def bad_index_sets_error(dut):
    """A valid slot naming a B row at or past the loaded K raises error; the next command clears it."""
    tb = SparseTB(dut)
    rng = await stalled_start(tb, False, False, 300)
    k_size = 3
    b = random_matrix(rng, (k_size, tb.cols), tb.element)
    a = sparse_matrix(rng, (tb.rows * tb.slots, k_size), tb.element, 0.5)
    padded = padded_csr(a, change_threshold=0.5, element=tb.element)
    d = random_accumulator(rng, a.shape[:1] + (tb.cols,), tb.element) if tb.accumulate else None
    good = row_slots(padded)
    bad = {m: list(row) for m, row in good.items()}
    victim = int(rng.integers(0, a.shape[0]))
    bad[victim] = bad[victim] + [(1, k_size)]  # one more valid slot, one row past the loaded K
    assert int(dut.error.value) == 0
    await tb.run_tile_rows(good, tile_widths(good, a.shape[0], tb.rows * tb.slots), b, d,
                           partial(sparse_gemm, padded), exact_cycles=True)  # also asserts error == 0
    tb.cmd.send_nowait({"load": 1, "k": k_size, "tiles": 0})
    tb.b.send_many([[int(x) for x in b[k]] for k in range(k_size)])
    width = max(len(row) for row in bad.values())
    items = [[({"value": bad[lane * tb.slots + u][s][0], "index": bad[lane * tb.slots + u][s][1], "valid": 1}
               if s < len(bad.get(lane * tb.slots + u, [])) else PAD) for lane in range(tb.rows)]
             for s in range(width) for u in range(tb.slots)]
    tb.cmd.send_nowait({"load": 0, "k": width, "tiles": 1})
    tb.a.send_many(items)
    if tb.d:
        tb.d.send_many([[int(x) for x in row] for row in d])
    for _ in range(tb.rows * tb.slots):
        await with_timeout(tb.c.recv(), 100000, "ns")
    assert int(dut.error.value) == 1, f"index {k_size} >= loaded K {k_size} not flagged; {knobs.describe()}"
    await tb.run_tile_rows(good, tile_widths(good, a.shape[0], tb.rows * tb.slots), b, d,
                           partial(sparse_gemm, padded), exact_cycles=True)  # the next command clears it


@cocotb.test()
async def bad_commands_rejected(dut):
    """Loads and jobs with k or tiles 0 or past max_k / max_tiles: consumed, cmd_error, nothing runs."""
    tb = SparseTB(dut)
    limits = size_limits({"k": "max_k", "tiles": "max_tiles"})
    commands = (bad_commands({"load": 1, "k": 1, "tiles": 0}, {"k": limits["k"]})
                + bad_commands({"load": 0, "k": 1, "tiles": 1}, limits))
    rng = knobs.rng(301)
    a = sparse_matrix(rng, (tb.rows * tb.slots, 3), tb.element, 0.5)
    padded = padded_csr(a, change_threshold=0.5, element=tb.element)
    b = random_matrix(rng, (3, tb.cols), tb.element)
    d = random_accumulator(rng, a.shape[:1] + (tb.cols,), tb.element) if tb.accumulate else None
    good = row_slots(padded)
    await reject_then_run(tb, tb.cmd, commands, lambda: tb.run_tile_rows(
        good, tile_widths(good, a.shape[0], tb.rows * tb.slots), b, d, partial(sparse_gemm, padded),
        exact_cycles=True))


@cocotb.test()
async def sparse_bits_and_cycles(dut):
    """Padded-CSR GEMMs of 0.1 %-50 % density: bits equal sparse_gemm, job cycles equal gemm_cycles."""
    await run_sparse(dut, idle=False, backpressure=False, specials=False)


@cocotb.test()
async def sparse_under_stalls(dut):
    """Special values in A, B, D; random gaps on cmd-driven a, b, d and backpressure on c: bits exact."""
    await run_sparse(dut, idle=True, backpressure=True, specials=True)


@cocotb.test()
async def mixed_dense_sparse(dut):
    """plan_tile_rows' choice per tile row (threshold 0.5, then 0.25): the mixed result is bit-exact."""
    await run_mixed(dut, thresholds=(0.5, 0.25))


@cocotb.test()
@cocotb.parametrize(when=["inputs", "outputs"])
async def reset_mid_gemm(dut, when):
    """Reset at a random cycle while a sparse GEMM's B loads and jobs stream in (or its rows stream
    out) under random stalls; then nothing comes out, and a clean sparse GEMM equals sparse_gemm bit
    for bit, every job in gemm_cycles."""
    tb = SparseTB(dut)
    salt = 500 + (when == "outputs")
    rng = knobs.rng(salt + 10)
    tile_m = tb.rows * tb.slots
    runs = []
    for m_size, k_size, n_size in [(2 * tile_m, 6, 2 * tb.cols), (tile_m + 1, 5, tb.cols + 1)]:
        a = sparse_matrix(rng, (m_size, k_size), tb.element, 0.3, 0.2)
        b = random_matrix(rng, (k_size, n_size), tb.element, 0.2)
        d = random_accumulator(rng, (m_size, n_size), tb.element, 0.2) if tb.accumulate else None
        padded = padded_csr(a, change_threshold=0.5, element=tb.element)
        slots = row_slots(padded)
        runs.append((slots, tile_widths(slots, m_size, tile_m), b, d, partial(sparse_gemm, padded)))
    # Two column tiles, each a B load of K = 6 rows, then jobs of 2 tile_m result rows in all.
    watch, transfers = (tb.b, 2 * 6) if when == "inputs" else (tb.c, 2 * 2 * tile_m)
    await reset_then_clean(
        tb, interrupted=lambda: tb.run_tile_rows(*runs[0], exact_cycles=False),
        clean=lambda: tb.run_tile_rows(*runs[1], exact_cycles=True), drivers=tb.drivers, sink=tb.c,
        watch=watch, window=transfers - 2, quiet=2 * tb.model_cycles(2 * tile_m, 6, tb.cols) + 20, salt=salt)


CASES = [
    {"rows": 2, "cols": 2, "tensor": 2, "element": "int8", "slots": 1, "accumulate": True},
    {"rows": 1, "cols": 1, "tensor": 2, "element": "f16", "slots": 2, "accumulate": True},
]
SLOW_CASES = [
    {"rows": 2, "cols": 1, "tensor": 2, "element": "bf16", "slots": 6, "accumulate": True},
    {"rows": 2, "cols": 2, "tensor": 1, "element": "f32", "slots": 1},
]


@parametrize_cases(CASES, SLOW_CASES)
def test_sparse_tensor_array(params):
    run_cocotb("sparse_tensor_array", MODULE, params={**params, "max_k": 64, "max_tiles": 16})


@pytest.mark.parametrize("kwargs, match", [
    ({"tensor": 0}, "tensor"), ({"max_k": 0}, "max_k"), ({"max_k": 1 << 17}, "max_k"),
    ({"cols": 300}, "cols"), ({"element": "int4"}, "element"), ({"accumulate": 1}, "accumulate"),
])
def test_sparse_tensor_array_rejects_bad_parameters(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        SparseTensorArray(**kwargs)
