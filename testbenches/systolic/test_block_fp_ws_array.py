# amaranth: UnusedElaboratable=no
"""block_fp_ws_array: cocotb tests of the weight-stationary block floating point array against
golden.systolic, and their pytest runners and parameter checks (at the bottom).

The block is :class:`rtl.systolic.block_fp_ws_array.BlockFloatWeightStationaryArray`.

Each GEMM's binary32 operands are encoded with :func:`golden.systolic.to_block_fp` along K (A per
row, B per column) and streamed as the weight-stationary bench streams its operands (its
``run_job``): every result row is checked bit for bit against :func:`golden.systolic.block_fp_gemm`
(with ``d`` when the array accumulates), and without stalls the cycles from the first ``w``
transfer to the last ``c`` transfer must equal
``block_fp_gemm_cycles(..., dataflow="weight_stationary")``.

The Python tests check the parameters, the cycle model and that the latency attributes equal
docs/systolic.md's (Section 7d).
"""

import cocotb
import numpy as np
import pytest

from golden.systolic import gemm_cycles
from golden.systolic.block_fp import block_fp_gemm, block_fp_gemm_cycles, to_block_fp
from rtl.registry import get_block
from rtl.systolic.block_fp_ws_array import BlockFloatWeightStationaryArray
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from testbenches.systolic.commands import bad_ws_commands, reject_then_run, reset_mid_ws_job
from testbenches.systolic.schedule import block_fp_schedule
from testbenches.systolic.tb import (
    BlockFormatTB,
    WeightStationaryTB,
    case_id,
    gemm_tests,
    parametrize_cases,
    random_accumulator,
    random_block_operands,
    stalled_start,
    tie_operands,
)

MODULE = __name__
DEFAULT_GEMMS = 4


