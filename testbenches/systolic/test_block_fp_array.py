# amaranth: UnusedElaboratable=no
"""block_fp_array: cocotb tests of :class:`rtl.systolic.block_fp_array.BlockFloatArray` against
golden.systolic, and their pytest runners and parameter checks (at the bottom).

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

The Python tests check the parameters, the cycle model's padding of K to whole blocks, the ``d``
port and ``fill_lead``, and that the latency attributes equal docs/systolic.md's (Section 7c).
"""

import cocotb
import numpy as np
import pytest

from golden.systolic import gemm_cycles
from golden.systolic.block_fp import block_fp_gemm, block_fp_gemm_cycles, to_block_fp
from rtl.registry import get_block
from rtl.systolic.block_fp_array import BlockFloatArray
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from testbenches.systolic.commands import bad_commands, reject_then_run, reset_mid_os_job, size_limits
from testbenches.systolic.schedule import block_fp_schedule
from testbenches.systolic.tb import (
    BlockFormatTB,
    OutputStationaryTB,
    case_id,
    gemm_tests,
    os_shapes,
    parametrize_cases,
    random_accumulator,
    random_block_operands,
    stalled_start,
    tie_operands,
    tile_streams,
)

MODULE = __name__
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


class BlockTB(BlockFormatTB, OutputStationaryTB):
    """The output-stationary bench with block floating point operands and model."""

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


async def run_test(dut, *, idle, backpressure, specials):
    """Random GEMMs, bits against block_fp_gemm and cycles against its model; with ``specials``
    blocks over the whole exponent range (overflow, subnormal and zero results, edge values, ties),
    special D values, and the signed-zero GEMM."""
    wide = edges = specials
    tb = BlockTB(dut)
    rng = await stalled_start(tb, idle, backpressure, 8 * edges + 4 * wide + 2 * idle + backpressure)
    gemms = os_shapes(tb, rng, knobs.vectors(DEFAULT_GEMMS, limit=40))
    # K just past a block boundary, and several whole blocks.
    gemms += [(tb.rows * tb.slots, tb.block + 1, tb.cols), (2, 3 * tb.block, tb.cols + 1)]
    for m_size, k_size, n_size in gemms:
        a, b = random_block_operands(rng, m_size, k_size, n_size, wide=wide, edges=edges)
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


globals().update(gemm_tests(run_test, specials_name="exponent_range"))


@cocotb.test()
async def bad_commands_rejected(dut):
    """blocks or tiles 0 or past their maximum: consumed, cmd_error, nothing runs; a good GEMM clears it."""
    tb = BlockTB(dut)
    rng = knobs.rng(99)
    a, b = random_block_operands(rng, tb.rows * tb.slots, tb.block + 1, tb.cols, wide=False, edges=False)
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
        a, b = random_block_operands(rng, m_size, k_size, n_size, wide=True, edges=True)
        d = random_accumulator(rng, (m_size, n_size), "f32", 0.25) if tb.accumulate else None
        return a, b, d

    await reset_mid_os_job(tb, when, tb.run_block_gemm, operands, k_size=tb.block + 2)


CASES = [
    # beat_len 2 (ceil(6 / 4)): idle beats; one group of two PEs per row.
    {"rows": 2, "cols": 2, "block": 4, "mantissa_bits": 8, "slots": 1},
    # D: two groups per row (2 + 1 PEs, the second PE of a group reads its d T + 1 cycles after the
    # first), two rows, T = 3 (d bank a memory), a 6-bit mantissa; fill_lead -3 (D after the first beat).
    {"rows": 2, "cols": 3, "block": 2, "mantissa_bits": 6, "slots": 3, "accumulate": True},
]
SLOW_CASES = [
    {"rows": 4, "cols": 4, "block": 8, "mantissa_bits": 8, "slots": 1},
    {"rows": 3, "cols": 5, "block": 2, "mantissa_bits": 12, "slots": 2},
    {"rows": 2, "cols": 3, "block": 16, "mantissa_bits": 16, "slots": 1},
    {"rows": 1, "cols": 3, "block": 2, "mantissa_bits": 6, "slots": 3},
    # D with fill_lead = 2 (> 0: a tile's D enters before its first beat), groups of 2 + 1, T = 2.
    {"rows": 5, "cols": 3, "block": 2, "mantissa_bits": 8, "slots": 2, "accumulate": True},
]


