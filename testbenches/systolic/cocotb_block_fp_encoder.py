"""cocotb tests of :class:`rtl.systolic.block_fp_encoder.BlockFloatEncoder` against golden.systolic.

Every block is compared, exponent and every mantissa, with :func:`golden.systolic.to_block_fp`
(``axis=-1``, one block per row); blocks holding inf or NaN must raise ``invalid`` and encode as 0.
"""

import cocotb
import numpy as np
from cocotb.triggers import with_timeout

from golden.systolic import to_block_fp
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, Scoreboard
from testbenches.systolic.commands import reset_then_clean

DEFAULT_BLOCKS = 400

# Raw binary32 values that reach every path: signed zeros, the smallest and largest subnormals,
# the smallest normal, values that round half way (ties to even) and carry into the clamp, the
# largest finite value, one.
EDGES = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x3F800000, 0xBF800000,
         0x3FFFFFFF, 0x3FC00000, 0x3F400000, 0x40400000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F7FFFFF]
NON_FINITE = [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001]


def _signed(value, bits):
    return value - (1 << bits) if value >> (bits - 1) else value


def random_blocks(rng, count, block, mantissa_bits=None):
    """Blocks of raw f32 bits: normals of mixed scales, edge values, all-zero and tiny blocks.

    With ``mantissa_bits``, every fourth block is 1.0 followed by exact ties of that encoding's
    grid (odd multiples of half its LSB), which round half to even.
    """
    scales = rng.integers(-140, 128, (count, 1)).astype(np.float64)
    spread = rng.integers(0, 30, (count, block))  # elements far below the maximum flush towards 0
    values = rng.standard_normal((count, block)) * np.exp2(scales - spread)
    bits = values.astype(np.float32).view(np.uint32)
    edges = rng.random((count, block)) < 0.15
    bits = np.where(edges, rng.choice(np.asarray(EDGES, np.uint32), (count, block)), bits)
    bits[0] = 0  # an all-zero block
    bits[1] = rng.integers(0, 0x800000, block, dtype=np.uint32)  # subnormals only
    if count > 2:  # a block whose largest element rounds up into the clamp
        bits[2] = np.float32(1.0).view(np.uint32)
        bits[2, 0] = np.float32(2.0 - 2.0**-23).view(np.uint32)
    if mantissa_bits is not None and block > 1:
        # With 1.0 the largest element the LSB is 2^(2 - mantissa_bits); ties sit halfway between.
        odd = 2 * rng.integers(0, 2 ** (mantissa_bits - 1), (count, block - 1)) + 1
        ties = (odd * 2.0 ** (1 - mantissa_bits)).astype(np.float32).view(np.uint32)
        signs = rng.integers(0, 2, (count, block - 1), dtype=np.uint32) << np.uint32(31)
        rows = np.arange(3, count, 4)
        bits[rows, 0] = np.float32(1.0).view(np.uint32)
        bits[rows, 1:] = (ties | signs)[rows]
    return bits


class TB(ClockedTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        params = params_from_env()
        self.block, self.bits = params["block"], params["mantissa_bits"]
        self.source = StreamSource(dut, "i", self.clock, stream_layout(self.component, "i"))
        self.sink = StreamSink(dut, "o", self.clock, stream_layout(self.component, "o"))

    def stall(self, idle, backpressure, salt):
        self.source.set_pause_generator(random_pauses(knobs.rng(salt + 10), 0.3) if idle else never())
        self.sink.set_backpressure_generator(
            random_pauses(knobs.rng(salt + 20), 0.3) if backpressure else never())


async def run_test(dut, *, idle, backpressure, non_finite):
    tb = TB(dut)
    salt = 4 * non_finite + 2 * idle + backpressure
    tb.stall(idle, backpressure, salt)
    await tb.reset()
    await encode(tb, knobs.rng(salt), knobs.vectors(DEFAULT_BLOCKS), non_finite)


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

    async def drain():
        for _ in range(count):
            item = await tb.sink.recv()
            scoreboard.check({"exponent": _signed(item["exponent"], 9),
                              "mantissas": [_signed(x, tb.bits) for x in item["mantissas"]],
                              "invalid": item["invalid"]})

    await with_timeout(drain(), 40 * count + 1000, "ns")
    await tb.cycles(5)
    scoreboard.check_complete()
    assert tb.sink.empty(), f"extra output blocks; {knobs.describe(DEFAULT_BLOCKS)}"


@cocotb.test()
async def encode_full_rate(dut):
    """Random blocks back to back: shared exponent and mantissas equal to_block_fp."""
    await run_test(dut, idle=False, backpressure=False, non_finite=False)


@cocotb.test()
async def encode_under_stalls(dut):
    """Random valid gaps and random backpressure; inf and NaN blocks raise invalid."""
    await run_test(dut, idle=True, backpressure=True, non_finite=True)


async def reset_mid_blocks(tb, when, run, count=64):
    """Reset at a random cycle after the first of ``count`` blocks goes in (or comes out) under random
    stalls, then check a clean stream; ``run(rng, count)`` streams and checks ``count`` blocks."""
    salt = 500 + (when == "outputs")
    rng = knobs.rng(salt + 10)
    await reset_then_clean(
        tb, interrupted=lambda: run(rng, count), clean=lambda: run(rng, count), drivers=[tb.source, tb.sink],
        sink=tb.sink, watch=tb.source if when == "inputs" else tb.sink, window=count - 2, quiet=20, salt=salt)


@cocotb.test()
@cocotb.parametrize(when=["inputs", "outputs"])
async def reset_mid_stream(dut, when):
    """Reset in the middle of a stream under random stalls: nothing from before comes out, and a
    clean stream equals to_block_fp block for block (inf and NaN blocks invalid)."""
    tb = TB(dut)
    await reset_mid_blocks(tb, when, lambda rng, count: encode(tb, rng, count, True))
