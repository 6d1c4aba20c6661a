"""block_fp_encoder: cocotb tests of :class:`rtl.systolic.block_fp_encoder.BlockFloatEncoder` against
golden.systolic, and their pytest runner (at the bottom).

Every block is compared, exponent and every mantissa, with :func:`golden.systolic.to_block_fp`
(``axis=-1``, one block per row); blocks holding inf or NaN must raise ``invalid`` and encode as 0.
"""

import cocotb
import numpy as np
import pytest

from golden.systolic import to_block_fp
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.systolic.commands import reset_mid_blocks
from testbenches.systolic.tb import BlockCodecTB, random_blocks, stalled_start

MODULE = __name__
DEFAULT_BLOCKS = 400
# Raw binary32 infinities and NaNs: a block holding one is invalid.
NON_FINITE = [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001]


def _signed(value, bits):
    return value - (1 << bits) if value >> (bits - 1) else value


async def run_test(dut, *, idle, backpressure, non_finite):
    tb = BlockCodecTB(dut)
    rng = await stalled_start(tb, idle, backpressure, 4 * non_finite + 2 * idle + backpressure)
    await encode(tb, rng, knobs.vectors(DEFAULT_BLOCKS), non_finite)


async def encode(tb, rng, count, non_finite):
    """Stream ``count`` random blocks (a third with inf or NaN when ``non_finite``) and check each
    output block against to_block_fp, in order, nothing extra."""
    blocks = random_blocks(rng, count, tb.block, tb.bits)
    poisoned = np.zeros(count, bool)
    if non_finite:
        poisoned = rng.random(count) < 0.3
        for row in np.flatnonzero(poisoned):
            blocks[row, rng.integers(tb.block)] = rng.choice(NON_FINITE)
    scoreboard = Scoreboard(f"block_fp_encoder block={tb.block} mantissa_bits={tb.bits}")
    for row in range(count):
        if poisoned[row]:
            expected = {"exponent": 0, "mantissas": [0] * tb.block, "invalid": 1}
        else:
            shared, mantissas = to_block_fp(blocks[row], block=tb.block, mantissa_bits=tb.bits)
            expected = {"exponent": int(shared[0]), "mantissas": [int(x) for x in mantissas], "invalid": 0}
        scoreboard.expect(expected, {"block": [int(x) for x in blocks[row]]})
        tb.source.send_nowait([int(x) for x in blocks[row]])

    def signed(item):
        return {"exponent": _signed(item["exponent"], 9),
                "mantissas": [_signed(x, tb.bits) for x in item["mantissas"]], "invalid": item["invalid"]}

    await tb.check_blocks(scoreboard, count, DEFAULT_BLOCKS, signed)


@cocotb.test()
async def encode_full_rate(dut):
    """Random blocks back to back: shared exponent and mantissas equal to_block_fp."""
    await run_test(dut, idle=False, backpressure=False, non_finite=False)


@cocotb.test()
async def encode_under_stalls(dut):
    """Random valid gaps and random backpressure; inf and NaN blocks raise invalid."""
    await run_test(dut, idle=True, backpressure=True, non_finite=True)


@cocotb.test()
@cocotb.parametrize(when=["inputs", "outputs"])
async def reset_mid_stream(dut, when):
    """Reset in the middle of a stream under random stalls: nothing from before comes out, and a
    clean stream equals to_block_fp block for block (inf and NaN blocks invalid)."""
    tb = BlockCodecTB(dut)
    await reset_mid_blocks(tb, when, lambda rng, count: encode(tb, rng, count, True))


@pytest.mark.parametrize("params", [{"block": 4, "mantissa_bits": 8}, {"block": 3, "mantissa_bits": 16},
                                    {"block": 1, "mantissa_bits": 2},
                                    # 16 exponents: two compare groups, then one more
                                    {"block": 16, "mantissa_bits": 8}],
                         ids=lambda p: f"block={p['block']}-mantissa_bits={p['mantissa_bits']}")
def test_block_fp_encoder(params):
    run_cocotb("block_fp_encoder", MODULE, params=params)
