"""cocotb tests of :class:`rtl.systolic.block_fp_array.BlockFloatArray` against golden.systolic.

Each GEMM's binary32 operands are encoded with :func:`golden.systolic.to_block_fp` along K, cut
into the array's tiles by the output-stationary bench's ``tile_streams`` (mantissas and the
per-k shared exponents, K padded to whole blocks with zero mantissas) and run through its
``run_job``: every result row is checked bit for bit against :func:`golden.systolic.block_fp_gemm`,
and without stalls the cycle count (measured from the first ``a`` transfer to the last ``c``
transfer, and reported on ``cycles``) must equal :func:`golden.systolic.block_fp.block_fp_gemm_cycles`.

With ``accumulate`` every GEMM also streams a random binary32 D (with the output-stationary bench's
specials: NaNs, infinities, signed zeros, subnormals, in the ``exponent_range`` and stall tests) on
``d``, and :func:`signed_zero_operands` checks that a D of -0.0 plus a block sum rounding to -0.0
stays -0.0 (a first block started from +0, or from a neighbour's d, gives +0.0 or garbage).
"""

import cocotb
import numpy as np

from golden.systolic.block_fp import block_fp_gemm, block_fp_gemm_cycles, to_block_fp
from scripts.sim import knobs
from testbenches.systolic.commands import bad_commands, reject_then_run, reset_mid_os_job, size_limits
from testbenches.systolic.schedule import block_fp_schedule
from testbenches.systolic.tb import (
    OutputStationaryTB,
    os_shapes,
    random_accumulator,
    random_operand,
    tie_operands,
    tile_streams,
)

DEFAULT_GEMMS = 4


def signed_zero_operands(rng, m_size, n_size, block):
    """One block, D = -0.0: ``A[i, 0] = ±2^-75``, ``B[0, j] = 2^-75``, the rest of the block 0.

    Each block sum is ``±2^-150``, a tie that rounds to ±0.0; added to d = -0.0 it gives -0.0 in
    the rows of -2^-75 (row 0 among them) and +0.0 in the others.
    """
    a = np.zeros((m_size, block), np.float32)
    b = np.zeros((block, n_size), np.float32)
    a[:, 0] = rng.choice([1.0, -1.0], m_size) * 2.0**-75
    a[0, 0] = -(2.0**-75)
    b[0, :] = 2.0**-75
    d = np.full((m_size, n_size), 0x80000000, np.uint32)
    return a.view(np.uint32), b.view(np.uint32), d


