"""The ring all-reduce on a switch: every node ends with golden.collective.ring_all_reduce, bit-exact.

The testbench loads each node's vector of ``ring_cluster`` (random binary32 with NaN, Inf and
subnormals), starts the nodes at random cycles, waits for every ``done``, and reads every node's
vector back. A monitor on the switch ports counts the flits into and out of the switch: the
packets and packet-hops must equal :func:`golden.collective.ring_counts`. Bad packets come from a
switch port without a ring node; a reset cuts an all-reduce, and a clean one must follow.
"""

import cocotb
import numpy as np
import pytest

from golden.collective import LINE_WORDS, ring_all_reduce, ring_counts, ring_messages
from golden.runtime import packet as gp
from scripts.sim import knobs
from scripts.sim.devices.collective import COUNTERS, RingTB
from scripts.sim.runner import run_cocotb
from testbenches.collective.tb import (
    RING_BENCH_PARAMS,
    parametrize_shapes,
    random_words,
    rejects_at_elaboration,
)


class TB(RingTB):
    """:class:`~scripts.sim.devices.collective.RingTB` with a checked all-reduce of random vectors."""

    async def all_reduce(self, size, lines, *, skew=40, injected=None):
        """One all-reduce of random vectors on nodes ``0 .. size - 1``, checked bit for bit.

        ``injected`` (a coroutine function) runs once every node has started.
        """
        gradients = random_words(self.rng, (size, size, lines, LINE_WORDS), specials=0.03)
        await self.load(gradients)
        before = [self.counters(node) for node in range(self.nodes)]
        self.clear()
        await self.start(size, skew)
        if injected is not None:
            await injected()
        patience = 40 * size * size * lines + 20 * skew + 2000
        await self.wait_until(lambda: all(int(self.signal(node, "done").value) for node in range(size)),
                              cycles=patience, what=f"a ring of {size} nodes, {lines} lines per segment")
        await self.cycles(20)  # the last packets reach their receivers
        got = await self.read(size, lines)
        want = ring_all_reduce(gradients)
        for node in range(size):
            for segment in range(size):
                assert np.array_equal(got[node, segment], want[node, segment]), (
                    f"ring of {size}: node {node}, segment {segment} differs from the golden; "
                    f"{knobs.describe()}")
        counts = ring_counts(size, lines)
        for node in range(self.nodes):
            in_ring = node < size
            now = self.counters(node)
            assert now["sent"] == (counts["packets_per_node"] if in_ring else before[node]["sent"]), (
                f"node {node} sent {now['sent']}; {knobs.describe()}")
        return before


def _sizes(tb):
    return sorted({2, tb.nodes} | ({4} if tb.nodes > 4 else set()))