@parametrize_cases(CASES, SLOW_CASES)
def test_block_fp_array(params):
    run_cocotb("block_fp_array", MODULE, params={**params, "max_blocks": 16, "max_tiles": 64})


@pytest.mark.parametrize("name, value, message", [
    ("block", 0, "block must be in 1..64, not 0"),
    ("block", 65, "block must be in 1..64, not 65"),
    ("mantissa_bits", 1, "mantissa_bits must be in 2..24, not 1"),
    ("mantissa_bits", 25, "mantissa_bits must be in 2..24, not 25"),
    ("slots", 0, "slots must be in 1..64, not 0"),
])
def test_bad_parameters(name, value, message):
    """A bad block or mantissa width is a Python error naming the parameter and its range."""
    with pytest.raises(ValueError, match=message):
        BlockFloatArray(**{name: value})
    with pytest.raises(ValueError, match=name):
        get_block("block_fp_array").resolve({name: value})


def test_cycle_model_pads_k_to_blocks():
    """K rounds up to whole blocks; beat_len = max(T, ceil(6 / block)) sets acc_latency."""
    array = BlockFloatArray(rows=2, cols=2, block=4, mantissa_bits=8, slots=1)
    assert (array.acc_latency, array.beat_len) == (2, 2)
    # docs/systolic.md 7c: L = 6 + 4 + 6 + max off - cols = 17 for 2 x 2, block 4, T = 1.
    assert block_fp_schedule(rows=2, cols=2, block=4) == {"tile": 1, "mac_latency": 17, "acc_latency": 2}
    schedule = dict(rows=2, cols=2, tile=1, mac_latency=17, acc_latency=2)
    assert block_fp_gemm_cycles(5, 5, 3, block=4, **schedule) == gemm_cycles(5, 8, 3, **schedule)
    assert block_fp_gemm_cycles(5, 8, 3, block=4, **schedule) == gemm_cycles(5, 8, 3, **schedule)
    assert BlockFloatArray(block=8, slots=1).beat_len == 1  # one MAC per PE per cycle from T = 1


def test_accumulate_ports_and_fill_lead():
    """``accumulate`` adds the d stream; fill_lead = (rows - 1) T - (block - 1) beat_len - 3, 0 without D."""
    plain = BlockFloatArray(rows=2, cols=3, block=2, mantissa_bits=6, slots=3)
    assert "d" not in plain.signature.members and plain.fill_lead == 0
    for (rows, block, slots), lead in [((2, 2, 3), -3), ((5, 2, 2), 2), ((2, 4, 1), -8), ((4, 8, 1), -7)]:
        array = BlockFloatArray(rows=rows, cols=3, block=block, slots=slots, accumulate=True)
        assert array.fill_lead == lead == (rows - 1) * slots - (block - 1) * array.beat_len - 3
        assert array.signature.members["d"].signature.members["payload"].shape.size == 3 * 32
    # D changes neither the latencies nor the beat length (the cycle model stays the same).
    accumulating = BlockFloatArray(rows=2, cols=3, block=2, mantissa_bits=6, slots=3, accumulate=True)
    documented = block_fp_schedule(rows=2, cols=3, block=2, slots=3)
    for array in (plain, accumulating):
        latencies = {"tile": 3, "mac_latency": array.mac_latency, "acc_latency": array.acc_latency}
        assert latencies == documented
        assert array.beat_len == max(3, documented["acc_latency"])
    with pytest.raises(ValueError, match="accumulate must be True or False"):
        BlockFloatArray(accumulate=1)


@pytest.mark.parametrize("params", CASES + SLOW_CASES + [{"rows": 3, "cols": 7, "block": 3, "slots": 4}],
                         ids=case_id)
def test_latency_attributes_are_the_documented_ones(params):
    """``mac_latency`` / ``acc_latency`` equal Section 7c's formulas (``schedule.block_fp_schedule``),
    which the cocotb bench gives the cycle model instead of the block's own attributes."""
    array = BlockFloatArray(**params)
    expected = block_fp_schedule(rows=params["rows"], cols=params["cols"], block=params["block"],
                                 slots=params["slots"])
    latencies = {"tile": params["slots"], "mac_latency": array.mac_latency, "acc_latency": array.acc_latency}
    assert latencies == expected
