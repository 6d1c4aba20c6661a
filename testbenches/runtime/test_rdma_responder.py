"""The RDMA responder: one memory read and one data-read-queue entry per line of a good request.

Random requests, a third of them bad (a range owned elsewhere or past ``ranges``, no lines, lines
outside the range), with random gaps and backpressure on the memory command and queue ports.
The read commands and queue entries must follow :func:`golden.runtime.protocol.serve`, line by
line and request by request; bad requests are dropped and counted.
"""

import cocotb

from golden.runtime import packet as gp
from golden.runtime.protocol import serve
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.runtime.tb import RuntimeTB, read_entry

DEFAULT_REQUESTS = 120


def random_request(rng, config, node):
    mine = [index for index in range(config.ranges) if config.range_owner(index) == node]
    index = int(rng.choice(mine))
    first, lines = config.range_lines(index)
    start = int(rng.integers(first, first + lines))
    count = int(rng.integers(1, first + lines - start + 1))
    kind = rng.choice(["good", "good", "owner", "ranges", "empty", "before", "after"])
    if kind == "owner":
        index = int(rng.choice([i for i in range(config.ranges) if config.range_owner(i) != node]))
    elif kind == "ranges":
        index = int(rng.integers(config.ranges, 1024))
    elif kind == "empty":
        count = 0
    elif kind == "before":
        start, count = first - 1, 2
    elif kind == "after":
        count = first + lines - start + 1
    return gp.Packet(gp.RDMA, task_id=int(rng.integers(0, 7)), dst=node,
                     src=int(rng.integers(0, config.nodes)), range=index, first=max(start, 0), lines=count)


class ResponderTB(RuntimeTB):
    def __init__(self, dut, *, idle, backpressure, salt):
        super().__init__(dut, sources=["i"], sinks=["mem_rd_cmd", "o"], idle=idle, backpressure=backpressure,
                         salt=salt)
        self.configure(salt)
        self.dropped = self.count_pulses(dut.dropped, ["rdma_range"])
        self.served = self.count_pulses(dut.served, ["served"])

    def send(self, rng, count):
        boards = {"mem_rd_cmd": Scoreboard("rdma responder cmd"), "o": Scoreboard("rdma responder queue")}
        expected = {"rdma_range": 0, "served": 0}
        for _ in range(count):
            request = random_request(rng, self.config, self.node)
            served = serve(request, self.node, self.config, {})
            if isinstance(served, str):
                expected["rdma_range"] += 1
            else:
                expected["served"] += 1
                for word in served:
                    packet = gp.decode(word)
                    boards["mem_rd_cmd"].expect(packet.line)
                    boards["o"].expect(read_entry(packet))
            self.sources["i"].send_nowait(gp.encode(request))
        return boards, expected

    def check_counts(self, expected):
        got = {"rdma_range": self.dropped.counts["rdma_range"], "served": self.served.counts["served"]}
        assert got == expected, f"{got} != {expected}; {knobs.describe()}"


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def serve_under_stalls(dut, idle, backpressure):
    tb, salt = await ResponderTB.under_stalls(dut, idle, backpressure)
    expected = await tb.send_and_check(knobs.rng(80 + salt), knobs.vectors(DEFAULT_REQUESTS))
    assert expected["rdma_range"] and expected["served"]


@cocotb.test()
async def reset_mid_packet(dut):
    """Reset in the middle of a request's lines; a clean run afterwards is exact."""
    await ResponderTB.exact_after_reset(dut, salt=6, seed=86, before=30, after=(5, 60),
                                        count=knobs.vectors(DEFAULT_REQUESTS) // 2)


def test_rdma_responder():
    run_cocotb("runtime_rdma_responder", __name__, params={"block": 20, "read_depth": 4})
