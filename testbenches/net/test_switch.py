"""The N-port switch: every routable flit reaches the port of its ``dst``, in order per (input, channel).

The testbench plays N nodes. Each sends random flits (random destinations, channels and gaps)
only while it holds a credit for the switch's input buffer of that channel, and takes every flit
the switch sends it, returning each credit after a random delay (its receive queues draining
slowly: backpressure). Each output must receive exactly the flits addressed to it, and the flits
of one input on one channel in their order; no output channel ever holds more flits than its
credits. Flits whose ``dst`` is not a port, or on channel 3, are dropped and counted.
"""

import cocotb
import pytest
from cocotb.triggers import RisingEdge

from golden.runtime import packet as gp
from scripts.sim import knobs
from scripts.sim.runner import params_from_env, run_cocotb
from scripts.sim.tb import ClockedTB, PulseCounter
from testbenches.net.tb import SwitchPort

MASK = (1 << 512) - 1


class SwitchTB(ClockedTB):
    def __init__(self, dut, *, gaps, slow, salt):
        super().__init__(dut)
        self.params = params_from_env()
        self.nodes = [
            SwitchPort(self, port, knobs.rng(salt + port), gaps, slow, depth=self.params["depth"],
                       rx_credits=self.params["rx_credits"]) for port in range(self.params["nodes"])
        ]
        self.dropped = PulseCounter(self.clock, dut.dropped)  # sums the per-cycle drop count

    @property
    def reset_drivers(self):
        return self.nodes

    def clear_counts(self):
        self.dropped.clear()

    def send(self, rng, count, bad=True):
        """Queue ``count`` flits per port; returns the expected flits per output and the drop count."""
        nodes = self.params["nodes"]
        expected = [[] for _ in range(nodes)]
        drops = 0
        for _ in range(count):
            for port, node in enumerate(self.nodes):
                vc = int(rng.integers(0, 3))
                dst = int(rng.integers(0, nodes))
                if bad and rng.random() < 0.05:
                    if nodes < 16 and rng.random() < 0.5:
                        dst = int(rng.integers(nodes, 16))
                    else:
                        vc = 3
                    drops += 1
                word = gp.encode(
                    gp.Packet(vc if vc < 3 else 0, dst=dst, src=port, range=int(rng.integers(0, 1024)))
                )
                word |= int(rng.integers(0, 1 << 60)) << 300  # distinct payloads
                node.outbound.append((vc, word))
                if vc < 3 and dst < nodes:
                    expected[dst].append((port, vc, word))
        return expected, drops

    async def check(self, expected, drops, cycles):
        for _ in range(cycles):
            await RisingEdge(self.clock)
            if all(len(node.received) >= len(want) for node, want in zip(self.nodes, expected, strict=True)):
                break
        await self.cycles(40)
        for port, (node, want) in enumerate(zip(self.nodes, expected, strict=True)):
            got = node.received
            arrived_words = {word for _, word in got}
            missing = sorted({(s, v) for s, v, word in want if word not in arrived_words})
            assert len(got) == len(want), (
                f"port {port}: {len(got)} flits, expected {len(want)}, missing from (input, channel) "
                f"{missing}, still queued {[len(n.outbound) for n in self.nodes]}; {knobs.describe()}"
            )
            assert sorted(word for _, word in got) == sorted(word for _, _, word in want), f"port {port}"
            for source in range(len(self.nodes)):
                for vc in range(3):
                    sent = [word for s, v, word in want if s == source and v == vc]
                    arrived = [word for v, word in got if v == vc and gp.decode(word).src == source]
                    assert arrived == sent, f"port {port}: input {source} channel {vc} reordered"
        assert self.dropped.count == drops, f"dropped {self.dropped.count} != {drops}; {knobs.describe()}"


@cocotb.test()
@cocotb.parametrize(gaps=[False, True], slow=[False, True])
async def route_under_backpressure(dut, gaps, slow):
    salt = 400 + 2 * gaps + slow
    tb = SwitchTB(dut, gaps=gaps, slow=slow, salt=salt)
    await tb.reset()
    expected, drops = tb.send(knobs.rng(salt + 50), knobs.vectors(150))
    await tb.check(expected, drops, cycles=200_000)


@cocotb.test()
async def reset_mid_packet(dut):
    tb = SwitchTB(dut, gaps=True, slow=True, salt=420)
    rng = knobs.rng(421)
    await tb.reset_mid_traffic(rng, before=50, after=(10, 100))
    expected, drops = tb.send(rng, knobs.vectors(150) // 2)
    await tb.check(expected, drops, cycles=200_000)


@pytest.mark.parametrize("nodes", [2, 4, pytest.param(16, marks=pytest.mark.slow)])
def test_switch(nodes):
    run_cocotb("runtime_switch", __name__, params={"nodes": nodes, "depth": 2, "rx_credits": 3})
