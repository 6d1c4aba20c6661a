"""The network interface: per-channel receive and send queues with credit flow control.

The testbench is the switch. Inbound it sends random flits on the three channels only while it
holds a credit (``rx_depth`` to start, one back per ``net_in_credit`` pulse); the receive queue
heads, drained with backpressure, must carry each channel's packets in order. Outbound it takes
every flit, checks that no channel ever has more flits in flight than ``tx_credits``, and
returns credits after random delays; each channel's packets must come out in order. A sender
that ignores its credits overflows a full queue: those flits, and flits on channel 3, are
dropped and counted.
"""

import cocotb
from cocotb.triggers import RisingEdge

from scripts.sim import knobs
from scripts.sim.runner import params_from_env, run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.runtime.tb import PulseCounter, RuntimeTB, drain

CHANNELS = ("task", "rdma", "data")


class SwitchModel:
    """Drives ``net_in`` within the node's credits, and takes ``net_out`` returning credits."""

    def __init__(self, tb, rx_depth, tx_credits, rng, gaps):
        self.tb, self.dut, self.rng, self.gaps = tb, tb.dut, rng, gaps
        self.rx_depth, self.tx_credits = rx_depth, tx_credits
        self.clear()
        self.ignore_credits = False
        self.dut.net_in__valid.value = 0
        self.dut.net_out__ready.value = 1
        self.dut.net_out_credit.value = 0
        cocotb.start_soon(self._run())

    def clear(self):
        """Forget everything (the link is reset with the node)."""
        self.credits = [self.rx_depth] * 3
        self.outbound = []  # (vc, word) waiting to be sent to the node
        self.in_flight = [0] * 3
        self.returns = []  # (cycle, vc)
        self.received = [[] for _ in range(3)]
        self.dut.net_in__valid.value = 0

    async def _run(self):
        dut = self.dut
        while True:
            await RisingEdge(self.tb.clock)
            credit = int(dut.net_in_credit.value)
            for vc in range(3):
                self.credits[vc] += credit >> vc & 1
            if int(dut.net_out__valid.value):
                word = int(dut.net_out__payload.value)
                vc = word >> 512
                self.in_flight[vc] += 1
                assert self.in_flight[vc] <= self.tx_credits, f"channel {vc} overran its credits"
                self.received[vc].append(word & ((1 << 512) - 1))
                self.returns.append((self.tb.cycle + int(self.rng.integers(1, 12)), vc))
            due = [entry for entry in self.returns if entry[0] <= self.tb.cycle]
            pulses = 0
            for entry in due:
                if not pulses >> entry[1] & 1:
                    pulses |= 1 << entry[1]
                    self.returns.remove(entry)
                    self.in_flight[entry[1]] -= 1
            dut.net_out_credit.value = pulses
            dut.net_in__valid.value = 0
            if self.outbound and not (self.gaps and self.rng.random() < 0.3):
                vc, word = self.outbound[0]
                if self.ignore_credits or vc == 3 or self.credits[vc]:
                    self.outbound.pop(0)
                    if vc < 3 and not self.ignore_credits:
                        self.credits[vc] -= 1
                    dut.net_in__payload.value = word | vc << 512
                    dut.net_in__valid.value = 1


class NetTB(RuntimeTB):
    def __init__(self, dut, *, idle, backpressure, salt):
        super().__init__(
            dut,
            sources=[f"tx_{name}" for name in CHANNELS],
            sinks=[f"rx_{name}" for name in CHANNELS],
            idle=idle,
            backpressure=backpressure,
            salt=salt,
        )
        params = params_from_env()
        self.switch = SwitchModel(self, params["rx_depth"], params["tx_credits"], knobs.rng(salt + 400), idle)
        self.overflow = PulseCounter(dut.overflow, self.clock, ["overflow"])

    def send(self, rng, count):
        boards = {f"rx_{name}": Scoreboard(f"net rx_{name}") for name in CHANNELS}
        outbound = [[] for _ in range(3)]
        for _ in range(count):
            vc = int(rng.integers(0, 3))
            word = int(rng.integers(0, 1 << 63)) << int(rng.integers(0, 449))
            boards[f"rx_{CHANNELS[vc]}"].expect(word)
            self.switch.outbound.append((vc, word))
            vc = int(rng.integers(0, 3))
            word = int(rng.integers(0, 1 << 63)) << int(rng.integers(0, 449))
            outbound[vc].append(word)
            self.sources[f"tx_{CHANNELS[vc]}"].send_nowait(word)
        return boards, outbound

    async def check_outbound(self, outbound, cycles=2000):
        for _ in range(cycles):
            if all(len(self.switch.received[vc]) >= len(outbound[vc]) for vc in range(3)):
                break
            await RisingEdge(self.clock)
        await self.cycles(20)
        for vc in range(3):
            assert self.switch.received[vc] == outbound[vc], f"channel {vc}; {knobs.describe()}"


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def credits_under_stalls(dut, idle, backpressure):
    salt = 2 * idle + backpressure
    tb = NetTB(dut, idle=idle, backpressure=backpressure, salt=salt)
    await tb.reset()
    boards, outbound = tb.send(knobs.rng(130 + salt), knobs.vectors(300))
    await drain(tb, boards)
    await tb.check_outbound(outbound)
    assert tb.overflow.counts["overflow"] == 0
    await tb.cycles(30)
    assert int(dut.idle.value) == 1


@cocotb.test()
async def overflow_is_counted(dut):
    """A sender ignoring its credits: the flits past a full queue, and channel 3, are dropped and counted."""
    tb = NetTB(dut, idle=False, backpressure=False, salt=8)
    depth = params_from_env()["rx_depth"]
    for sink in tb.sinks.values():
        sink.set_backpressure_generator(iter(lambda: True, None))
    await tb.reset()
    tb.switch.ignore_credits = True
    extra = 3
    tb.switch.outbound += [(1, index) for index in range(depth + extra)] + [(3, 99)]
    await tb.cycles(depth + extra + 20)
    # A receive queue holds its credits plus one spare entry (see rtl.lib.streams.Queue).
    assert tb.overflow.counts["overflow"] == extra - 1 + 1, f"{tb.overflow.counts}; {knobs.describe()}"
    tb.sinks["rx_rdma"].set_backpressure_generator(None)
    await tb.cycles(depth + 10)
    assert list(tb.sinks["rx_rdma"].queue) == list(range(depth + 1))


@cocotb.test()
async def reset_mid_packet(dut):
    tb = NetTB(dut, idle=True, backpressure=True, salt=10)
    await tb.reset()
    rng = knobs.rng(140)
    tb.send(rng, 60)
    # The switch side of the link is reset with the node.
    await tb.reset_mid_transfer(rng, after=(5, 40), drivers=tb.drivers + [tb.switch])
    boards, outbound = tb.send(rng, 100)
    await drain(tb, boards)
    await tb.check_outbound(outbound)


def test_net_interface():
    run_cocotb("runtime_net_interface", __name__, params={"rx_depth": 4, "tx_depth": 4, "tx_credits": 3})