class BlockTB(OutputStationaryTB):
    """The output-stationary bench with block floating point operands and model."""

    def __init__(self, dut):
        super().__init__(dut)
        self.block = self.params.get("block", 8)
        self.mantissa_bits = self.params.get("mantissa_bits", 8)

    def model_cycles(self, m_size, k_size, n_size):
        """``block_fp_gemm_cycles`` of one GEMM on this array, with the documented latencies."""
        geometry = dict(rows=self.rows, cols=self.cols, block=self.block)
        return block_fp_gemm_cycles(m_size, k_size, n_size, **geometry,
                                    **block_fp_schedule(**geometry, slots=self.slots))

    def encode(self, a, b):
        """Transfers of one GEMM: mantissas and shared exponents per k, K padded to whole blocks."""
        block, bits = self.block, self.mantissa_bits
        exp_a, mant_a = to_block_fp(a, block=block, mantissa_bits=bits, axis=1)
        exp_b, mant_b = to_block_fp(b, block=block, mantissa_bits=bits, axis=0)
        blocks = exp_a.shape[1]
        padded = blocks * block
        mantissas_a = np.zeros((a.shape[0], padded), np.int64)
        mantissas_a[:, :a.shape[1]] = mant_a
        mantissas_b = np.zeros((padded, b.shape[1]), np.int64)
        mantissas_b[:b.shape[0]] = mant_b
        exponents_a = np.repeat(exp_a.astype(np.int64), block, axis=1)
        exponents_b = np.repeat(exp_b.astype(np.int64), block, axis=0)
        geometry = dict(rows=self.rows, cols=self.cols, slots=self.slots)
        origins, *_, a_mant, b_mant, _ = tile_streams(mantissas_a, mantissas_b, None, **geometry)
        *_, a_exp, b_exp, _ = tile_streams(exponents_a, exponents_b, None, **geometry)

        def operands(mantissas, exponents):
            return [[{"mantissa": m, "exponent": e} for m, e in zip(ms, es, strict=True)]
                    for ms, es in zip(mantissas, exponents, strict=True)]

        return origins, blocks, operands(a_mant, a_exp), operands(b_mant, b_exp)

    async def run_block_gemm(self, a, b, d=None, *, exact_cycles):
        """One GEMM (``d``: raw binary32 D, with ``accumulate``): bits against block_fp_gemm, cycles
        against block_fp_gemm_cycles. Returns (measured, model, expected result bits)."""
        (m_size, k_size), n_size = a.shape, b.shape[1]
        origins, blocks, a_items, b_items = self.encode(a, b)
        d_items = []
        if d is not None:
            *_, d_items = tile_streams(a, b, d, rows=self.rows, cols=self.cols, slots=self.slots)
        tile_m = self.rows * self.slots
        expected = np.zeros((-(-m_size // tile_m) * tile_m, -(-n_size // self.cols) * self.cols), np.uint32)
        bits = dict(block=self.block, mantissa_bits=self.mantissa_bits)
        expected[:m_size, :n_size] = block_fp_gemm(a, b, d, **bits)
        model = self.model_cycles(m_size, k_size, n_size)
        label = f"GEMM {a.shape} x {b.shape}" + (" + D" if d is not None else "")
        command = {"blocks": blocks, "tiles": len(origins)}
        measured, model = await self.run_job(label, command, origins, expected, a_items, b_items, d_items,
                                             model, exact_cycles=exact_cycles)
        return measured, model, expected[:m_size, :n_size]


async def run_test(dut, *, idle, backpressure, wide, edges):
    tb = BlockTB(dut)
    salt = 8 * edges + 4 * wide + 2 * idle + backpressure
    tb.stall(idle, backpressure, salt)
    await tb.reset()
    rng = knobs.rng(salt)
    gemms = os_shapes(tb, rng, knobs.vectors(DEFAULT_GEMMS))
    # K just past a block boundary, and several whole blocks.
    gemms += [(tb.rows * tb.slots, tb.block + 1, tb.cols), (2, 3 * tb.block, tb.cols + 1)]
    for m_size, k_size, n_size in gemms:
        a = random_operand(rng, (m_size, k_size), wide=wide, edges=edges)
        b = random_operand(rng, (n_size, k_size), wide=wide, edges=edges).T.copy()  # scaled per column
        d = random_accumulator(rng, (m_size, n_size), "f32", 0.25 * edges) if tb.accumulate else None
        measured, model, _ = await tb.run_block_gemm(a, b, d, exact_cycles=not (idle or backpressure))
        dut._log.info("GEMM %dx%dx%d: %d cycles (model %d)", m_size, k_size, n_size, measured, model)
    if wide:
        a, b = tie_operands(rng, tb.rows * tb.slots + 1, tb.cols + 1, tb.block)
        d = random_accumulator(rng, (a.shape[0], b.shape[1]), "f32", 0.25) if tb.accumulate else None
        await tb.run_block_gemm(a, b, d, exact_cycles=not (idle or backpressure))
    if tb.accumulate:
        *_, expected = await tb.run_block_gemm(*signed_zero_operands(rng, tb.rows * tb.slots + 1, tb.cols + 1,
                                                                     tb.block),
                                               exact_cycles=not (idle or backpressure))
        assert expected[0, 0] == 0x80000000, "the signed-zero GEMM must expect -0.0"


@cocotb.test()
async def gemm_bits_and_cycles(dut):
    """Random GEMMs (1x1x1, tall, wide, K = 1, K past a block): bits equal block_fp_gemm, cycles the model."""
    await run_test(dut, idle=False, backpressure=False, wide=False, edges=False)


@cocotb.test()
async def exponent_range(dut):
    """Blocks over the whole exponent range: overflow to infinity, subnormal and zero results, edges, ties."""
    await run_test(dut, idle=False, backpressure=False, wide=True, edges=True)


@cocotb.test()
async def gemm_under_stalls(dut):
    """Random gaps on a, b (and d) and random backpressure on c: bits still exact."""
    await run_test(dut, idle=True, backpressure=True, wide=True, edges=True)


@cocotb.test()
async def bad_commands_rejected(dut):
    """blocks or tiles 0 or past their maximum: consumed, cmd_error, nothing runs; a good GEMM clears it."""
    tb = BlockTB(dut)
    rng = knobs.rng(99)
    a = random_operand(rng, (tb.rows * tb.slots, tb.block + 1), wide=False, edges=False)
    b = random_operand(rng, (tb.cols, tb.block + 1), wide=False, edges=False).T.copy()
    d = random_accumulator(rng, (a.shape[0], b.shape[1]), "f32") if tb.accumulate else None
    limits = size_limits({"blocks": "max_blocks", "tiles": "max_tiles"})
    commands = bad_commands({"blocks": 1, "tiles": 1}, limits)
    await reject_then_run(tb, tb.cmd, commands, lambda: tb.run_block_gemm(a, b, d, exact_cycles=True))


@cocotb.test()
@cocotb.parametrize(when=["inputs", "outputs"])
async def reset_mid_gemm(dut, when):
    """Reset in the middle of a GEMM (two blocks of K) under random stalls: nothing leaks, and a
    clean GEMM equals block_fp_gemm bit for bit in block_fp_gemm_cycles."""
    tb = BlockTB(dut)

    def operands(rng, shape):
        m_size, k_size, n_size = shape
        a = random_operand(rng, (m_size, k_size), wide=True, edges=True)
        b = random_operand(rng, (n_size, k_size), wide=True, edges=True).T.copy()
        d = random_accumulator(rng, (m_size, n_size), "f32", 0.25) if tb.accumulate else None
        return a, b, d

    await reset_mid_os_job(tb, when, tb.run_block_gemm, operands, k_size=tb.block + 2)
