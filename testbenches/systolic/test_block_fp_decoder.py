"""block_fp_decoder: cocotb tests of :class:`rtl.systolic.block_fp_decoder.BlockFloatDecoder` against
golden.systolic, and their pytest runner (at the bottom).

Every element is compared bit for bit with :func:`golden.systolic.from_block_fp`. Inputs are the
golden encoder's own output for random data, raw exponents and mantissas over the whole input range
(including ``-2^(mantissa_bits - 1)``), and exponents outside -126 .. 127, which must raise
``invalid``.
"""

import cocotb
import numpy as np
import pytest

from golden.systolic import from_block_fp, to_block_fp
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.systolic.commands import reset_mid_blocks
from testbenches.systolic.tb import BlockCodecTB, random_blocks, stalled_start

MODULE = __name__
DEFAULT_BLOCKS = 400
BAD_EXPONENTS = [-256, -200, -127, 128, 200, 255]


def encodings(rng, count, block, bits):
    """(exponent, mantissas, invalid-in) triples: golden encodings, raw full-range ones, bad ones."""
    items = []
    blocks = random_blocks(rng, count, block)
    limit = 1 << (bits - 1)
    for row in range(count):
        kind = row % 3
        if kind == 0:
            shared, mantissas = to_block_fp(blocks[row], block=block, mantissa_bits=bits)
            items.append((int(shared[0]), [int(x) for x in mantissas], 0))
        else:
            exponent = int(rng.choice([-126, 127])) if rng.random() < 0.2 else int(rng.integers(-126, 128))
            mantissas = [int(x) for x in rng.integers(-limit, limit, block)]
            if rng.random() < 0.2:
                mantissas[int(rng.integers(block))] = -limit
            if kind == 2 and rng.random() < 0.3:
                if rng.random() < 0.5:
                    exponent = int(rng.choice(BAD_EXPONENTS))
                    items.append((exponent, mantissas, 0))
                else:
                    items.append((exponent, mantissas, 1))
                continue
            items.append((exponent, mantissas, 0))
    return items


async def run_test(dut, *, idle, backpressure):
    tb = BlockCodecTB(dut)
    rng = await stalled_start(tb, idle, backpressure, 2 * idle + backpressure)
    await decode(tb, rng, knobs.vectors(DEFAULT_BLOCKS))


async def decode(tb, rng, count):
    """Stream ``count`` encodings (golden, raw full-range and bad ones) and check each output block
    against from_block_fp (or ``invalid``), in order, nothing extra."""
    scoreboard = Scoreboard(f"block_fp_decoder block={tb.block} mantissa_bits={tb.bits}")
    for exponent, mantissas, invalid in encodings(rng, count, tb.block, tb.bits):
        if invalid or not -126 <= exponent <= 127:
            expected = {"values": [0] * tb.block, "invalid": 1}
        else:
            with np.errstate(over="ignore"):  # -2^(bits-1) at exponent 127 is -2^128: -inf
                decoded = from_block_fp(np.array([exponent]), np.array(mantissas), block=tb.block,
                                        mantissa_bits=tb.bits)
            expected = {"values": [int(x) for x in decoded.view(np.uint32)], "invalid": 0}
        scoreboard.expect(expected, {"exponent": exponent, "mantissas": mantissas, "invalid": invalid})
        tb.source.send_nowait({"exponent": exponent, "mantissas": mantissas, "invalid": invalid})

    await tb.check_blocks(scoreboard, count, DEFAULT_BLOCKS)


@cocotb.test()
async def decode_full_rate(dut):
    """Golden encodings and full-range raw encodings back to back: bits equal from_block_fp."""
    await run_test(dut, idle=False, backpressure=False)


@cocotb.test()
async def decode_under_stalls(dut):
    """The same under random valid gaps and random backpressure."""
    await run_test(dut, idle=True, backpressure=True)


@cocotb.test()
@cocotb.parametrize(when=["inputs", "outputs"])
async def reset_mid_stream(dut, when):
    """Reset in the middle of a stream under random stalls: nothing from before comes out, and a
    clean stream equals from_block_fp block for block."""
    tb = BlockCodecTB(dut)
    await reset_mid_blocks(tb, when, lambda rng, count: decode(tb, rng, count))


@pytest.mark.parametrize("params", [{"block": 4, "mantissa_bits": 8}, {"block": 3, "mantissa_bits": 24},
                                    {"block": 2, "mantissa_bits": 2}],
                         ids=lambda p: f"block={p['block']}-mantissa_bits={p['mantissa_bits']}")
def test_block_fp_decoder(params):
    run_cocotb("block_fp_decoder", MODULE, params=params)
