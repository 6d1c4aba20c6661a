"""The reduction engine: 14 binary32 sums per cycle, bit-exact with the golden, under stalls."""

import cocotb
import numpy as np

from golden.collective import LINE_WORDS, add_lines, line_value
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.collective.tb import StreamTB, random_words

TAG_WIDTH = 8


def _flags(a, b):
    """IEEE invalid (Inf - Inf, a signaling NaN operand) and overflow of ``a + b``, any word."""
    fa, fb = a.view(np.float32), b.view(np.float32)
    with np.errstate(all="ignore"):
        total = fa + fb
    signaling = [((x >> 23) & 0xFF == 0xFF) & (x & 0x7FFFFF != 0) & (x & 0x400000 == 0) for x in (a, b)]
    invalid = (np.isinf(fa) & np.isinf(fb) & (np.signbit(fa) != np.signbit(fb))) | signaling[0] | signaling[1]
    overflow = np.isfinite(fa) & np.isfinite(fb) & np.isinf(total)
    return int(invalid.any()), int(overflow.any())


def send(tb, rng, count):
    board = Scoreboard("reduction engine o")
    for index in range(count):
        a, b = random_words(rng, LINE_WORDS, specials=0.05), random_words(rng, LINE_WORDS, specials=0.05)
        tag = index % (1 << TAG_WIDTH)
        invalid, overflow = _flags(a, b)
        expected = {"sum": line_value(add_lines(a, b)), "invalid": invalid, "overflow": overflow, "tag": tag}
        board.expect(expected, {"a": line_value(a), "b": line_value(b)})
        tb.source.send_nowait({"a": line_value(a), "b": line_value(b), "tag": tag})
    return board


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def sums_under_stalls(dut, idle, backpressure):
    tb, salt = await StreamTB.under_stalls(dut, idle, backpressure)
    board = send(tb, knobs.rng(10 + salt), knobs.vectors(400))
    await tb.expect_from(tb.sink, board, cycles=10 * board.pending + 100)


@cocotb.test()
async def reset_mid_stream(dut):
    tb = StreamTB(dut, idle=True, backpressure=True, salt=9)
    await tb.reset()
    rng = knobs.rng(19)
    send(tb, rng, 60)
    await tb.reset_mid_transfer(rng, after=(3, 40), drivers=tb.drivers)
    board = send(tb, rng, 100)
    await tb.expect_from(tb.sink, board, cycles=10 * board.pending + 100)


def test_reduction_engine():
    run_cocotb("reduction_engine", __name__, params={"tag_width": TAG_WIDTH})
