"""The task packager: every packet comes out sealed (:func:`golden.runtime.packet.seal`), in order."""

import cocotb

from golden.runtime import packet as gp
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.runtime.tb import RuntimeTB, drain, reset_then_exact


def send(tb, rng, count):
    board = Scoreboard("packager o")
    for _ in range(count):
        word = int(rng.integers(0, 1 << 62)) << int(rng.integers(0, 450)) | int(rng.integers(0, 1 << 32))
        board.expect(gp.seal(word), {"input": word})
        tb.sources["i"].send_nowait(word)
    return {"o": board}


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def seal_under_stalls(dut, idle, backpressure):
    tb, salt = await RuntimeTB.under_stalls(dut, idle, backpressure, sources=["i"], sinks=["o"])
    await drain(tb, send(tb, knobs.rng(40 + salt), knobs.vectors(300)))


@cocotb.test()
async def reset_mid_packet(dut):
    tb = RuntimeTB(dut, sources=["i"], sinks=["o"], idle=True, backpressure=True, salt=3)
    await reset_then_exact(tb, knobs.rng(45), send, before=50, after=(3, 30), count=100)


def test_task_packager():
    run_cocotb("runtime_task_packager", __name__)