class BlockTB(BlockFormatTB, WeightStationaryTB):
    """The weight-stationary bench with block floating point operands and model."""

    default_block = 2
    dataflow = "weight_stationary"

    def cells(self, x, axis):
        """Transfer lanes of one operand: ``{mantissa, exponent}`` per element, blocked along K (``axis``)."""
        exponents, mantissas = to_block_fp(x, block=self.block, mantissa_bits=self.mantissa_bits, axis=axis)
        exponents = np.repeat(exponents, self.block, axis=axis).take(np.arange(x.shape[axis]), axis=axis)
        return [[{"mantissa": int(m), "exponent": int(e)} for m, e in zip(ms, es, strict=True)]
                for ms, es in zip(mantissas, exponents, strict=True)]

    async def run_block_gemm(self, a, b, d=None, *, exact_cycles):
        """One GEMM: bits against block_fp_gemm, cycles against block_fp_gemm_cycles."""
        (m_size, k_size), n_size = a.shape, b.shape[1]
        n_pad = -(-n_size // self.cols) * self.cols
        b_cols = np.zeros((k_size, n_pad), np.uint32)
        b_cols[:, :n_size] = b
        d_cols = None
        if d is not None:
            d_cols = np.zeros((m_size, n_pad), np.uint32)
            d_cols[:, :n_size] = d
        expected = block_fp_gemm(a, b_cols, d_cols, block=self.block, mantissa_bits=self.mantissa_bits)
        model = self.model_cycles(m_size, k_size, n_size)
        return await self.run_job(self.cells(a, 1), self.cells(b, 0), None if d is None else d.tolist(),
                                  expected, model, padding={"mantissa": 0, "exponent": 0},
                                  exact_cycles=exact_cycles)


def shapes(tb, rng, count):
    """1x1x1, K just past a block and a k-tile, several k-tiles and n-tiles, then random shapes."""
    fixed = [(1, 1, 1), (3, tb.block + 1, tb.cols), (2, tb.rows + 1, tb.cols + 1),
             (2 * tb.rows + 3, 2 * tb.rows + tb.block - 1, 2 * tb.cols + 1), (1, 3 * tb.rows, 1)]
    return fixed + [(int(rng.integers(1, 20)), int(rng.integers(1, 3 * tb.rows + 2)),
                     int(rng.integers(1, 3 * tb.cols))) for _ in range(count)]


async def run_test(dut, *, idle, backpressure, specials):
    """Random GEMMs, bits against block_fp_gemm and cycles against its model; with ``specials``
    blocks over the whole exponent range (overflow, subnormal and zero results, edge values, ties),
    special D values, and the signed-zero GEMM."""
    wide = edges = specials
    tb = BlockTB(dut)
    rng = await stalled_start(tb, idle, backpressure, 8 * edges + 4 * wide + 2 * idle + backpressure)
    exact = not (idle or backpressure)

    def accumulator(shape):
        if not tb.accumulate:
            return None
        return random_accumulator(rng, shape, "f32", 0.25 if edges else 0.0).view(np.uint32)

    for m_size, k_size, n_size in shapes(tb, rng, knobs.vectors(DEFAULT_GEMMS, limit=40)):
        a, b = random_block_operands(rng, m_size, k_size, n_size, wide=wide, edges=edges)
        measured, model = await tb.run_block_gemm(a, b, accumulator((m_size, n_size)), exact_cycles=exact)
        dut._log.info("GEMM %dx%dx%d: %d cycles (model %d)", m_size, k_size, n_size, measured, model)
    if wide:
        a, b = tie_operands(rng, 3, tb.cols + 1, tb.block)
        await tb.run_block_gemm(a, b, accumulator((3, tb.cols + 1)), exact_cycles=exact)
    if tb.accumulate:
        # D = -0.0 plus a block sum of -2^-150, which rounds to -0.0: the result is -0.0 only if
        # the blocks past K (rows > block) add nothing, not +0.0.
        a = np.zeros((3, 1), np.float32)
        a[:, 0] = -(2.0**-75)
        b = np.full((1, tb.cols + 1), 2.0**-75, np.float32)
        d = np.full((3, tb.cols + 1), 0x80000000, np.uint32)
        await tb.run_block_gemm(a.view(np.uint32), b.view(np.uint32), d, exact_cycles=exact)


globals().update(gemm_tests(run_test, specials_name="exponent_range"))


@cocotb.test()
async def bad_commands_rejected(dut):
    """m, k or n_tiles 0 or past its maximum: consumed, cmd_error, nothing runs; a good GEMM clears it."""
    tb = BlockTB(dut)
    rng = knobs.rng(99)
    a, b = random_block_operands(rng, 3, tb.rows + 1, tb.cols, wide=False, edges=False)
    d = np.zeros((3, tb.cols), np.uint32) if tb.accumulate else None
    await reject_then_run(tb, tb.sources["cmd"], bad_ws_commands(),
                          lambda: tb.run_block_gemm(a, b, d, exact_cycles=True))


@cocotb.test()
@cocotb.parametrize(when=["inputs", "outputs"])
async def reset_mid_gemm(dut, when):
    """Reset in the middle of a GEMM under random stalls: nothing leaks, and a clean GEMM equals
    block_fp_gemm bit for bit in block_fp_gemm_cycles."""
    tb = BlockTB(dut)

    def operands(rng, shape):
        m_size, k_size, n_size = shape
        a, b = random_block_operands(rng, m_size, k_size, n_size, wide=True, edges=True)
        d = random_accumulator(rng, (m_size, n_size), "f32", 0.25).view(np.uint32) if tb.accumulate else None
        return a, b, d

    await reset_mid_ws_job(tb, when, tb.run_block_gemm, operands)


CASES = [
    # Two blocks per k-tile (L = 3: the accumulator must wait for the next block), with D.
    {"rows": 4, "cols": 2, "block": 2, "mantissa_bits": 8, "accumulate": True},
    # One block per k-tile, block = 1 (L = 6), a 5-bit mantissa.
    {"rows": 1, "cols": 3, "block": 1, "mantissa_bits": 5},
]
SLOW_CASES = [
    {"rows": 8, "cols": 3, "block": 4, "mantissa_bits": 12, "accumulate": True},
    {"rows": 6, "cols": 2, "block": 3, "mantissa_bits": 8},
    {"rows": 16, "cols": 2, "block": 16, "mantissa_bits": 16, "accumulate": True},
]


@parametrize_cases(CASES, SLOW_CASES)
def test_block_fp_ws_array(params):
    run_cocotb("block_fp_ws_array", MODULE, params={**params, "max_m": 64, "max_k": 64, "max_tiles": 16})


@pytest.mark.parametrize("params, message", [
    ({"rows": 3, "block": 2}, r"rows must be a multiple of block = 2 \(whole blocks per k-tile\), not 3"),
    ({"block": 0}, "block must be in 1..64, not 0"),
    ({"mantissa_bits": 25}, "mantissa_bits must be in 2..24, not 25"),
    ({"rows": 0}, "rows must be in 1..256, not 0"),
])
def test_bad_parameters(params, message):
    """A bad geometry or format is a Python error naming the parameter and its range."""
    with pytest.raises(ValueError, match=message):
        BlockFloatWeightStationaryArray(**params)
    with pytest.raises(ValueError, match=next(iter(params))):
        get_block("block_fp_ws_array").build(params)


def test_cycle_model():
    """The dense weight-stationary count plus the converter and adder below the last block; a
    shorter chain between k-tiles because the buffer is read only for the first block's addition."""
    latency = 3  # max(2, ceil(6 / block))
    assert block_fp_schedule(rows=4, cols=2, block=2, dataflow="weight_stationary") == {
        "mac_latency": latency, "convert_latency": 4, "add_latency": 6}
    model = dict(rows=4, cols=2, block=2, dataflow="weight_stationary", mac_latency=latency,
                 convert_latency=4, add_latency=6)
    dense = dict(rows=4, cols=2, dataflow="weight_stationary", mac_latency=latency)
    # One k-tile: no chain; every tile adds 10 once, at the end.
    assert block_fp_gemm_cycles(5, 3, 4, **model) == gemm_cycles(5, 3, 4, **dense) + 10
    # M = 1, two k-tiles: load 4, then a period of chain = (rows - block) L + 7 = 13 (over
    # M + cols - 1 + (rows - 1) L = 11), then the stream 1 + 1 + rows L + 10 = 24.
    assert block_fp_gemm_cycles(1, 8, 2, **model) == 4 + 13 + 24
    with pytest.raises(ValueError, match="rows must be a multiple of block"):
        block_fp_gemm_cycles(1, 1, 1, **{**model, "rows": 3})


@pytest.mark.parametrize("params", CASES + SLOW_CASES, ids=case_id)
def test_latency_attributes_are_the_documented_ones(params):
    """``mac_latency`` and ``tail_latency`` equal Section 7d's (``schedule.block_fp_schedule``), which
    the cocotb bench gives the cycle model instead of the block's own attributes."""
    array = BlockFloatWeightStationaryArray(**params)
    expected = block_fp_schedule(rows=params["rows"], cols=params["cols"], block=params["block"],
                                 dataflow="weight_stationary")
    assert array.mac_latency == expected["mac_latency"]
    assert array.tail_latency == expected["convert_latency"] + expected["add_latency"]