@cocotb.test()
async def all_reduce_is_bit_exact(dut):
    """Rings of 2 to ``nodes`` nodes in one build, started with random skew, twice each."""
    tb = TB(dut, salt=1)
    await tb.reset()
    lines = knobs.vectors(3, limit=tb.depth // tb.nodes)  # size * lines must fit a node's memory
    for size in _sizes(tb):
        for _ in range(2):
            await tb.all_reduce(size, lines)
    for node in range(tb.nodes):
        assert tb.counters(node)["malformed"] == tb.counters(node)["unexpected"] == 0, knobs.describe()
        assert int(tb.signal(node, "overflow").value) == 0, f"node {node} dropped a flit; {knobs.describe()}"
    assert int(dut.switch_dropped.value) == 0, knobs.describe()


@cocotb.test()
async def packet_counts_equal_the_formula(dut):
    """Flits into the switch = packets, into and out of it = packet-hops (one switch level: 2 hops)."""
    tb = TB(dut, salt=2)
    await tb.reset()
    for size in _sizes(tb):
        for lines in (1, 2):
            await tb.all_reduce(size, lines, skew=5)
            expected = ring_counts(size, lines)
            assert len(ring_messages(size, lines)) == expected["packets"]
            assert tb.flits() == {"packets": expected["packets"], "packet_hops": expected["packet_hops"]}, (
                f"ring of {size}, {lines} lines: {tb.flits()} != {expected}; {knobs.describe()}")
            assert all(count == 0 for count in tb.up[size:] + tb.down[size:]), "an idle node saw traffic"


@cocotb.test()
async def bad_packets_are_dropped_and_counted(dut):
    """From a port without a node, in the middle of an all-reduce: a broken check byte, a sender that
    is not the predecessor, a segment and a line out of range, a reduce-scatter line of the node's
    own segment, an all-gather line of the segment it reduced, a task packet. The all-reduce is
    still bit-exact; each is counted once at its node."""
    tb = TB(dut, salt=3)
    if tb.spare is None:
        raise AssertionError("this build has no spare switch port to send bad packets from")
    await tb.reset()
    size = min(4, tb.nodes)
    lines = knobs.vectors(3, limit=tb.depth // size)  # size * lines must fit a node's memory
    target = 1
    pred = target - 1
    rng = knobs.rng(33)
    bad = [  # (packet, broken, counter)
        (gp.Packet(gp.DATA, dst=target, src=pred, range=0, line=0, data=1), True, "malformed"),
        (gp.Packet(gp.DATA, dst=target, src=tb.nodes, range=0, line=0, data=2), False, "unexpected"),
        (gp.Packet(gp.DATA, dst=target, src=pred, range=size, line=0, data=3), False, "unexpected"),
        (gp.Packet(gp.DATA, dst=target, src=pred, range=0, line=lines, data=4), False, "unexpected"),
        (gp.Packet(gp.DATA, dst=target, src=pred, range=target, line=0, data=5), False, "unexpected"),
        (gp.Packet(gp.DATA, dst=target, src=pred, range=(target + 1) % size, line=0, data=6, remote=1), False,
         "unexpected"),
        (gp.Packet(gp.TASK, dst=target, src=pred, mask=1), False, "unexpected"),
    ]

    async def inject():
        for packet, broken, _ in bad:
            word = gp.encode(packet)
            if broken:
                word ^= 1 << int(rng.integers(gp.HEADER_BITS + 32, gp.PACKET_BITS))
            tb.spare.outbound.append((0 if packet.ptype == gp.TASK else 2, word))

    before = await tb.all_reduce(size, lines, injected=inject)
    expected = {name: before[target][name] + sum(counter == name for *_, counter in bad)
                for name in ("malformed", "unexpected")}
    got = {name: tb.counters(target)[name] for name in expected}
    assert got == expected, f"{got} != {expected}; {knobs.describe()}"
    # A ring that does not fit the memory is refused: start is ignored.
    tb.dut.size.value, tb.dut.lines.value = size, tb.depth // size + 1
    await tb.cycles(1)
    assert int(tb.signal(0, "config_ok").value) == 0
    tb.signal(0, "start").value = 1
    await tb.cycles(1)
    tb.signal(0, "start").value = 0
    await tb.cycles(2)
    assert int(tb.signal(0, "busy").value) == 0, "a start with a bad configuration was taken"


@cocotb.test()
async def reset_in_the_middle_then_a_clean_all_reduce(dut):
    tb = TB(dut, salt=4)
    await tb.reset()
    rng = knobs.rng(44)
    size = tb.nodes
    lines = knobs.vectors(3, limit=tb.depth // size)  # size * lines must fit a node's memory
    gradients = random_words(rng, (size, size, lines, LINE_WORDS))
    await tb.load(gradients)
    await tb.start(size, 10)
    drivers = [tb] + ([tb.spare] if tb.spare else [])
    await tb.reset_mid_transfer(rng, after=(5, 20 * size * lines), drivers=drivers)
    for node in range(tb.nodes):
        assert tb.counters(node) == dict.fromkeys(COUNTERS, 0), knobs.describe()
    await tb.all_reduce(size, lines)
    assert tb.flits()["packets"] == ring_counts(size, lines)["packets"], knobs.describe()


SHAPES = {
    "4_nodes": {"ports": 8, "nodes": 4, "depth": 16},
    "8_nodes": {"ports": 8, "nodes": 8, "depth": 32},
    "16_nodes": RING_BENCH_PARAMS,  # the bench's build, shared
}
FUNCTIONAL = ["all_reduce_is_bit_exact", "packet_counts_equal_the_formula",
              "bad_packets_are_dropped_and_counted", "reset_in_the_middle_then_a_clean_all_reduce"]
# Only the 4-node build has a free switch port to send bad packets from.
TESTS = {"4_nodes": FUNCTIONAL,
         "8_nodes": ["all_reduce_is_bit_exact", "reset_in_the_middle_then_a_clean_all_reduce"],
         "16_nodes": ["all_reduce_is_bit_exact", "packet_counts_equal_the_formula"]}
# Sixteen nodes (224 binary32 adders) take minutes to elaborate, build and run: make test-full only.
# So does the 4-node ring since CI ran over its 45 minutes (203 s of a core in a cold run).
SLOW_SHAPES = set(SHAPES)


@parametrize_shapes(SHAPES, SLOW_SHAPES)
def test_ring(shape):
    run_cocotb("ring_cluster", __name__, params=SHAPES[shape], testcase=TESTS[shape])


@pytest.mark.parametrize("block,params,message", [
    ("ring_node", {"depth": 1}, "depth must be in 2..1048576"),
    ("ring_node", {"queue_depth": 1}, "queue_depth must be in 2..1024"),
    ("ring_cluster", {"ports": 2, "nodes": 2}, "ports must be one of"),
    ("ring_cluster", {"ports": 4, "nodes": 5}, "nodes must be in 2..4"),
    ("ring_cluster", {"switch_depth": 0}, "switch_depth must be in 2..1024"),
])
def test_ring_rejects_bad_parameters_at_elaboration(block, params, message):
    rejects_at_elaboration(block, params, message)
