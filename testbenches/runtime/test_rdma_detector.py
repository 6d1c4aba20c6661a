"""The RDMA detector: in-order issue, one request per missing range, freeze until the range arrives.

The testbench plays the rest of the node: it answers each RDMA request with an ``arrived``
pulse for its range after a random delay (the data handler's report). Tasks must reach
``pending`` exactly in input order; the requests must be :func:`golden.runtime.protocol.detect_request`
of each range's first task, once per range, in order. A hold test withholds every arrival
and checks that issue stops at the first frozen task and that ``outstanding`` names exactly
the requested ranges; ``invalidate`` makes fetched ranges requested again.
"""

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge

from golden.runtime import packet as gp
from golden.runtime.protocol import detect_request
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.runtime.tb import RuntimeTB, drain, random_task

DEFAULT_TASKS = 300


class DetectorTB(RuntimeTB):
    def __init__(self, dut, *, idle, backpressure, salt):
        super().__init__(dut, sources=["i"], sinks=["pending", "request"], idle=idle,
                         backpressure=backpressure, salt=salt)
        self.configure(salt)
        self.delay_rng = knobs.rng(salt + 300)
        self.hold = False
        self.arrivals = []  # (cycle, range)
        self.requested = set()
        dut.arrived__valid.value = 0
        dut.invalidate.value = 0
        dut.query.value = 0
        cocotb.start_soon(self._answer())

    async def _answer(self):
        """Watch requests leave and report each range's arrival a random number of cycles later."""
        while True:
            await RisingEdge(self.clock)
            if int(self.dut.request__valid.value) and int(self.dut.request__ready.value):
                packet = gp.decode(int(self.dut.request__payload.value))
                self.arrivals.append((self.cycle + int(self.delay_rng.integers(0, 40)), packet.range))
            due = [entry for entry in self.arrivals if entry[0] <= self.cycle] if not self.hold else []
            if due:
                self.arrivals.remove(due[0])
                self.dut.arrived__valid.value = 1
                self.dut.arrived__payload.value = due[0][1]
            else:
                self.dut.arrived__valid.value = 0

    def clear_counts(self):
        self.arrivals.clear()
        self.requested = set()  # the reset forgot every range

    def send(self, rng, count):
        boards = {"pending": Scoreboard("detector pending"), "request": Scoreboard("detector request")}
        for _ in range(count):
            packet = random_task(rng, self.config, homes={self.node}, dst=self.node,
                                 range_index=int(rng.integers(0, min(self.config.ranges, 12))))
            word = gp.encode(packet, sealed=False)
            boards["pending"].expect(word)
            if self.config.range_owner(packet.range) != self.node and packet.range not in self.requested:
                self.requested.add(packet.range)
                request = detect_request(packet, self.node, self.config)
                boards["request"].expect(request, {"range": packet.range})
            self.sources["i"].send_nowait(word)
        return boards

    async def outstanding(self, index):
        await FallingEdge(self.clock)
        self.dut.query.value = index
        await FallingEdge(self.clock)
        return int(self.dut.outstanding.value)


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def detect_under_stalls(dut, idle, backpressure):
    """Local and remote ranges mixed; in-order issue, one request per range; then invalidate and repeat."""
    tb, salt = await DetectorTB.under_stalls(dut, idle, backpressure)
    rng = knobs.rng(50 + salt)
    boards = tb.send(rng, knobs.vectors(DEFAULT_TASKS))
    assert boards["request"].pending
    await drain(tb, boards, cycles_per_item=60)
    await tb.cycles(50)
    assert int(dut.idle.value) == 1
    for index in range(tb.config.ranges):
        assert await tb.outstanding(index) == 0
    await FallingEdge(tb.clock)
    dut.invalidate.value = 1
    await FallingEdge(tb.clock)
    dut.invalidate.value = 0
    tb.requested = set()  # every remote range must be requested again
    boards = tb.send(rng, knobs.vectors(DEFAULT_TASKS) // 2)
    await drain(tb, boards, cycles_per_item=60)


@cocotb.test()
async def freeze_holds_until_arrival(dut):
    """With arrivals withheld, issue stops at the first frozen task; releasing them delivers the rest."""
    tb = DetectorTB(dut, idle=False, backpressure=False, salt=11)
    tb.hold = True
    await tb.reset()
    rng = knobs.rng(61)
    boards = tb.send(rng, 40)
    expected = list(boards["pending"]._expected)
    first_frozen = next(index for index, word in enumerate(expected)
                        if tb.config.range_owner(gp.decode(word).range) != tb.node)
    await tb.cycles(200)
    issued = list(tb.sinks["pending"].queue)
    assert issued == expected[:first_frozen], f"{len(issued)} issued, first frozen #{first_frozen}"
    # The freeze queue filled up; the ranges requested so far are those of the requests that left.
    sent = {gp.decode(word).range for word in tb.sinks["request"].queue}
    assert sent
    for index in range(tb.config.ranges):
        assert await tb.outstanding(index) == int(index in sent), f"range {index}"
    assert int(dut.idle.value) == 0
    tb.hold = False
    await drain(tb, boards, cycles_per_item=60)


@cocotb.test()
async def reset_mid_packet(dut):
    """Reset with tasks frozen and requests in flight: afterwards nothing is remembered or replayed."""
    tb = DetectorTB(dut, idle=True, backpressure=True, salt=13)
    rng = knobs.rng(71)
    await tb.reset_mid_traffic(rng, before=80, after=(10, 80))
    boards = tb.send(rng, knobs.vectors(DEFAULT_TASKS) // 2)
    await drain(tb, boards, cycles_per_item=60)


def test_rdma_detector():
    run_cocotb("runtime_rdma_detector", __name__,
               params={"ranges": 64, "freeze_depth": 8, "pending_depth": 4})
