"""The data handler: expected lines are written, a range's last line reports it, the rest is dropped.

The testbench plays the RDMA detector: it answers ``query`` with ``outstanding`` from its set of
requested-and-not-arrived ranges, and removes a range when the handler reports it on ``arrived``.
Each outstanding range's lines arrive in order (from one responder), interleaved with other
ranges' lines and with unexpected packets: ranges nobody asked for, a line outside its range, a
wrong ``last`` flag, a repeat after the range arrived. Writes, arrivals and the drop count are
compared with the model.
"""

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge

from golden.runtime import packet as gp
from golden.runtime.protocol import serve
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.stream import StreamSink
from scripts.sim.tb import Scoreboard
from testbenches.runtime.tb import RuntimeTB, drain


class HandlerTB(RuntimeTB):
    def __init__(self, dut, *, idle, backpressure, salt):
        super().__init__(
            dut, sources=["i"], sinks=["mem_wr"], idle=idle, backpressure=backpressure, salt=salt
        )
        self.sinks["arrived"] = StreamSink(dut, "arrived", self.clock)  # the detector is always ready
        self.configure(salt)
        self.outstanding = set()
        self.dropped = self.count_pulses(dut.dropped, ["data_unsolicited"])
        dut.outstanding.value = 0
        cocotb.start_soon(self._detector())

    async def _detector(self):
        while True:
            await RisingEdge(self.clock)
            if int(self.dut.arrived__valid.value):
                self.outstanding.discard(int(self.dut.arrived__payload.value))
            await FallingEdge(self.clock)
            self.dut.outstanding.value = int(int(self.dut.query.value) in self.outstanding)

    def clear_counts(self):
        super().clear_counts()
        self.outstanding.clear()

    def send(self, rng, ranges):
        """Replies for ``ranges`` (which become outstanding) mixed with unexpected packets."""
        boards = {"mem_wr": Scoreboard("data handler mem_wr"), "arrived": Scoreboard("data handler arrived")}
        drops = 0
        streams = []
        for index in ranges:
            self.outstanding.add(index)
            first, lines = self.config.range_lines(index)
            memory = {
                line: int(rng.integers(0, 1 << 63)) << int(rng.integers(0, 380))
                for line in range(first, first + lines)
            }
            request = gp.Packet(
                gp.RDMA,
                dst=self.config.range_owner(index),
                src=self.node,
                range=index,
                first=first,
                lines=lines,
            )
            streams.append(list(serve(request, self.config.range_owner(index), self.config, memory)))
        others = [index for index in range(self.config.ranges) if index not in ranges]
        order = []
        while any(streams):
            live = [stream for stream in streams if stream]
            word = live[int(rng.integers(0, len(live)))].pop(0)
            packet = gp.decode(word)
            order.append(word)
            boards["mem_wr"].expect(packet.line | packet.data << 24)
            if packet.last:
                boards["arrived"].expect(packet.range)
            if rng.random() < 0.3:  # something nobody asked for
                kind = rng.choice(["range", "line", "last"] + (["repeat"] if packet.last else []))
                if kind == "range" and others:
                    bad = gp.Packet(gp.DATA, dst=self.node, range=int(rng.choice(others)), line=0)
                elif kind == "line":
                    bad = gp.Packet(
                        gp.DATA, dst=self.node, range=packet.range, line=packet.line + self.config.block
                    )
                elif kind == "last":
                    bad = gp.Packet(
                        gp.DATA, dst=self.node, range=packet.range, line=packet.line, last=1 - packet.last
                    )
                else:
                    bad = packet
                order.append(gp.encode(bad))
                drops += 1
        self.sources["i"].send_many(order)
        return boards, drops


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def store_under_stalls(dut, idle, backpressure):
    tb, salt = await HandlerTB.under_stalls(dut, idle, backpressure)
    rng = knobs.rng(100 + salt)
    ranges = [
        int(index) for index in rng.choice(tb.config.ranges, size=min(6, tb.config.ranges), replace=False)
    ]
    boards, drops = tb.send(rng, ranges)
    await drain(tb, boards)
    assert tb.dropped.counts["data_unsolicited"] == drops, (
        f"{tb.dropped.counts} != {drops}; {knobs.describe()}"
    )
    assert not tb.outstanding


@cocotb.test()
async def reset_mid_packet(dut):
    tb = HandlerTB(dut, idle=True, backpressure=True, salt=9)
    rng = knobs.rng(109)
    await tb.reset_mid_traffic(rng, before=[0, 1], after=(3, 20))
    boards, drops = tb.send(rng, [2, 3])
    await drain(tb, boards)
    assert tb.dropped.counts["data_unsolicited"] == drops


def test_data_handler():
    run_cocotb("runtime_data_handler", __name__, params={"block": 20})
