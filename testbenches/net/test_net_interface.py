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
from testbenches.net.tb import CreditLink
from testbenches.runtime.tb import PulseCounter, RuntimeTB, drain

CHANNELS = ("task", "rdma", "data")


class SwitchModel(CreditLink):
    """The switch on ``net_in``/``net_out``: keeps each channel's received flits in order, and sends
    the head of ``outbound`` once its channel has a credit."""

    def clear(self):
        super().clear()
        self.received = [[] for _ in range(3)]
        self.dut.net_in__valid.value = 0

    def take(self, vc, word):
        self.received[vc].append(word)


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
        self.switch = SwitchModel(self, "net_", knobs.rng(salt + 400), idle, depth=params["rx_depth"],
                                  held_limit=params["tx_credits"])
        self.overflow = PulseCounter(dut.overflow, self.clock, ["overflow"])

    @property
    def reset_drivers(self):
        return self.drivers + [self.switch]  # the switch side of the link is reset with the node

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

    async def check_outbound(self, outbound, cycles=None):
        # The wait grows with the flits (NEARTRAIN_VECTORS scales them).
        cycles = cycles or 2000 + 20 * sum(len(flits) for flits in outbound)
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
    tb, salt = await NetTB.under_stalls(dut, idle, backpressure)
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
    rng = knobs.rng(140)
    await tb.reset_mid_traffic(rng, before=60, after=(5, 40))
    boards, outbound = tb.send(rng, 100)
    await drain(tb, boards)
    await tb.check_outbound(outbound)


def test_net_interface():
    run_cocotb("runtime_net_interface", __name__, params={"rx_depth": 4, "tx_depth": 4, "tx_credits": 3})
