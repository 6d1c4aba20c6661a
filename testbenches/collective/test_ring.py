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
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from golden.collective import LINE_WORDS, line_value, ring_all_reduce, ring_counts, ring_messages
from golden.runtime import packet as gp
from scripts.sim import channel, knobs
from scripts.sim.runner import resolved_params_from_env, run_cocotb
from scripts.sim.tb import CLOCK_PERIOD_NS, ClockedTB
from testbenches.collective.tb import RING_BENCH_PARAMS, random_words
from testbenches.net.tb import SwitchPort

COUNTERS = ("sent", "malformed", "unexpected")


class TB(ClockedTB):
    """Drives ``ring_cluster``: loads, starts with skew, reads back, and counts flits per node."""

    def __init__(self, dut, *, salt=0):
        super().__init__(dut)
        self.params = resolved_params_from_env()
        self.nodes, self.ports, self.depth = (self.params[k] for k in ("nodes", "ports", "depth"))
        self.addr_bits = (self.depth - 1).bit_length()
        self.rng = knobs.rng(salt)
        self.up, self.down = [0] * self.nodes, [0] * self.nodes
        for node in range(self.nodes):
            for name in ("start", "load__valid", "read_addr"):
                self.signal(node, name).value = 0
        self.spare = None
        if self.nodes < self.ports:
            self.spare = SwitchPort(self, self.nodes, knobs.rng(salt + 50), True, True,
                                    depth=self.params["switch_depth"], rx_credits=self.params["queue_depth"])
        cocotb.start_soon(self._monitor())

    def signal(self, node, name):
        return getattr(self.dut, f"n{node}_{name}")

    async def _monitor(self):
        while True:
            await RisingEdge(self.clock)
            for node in range(self.nodes):
                self.up[node] += int(self.signal(node, "up").value)
                self.down[node] += int(self.signal(node, "down").value)

    def clear(self):
        """Forget the flits counted so far (a reset's ``driver``)."""
        self.up, self.down = [0] * self.nodes, [0] * self.nodes

    async def load(self, vectors):
        """Write ``vectors[node]`` (shape ``(size, lines, 14)``) into each node, all nodes at once."""
        size, lines = vectors.shape[1:3]
        self.dut.size.value, self.dut.lines.value = size, lines
        # An idle node always takes a load (its ``ready`` is ``not busy``).
        assert not any(int(self.signal(node, "busy").value) for node in range(len(vectors))), knobs.describe()
        for address in range(size * lines):
            for node in range(len(vectors)):
                word = line_value(vectors[node, address // lines, address % lines])
                self.signal(node, "load__payload").value = address | word << self.addr_bits
                self.signal(node, "load__valid").value = 1
            await RisingEdge(self.clock)
        for node in range(len(vectors)):
            self.signal(node, "load__valid").value = 0

    async def start(self, size, skew):
        """Pulse each ring node's ``start`` at a random cycle in ``0 .. skew``."""
        when = {node: int(self.rng.integers(0, skew + 1)) for node in range(size)}
        for cycle in range(skew + 1):
            for node in range(size):
                self.signal(node, "start").value = int(when[node] == cycle)
            await RisingEdge(self.clock)
        for node in range(size):
            self.signal(node, "start").value = 0

    async def read(self, size, lines):
        """Every ring node's vector, read back through its read port: ``(size, size, lines, 14)``."""
        out = np.zeros((size, size, lines, LINE_WORDS), np.uint32)
        mask = (1 << 32) - 1
        for address in range(size * lines):
            for node in range(size):
                self.signal(node, "read_addr").value = address
            await RisingEdge(self.clock)
            await FallingEdge(self.clock)  # the data of the address taken at the rising edge
            for node in range(size):
                value = int(self.signal(node, "read_data").value)
                out[node, address // lines, address % lines] = [value >> (32 * word) & mask
                                                                for word in range(LINE_WORDS)]
        return out

    def counters(self, node):
        return {name: int(self.signal(node, name).value) for name in COUNTERS}

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

    def flits(self):
        return {"packets": sum(self.up), "packet_hops": sum(self.up) + sum(self.down)}


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


@cocotb.test()
async def measure_ring(dut):
    """For ``bench_ring``: cycles, packets and packet-hops of each ``(size, lines)`` of the job.

    Every ring node starts at the same cycle; ``cycles`` counts the rising edges from the one that
    takes ``start`` to the one that raises the last ``done``. The vectors are what the previous
    all-reduce left (zeros at first): the values never change the timing (the engine's latency is
    fixed), and the counts are checked against the golden's for every point.
    """
    tb = TB(dut, salt=5)
    await tb.reset()
    results = []
    for size, lines in channel.job():
        tb.dut.size.value, tb.dut.lines.value = size, lines
        tb.clear()
        for node in range(size):
            tb.signal(node, "start").value = 1
        await RisingEdge(tb.clock)
        first = get_sim_time("ns")
        for node in range(size):
            tb.signal(node, "start").value = 0

        async def last_done(size=size):
            while True:
                await ReadOnly()
                if all(int(tb.signal(node, "done").value) for node in range(size)):
                    return get_sim_time("ns")
                await RisingEdge(tb.clock)

        last = await tb.bounded(last_done(), cycles=40 * size * size * lines + 2000, what=f"ring of {size}")
        await tb.cycles(20)
        point = {"nodes": size, "lines": lines, "cycles": round((last - first) / CLOCK_PERIOD_NS),
                 **tb.flits(), "sent": [tb.counters(node)["sent"] for node in range(size)]}
        expected = ring_counts(size, lines)
        assert point["packets"] == expected["packets"] and point["packet_hops"] == expected["packet_hops"], (
            f"{point} != {expected}")
        results.append(point)
    channel.reply(results)


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
SLOW_SHAPES = {"8_nodes", "16_nodes"}  # make test runs the 4-node ring (all four tests)


@pytest.mark.parametrize("shape", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_SHAPES else name
                                   for name in SHAPES])
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
    from rtl.registry import get_block

    with pytest.raises(ValueError, match=message):
        get_block(block).build(params)
