"""The node data memory: handler and host writes, RDMA reads under backpressure, the kernel port.

Random lines are written from both write ports at once (the handler's always wins, the host's
waits); every write is mirrored on ``written``; then every line is read back on the RDMA port with
random gaps and backpressure and on the kernel port (one cycle latency). Addresses past ``lines``
are ignored by writes and read as zero.
"""

import cocotb
from cocotb.triggers import RisingEdge

from scripts.sim import knobs
from scripts.sim.runner import params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, random_pauses
from scripts.sim.tb import ClockedTB, Scoreboard


class MemoryTB(ClockedTB):
    def __init__(self, dut, salt):
        super().__init__(dut)
        self.lines = params_from_env()["lines"]
        self.wr = StreamSource(dut, "wr", self.clock, pause=random_pauses(knobs.rng(salt), 0.5))
        self.load = StreamSource(dut, "load", self.clock, pause=random_pauses(knobs.rng(salt + 1), 0.3))
        self.rd_cmd = StreamSource(dut, "rd_cmd", self.clock, pause=random_pauses(knobs.rng(salt + 2), 0.3))
        self.rd_data = StreamSink(
            dut, "rd_data", self.clock, backpressure=random_pauses(knobs.rng(salt + 3), 0.4)
        )
        self.written = StreamSink(dut, "written", self.clock)
        dut.kernel_addr.value = 0

    @property
    def drivers(self):
        return [self.wr, self.load, self.rd_cmd, self.rd_data, self.written]


async def write_and_read(tb, rng):
    contents = {}
    handler = [(int(rng.integers(0, tb.lines + 4)), int(rng.integers(0, 1 << 62)) << 300) for _ in range(60)]
    host = [(int(rng.integers(0, tb.lines + 4)), int(rng.integers(0, 1 << 62))) for _ in range(60)]
    for line, value in handler:
        tb.wr.send_nowait(line | value << 24)
    for line, value in host:
        tb.load.send_nowait(line | value << 24)
    await tb.wr.wait_idle()
    await tb.load.wait_idle()
    await tb.cycles(4)
    # Order between the two ports is by cycle: replay what ``written`` reports, which is checked to be
    # exactly the in-range writes of both ports, each port in its own order.
    mirrored = [(word & 0xFFFFFF, word >> 24) for word in tb.written.queue]
    tb.written.clear()
    for port in (handler, host):
        wanted = [(line, value) for line, value in port if line < tb.lines]
        assert [entry for entry in mirrored if entry in wanted] == wanted
    assert len(mirrored) == sum(1 for line, _ in handler + host if line < tb.lines)
    for line, value in mirrored:
        contents[line] = value
    board = Scoreboard("node memory rd_data")
    for line in range(tb.lines + 4):
        board.expect(contents.get(line, 0), {"line": line})
        tb.rd_cmd.send_nowait(line)
    for _ in range(tb.lines + 4):
        board.check(await tb.rd_data.recv())
    board.check_complete()
    for line in range(tb.lines + 4):
        tb.dut.kernel_addr.value = line
        await RisingEdge(tb.clock)
        await RisingEdge(tb.clock)
        assert int(tb.dut.kernel_data.value) == contents.get(line, 0), f"kernel port, line {line}"
    return contents


@cocotb.test()
async def write_then_read(dut):
    tb = MemoryTB(dut, 800)
    await tb.reset()
    await write_and_read(tb, knobs.rng(801))


@cocotb.test()
async def reset_mid_packet(dut):
    tb = MemoryTB(dut, 810)
    await tb.reset()
    rng = knobs.rng(811)
    tb.rd_cmd.send_many(range(tb.lines))
    await tb.reset_mid_transfer(rng, after=(3, 30), drivers=tb.drivers)
    # The memory keeps its lines over a reset; a run that rewrites every line is exact afterwards.
    tb.wr.send_many(line for line in range(tb.lines))
    await tb.wr.wait_idle()
    await tb.cycles(4)
    tb.written.clear()
    await write_and_read(tb, rng)


def test_node_memory():
    run_cocotb("runtime_node_memory", __name__, params={"lines": 32})
