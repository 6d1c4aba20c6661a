"""``amaranth.sim`` test of rtl/lib's ``count_events``: one saturating counter per named event.

Each counter must count only its own event's pulses, one per cycle at most, and stop at its
largest value instead of wrapping.
"""

import random

from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.sim import Simulator

from rtl.lib.counters import count_events

WIDTH = 2
NAMES = ("hits", "misses")


class _Top(Elaboratable):
    def __init__(self):
        self.hits = Signal(WIDTH)
        self.misses = Signal(WIDTH)
        self.events = {name: Signal(name=f"{name}_event") for name in NAMES}

    def elaborate(self, platform):
        m = Module()
        count_events(m, self, self.events)
        return m


def test_count_events_counts_each_event_in_its_own_counter_and_saturates():
    rng = random.Random(3)
    top = _Top()
    seen = []

    async def bench(ctx):
        expected = dict.fromkeys(NAMES, 0)
        for _ in range(40):
            pulses = {name: rng.random() < 0.3 for name in NAMES}
            for name, pulse in pulses.items():
                ctx.set(top.events[name], pulse)
            await ctx.tick()
            for name, pulse in pulses.items():
                expected[name] = min(expected[name] + pulse, (1 << WIDTH) - 1)
                assert ctx.get(getattr(top, name)) == expected[name], (name, expected)
            seen.append(dict(expected))

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # The run reached saturation for both counters, and had a cycle where they differed.
    assert seen[-1] == dict.fromkeys(NAMES, (1 << WIDTH) - 1)
    assert any(state["hits"] != state["misses"] for state in seen)
