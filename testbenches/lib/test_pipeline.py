"""``amaranth.sim`` tests of rtl/lib's pipelining pieces: the registered read port and arbiter.

The read port must return, after two enabled clock edges, the word at each address, under random
stalls. The arbiter's grant must be one-hot, answer only a request made the cycle before, hold
until ``advance``, and serve every requester that keeps asking within ``count`` grants.
"""

import random

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator

from rtl.lib.pipeline import PipelinedArbiter, RegisteredReadPort

DEPTH, WIDTH = 32, 12


class _ReadTop(Elaboratable):
    def __init__(self, init):
        self.init = init

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = memory = Memory(shape=WIDTH, depth=DEPTH, init=self.init)
        self.read = RegisteredReadPort(m, memory, "read")
        return m


def _simulate(top, bench):
    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("seed", [1, 2])
def test_registered_read_port_has_latency_two_enabled_cycles(seed):
    rng = random.Random(seed)
    words = [rng.randrange(1 << WIDTH) for _ in range(DEPTH)]
    top = _ReadTop(words)
    top.elaborate(None)  # builds ``top.read`` so the bench can reach its signals
    checked = []

    async def bench(ctx):
        read = top.read
        pipe = []  # addresses given on enabled cycles, oldest first
        for _ in range(300):
            enable = rng.random() < 0.7
            address = rng.randrange(DEPTH)
            ctx.set(read.en, enable)
            ctx.set(read.addr, address)
            await ctx.tick()
            if enable:
                pipe.append(address)
                if len(pipe) > 1:  # after two enabled edges: the address of the first
                    expected = words[pipe[-2]]
                    assert ctx.get(read.data) == expected, (pipe[-2], ctx.get(read.data), expected)
                    checked.append(expected)

    _simulate(top, bench)
    assert len(checked) > 150


@pytest.mark.parametrize("count", [1, 3, 4])
def test_pipelined_arbiter_grants_registered_round_robin(count):
    rng = random.Random(count)
    dut = PipelinedArbiter(count)
    wins = [0] * count

    async def bench(ctx):
        previous_requests, held, waited = 0, 0, [0] * count
        for cycle in range(400):
            grant = ctx.get(dut.grant)
            assert grant & (grant - 1) == 0, f"grant {grant:b} is not one-hot"
            if grant and not held:  # a new grant answers last cycle's requests
                assert grant & previous_requests, (cycle, grant, previous_requests)
                winner = grant.bit_length() - 1
                assert ctx.get(dut.index) == winner
                wins[winner] += 1
                for index in range(count):
                    if not previous_requests >> index & 1:
                        waited[index] = 0  # it stopped asking: the bound counts from its next request
                    elif index != winner:
                        waited[index] += 1
                        assert waited[index] < count, f"requester {index} passed over {count} times"
                waited[winner] = 0
            if held:
                assert grant == held, "the grant changed without advance"
            # Requesters 0 and 1 always ask; the others at random. The holder finishes at random.
            requests = sum(1 << i for i in range(count) if i < 2 or rng.random() < 0.5)
            advance = int(bool(grant) and rng.random() < 0.6)
            ctx.set(dut.requests, requests)
            ctx.set(dut.advance, advance)
            held = grant if grant and not advance else 0
            previous_requests = requests
            await ctx.tick()

    _simulate(dut, bench)
    assert all(wins[index] > 20 for index in range(min(count, 2))), wins
    assert sum(wins) > 100
