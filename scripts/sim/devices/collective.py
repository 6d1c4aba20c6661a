"""Host device of the collective family: a leaf of the all-reduce, its SmartNIC on a switch port.

:class:`Leaf` sends a leaf's gradient lines, fetch requests and barrier task to the gradient
control unit (GCU) through a :class:`scripts.sim.devices.runtime.SwitchPort`, and sorts the
replies (sums or new parameters by partition, barrier acknowledgements), checking each reply's
check byte and line order. The collective tests (``gcu_cluster``, the tiered and ring clusters)
drive their leaves with it. There is no synchronous API for the GCU: no flow outside the tests
runs it yet.

:class:`RingTB` drives ``ring_cluster`` (loads, starts, reads back and counts the flits on the
switch ports); :func:`ring_session` (session ``collective.ring``) times all-reduces of given
sizes for ``bench_ring``, and :func:`measure_ring` runs it in a simulation.
"""

from collections import Counter

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from golden.collective import LINE_WORDS, line_value, ring_counts
from golden.collective.control import TAG_SHIFT
from golden.runtime import packet as gp
from scripts.sim import knobs
from scripts.sim.devices.runtime import SwitchPort
from scripts.sim.runner import resolved_params_from_env
from scripts.sim.tb import CLOCK_PERIOD_NS, ClockedTB

__all__ = ["VC", "Leaf", "gradient_line", "COUNTERS", "RingTB", "ring_session", "SESSIONS", "measure_ring"]

# Virtual channel of each packet type on the switch.
VC = {gp.TASK: 0, gp.RDMA: 1, gp.DATA: 2}


def gradient_line(chunk, version):
    """The ``line`` field of a gradient line: ``chunk``, tagged with the ``version`` it reduces towards."""
    return chunk | version << TAG_SHIFT



class Leaf:
    """One leaf's SmartNIC: packets out through its switch port, replies sorted by type."""

    def __init__(self, tb, leaf, rng, *, gaps, slow, node, dst):
        self.tb, self.leaf, self.rng = tb, leaf, rng
        self.node, self.dst = node, dst  # its id and the control unit's, on its own switch
        self.port = SwitchPort(tb, leaf, rng, gaps, slow, depth=tb.params["switch_depth"],
                               rx_credits=tb.params["queue_depth"])
        self.seen = 0
        self.sums = {}  # (version, partition) -> {chunk: line}
        self.acks = []
        self.completed = {}  # (version, partition) -> the cycle its last line arrived
        self.sent, self.got = Counter(), Counter()  # packets by type

    def send(self, packet, *, broken=False):
        self.sent[packet.ptype] += 1
        word = gp.encode(packet)
        if broken:  # a flipped data bit: the header still routes it to the GCU
            word ^= 1 << int(self.rng.integers(gp.HEADER_BITS + 32, gp.PACKET_BITS))
        self.port.outbound.append((VC[packet.ptype], word))

    def _sort(self):
        while self.seen < len(self.port.received):
            _, word = self.port.received[self.seen]
            self.seen += 1
            packet = gp.decode(word)
            self.got[packet.ptype] += 1
            assert gp.checksum(word) == 0, f"leaf {self.leaf}: a corrupt packet from the GCU"
            if packet.ptype == gp.TASK:
                self.acks.append(packet.range)
            else:
                lines = self.sums.setdefault((self.version, packet.range), {})
                assert packet.line not in lines and packet.last == int(packet.line == self.tb.chunks - 1), (
                    f"leaf {self.leaf}: line {packet.line} (last {packet.last}) of partition {packet.range}")
                lines[packet.line] = packet.data
                if len(lines) == self.tb.chunks:
                    self.completed[self.version, packet.range] = self.tb.cycle

    async def wait_for(self, condition, what):
        async def poll():
            self._sort()
            while not condition():
                self.port.arrived.clear()
                await self.port.arrived.wait()
                self._sort()
        await self.tb.bounded(poll(), cycles=self.tb.patience, what=f"leaf {self.leaf}: {what}")

    def has_sums(self, partition):
        return len(self.sums.get((self.version, partition), {})) == self.tb.chunks

    async def iterate(self, iteration, gradients):
        """Send this iteration's gradients, fetch every partition's sums, pass the barrier."""
        tb = self.tb
        self.version = (iteration + 1) % 256
        for partition in range(tb.partitions):
            if partition >= tb.slots:
                older = partition - tb.slots
                await self.wait_for(lambda p=older: self.has_sums(p), f"sums of {older}")
            for chunk in self.rng.permutation(tb.chunks):
                self.send(gp.Packet(gp.DATA, dst=self.dst, src=self.node, range=partition,
                                    line=gradient_line(int(chunk), self.version),
                                    data=line_value(gradients[self.leaf, partition, chunk])))
            self.send(gp.Packet(gp.RDMA, dst=self.dst, src=self.node, range=partition, first=self.version))
        for partition in range(tb.partitions):
            await self.wait_for(lambda p=partition: self.has_sums(p), f"sums of {partition}")
        self.send(gp.Packet(gp.TASK, dst=self.dst, src=self.node, mask=1))
        await self.wait_for(lambda: self.acks and self.acks[-1] == self.version, f"barrier {iteration}")


# ---- the ring all-reduce ----

COUNTERS = ("sent", "malformed", "unexpected")


class RingTB(ClockedTB):
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

    def flits(self):
        return {"packets": sum(self.up), "packet_hops": sum(self.up) + sum(self.down)}


async def ring_session(dut, job):
    """For ``bench_ring``: cycles, packets and packet-hops of each ``(size, lines)`` of ``job``.

    Every ring node starts at the same cycle; ``cycles`` counts the rising edges from the one that
    takes ``start`` to the one that raises the last ``done``. The vectors are what the previous
    all-reduce left (zeros at first): the values never change the timing (the engine's latency is
    fixed), and the counts are checked against the golden's for every point.
    """
    tb = RingTB(dut, salt=5)
    await tb.reset()
    results = []
    for size, lines in job:
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
    return results


SESSIONS = {"ring": ring_session}


def measure_ring(params, points):
    """:func:`ring_session` of ``points`` (``(nodes, lines)`` pairs) on ``ring_cluster`` built with
    ``params``: one dict per point."""
    from scripts.sim.devices import run_session

    return run_session("ring_cluster", "collective.ring", [tuple(point) for point in points], params=params)
