"""The data packager: each returned line and its read-queue entry become one sealed data packet.

Entries and lines arrive on two ports with independent random gaps; the packets must equal the
golden data packets (:func:`golden.runtime.protocol.serve`'s format) in order.
"""

import cocotb

from golden.runtime import packet as gp
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.runtime.tb import RuntimeTB, drain, read_entry, reset_then_exact


def send(tb, rng, count):
    board = Scoreboard("data packager o")
    for _ in range(count):
        packet = gp.Packet(gp.DATA, task_id=int(rng.integers(0, 7)), dst=int(rng.integers(0, 4)), src=tb.node,
                           range=int(rng.integers(0, 1024)), line=int(rng.integers(0, 1 << 24)),
                           last=int(rng.integers(0, 2)),
                           data=int(rng.integers(0, 1 << 63)) << 385 | int(rng.integers(0, 1 << 63)))
        board.expect(gp.encode(packet))
        tb.sources["info"].send_nowait(read_entry(packet))
        tb.sources["mem_rd_data"].send_nowait(packet.data)
    return {"o": board}


class PackagerTB(RuntimeTB):
    def __init__(self, dut, *, idle, backpressure, salt):
        super().__init__(dut, sources=["info", "mem_rd_data"], sinks=["o"], idle=idle,
                         backpressure=backpressure, salt=salt)
        self.configure(salt)


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def package_under_stalls(dut, idle, backpressure):
    tb, salt = await PackagerTB.under_stalls(dut, idle, backpressure)
    await drain(tb, send(tb, knobs.rng(90 + salt), knobs.vectors(300)))


@cocotb.test()
async def reset_mid_packet(dut):
    tb = PackagerTB(dut, idle=True, backpressure=True, salt=7)
    await reset_then_exact(tb, knobs.rng(97), send, before=50, after=(3, 30), count=100)


def test_data_packager():
    run_cocotb("runtime_data_packager", __name__)
