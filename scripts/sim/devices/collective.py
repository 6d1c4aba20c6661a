"""Host device of the collective family: a leaf of the all-reduce, its SmartNIC on a switch port.

:class:`Leaf` sends a leaf's gradient lines, fetch requests and barrier task to the gradient
control unit (GCU) through a :class:`scripts.sim.devices.runtime.SwitchPort`, and sorts the
replies (sums or new parameters by partition, barrier acknowledgements), checking each reply's
check byte and line order. The collective tests (``gcu_cluster``, the tiered and ring clusters)
drive their leaves with it. There is no synchronous API: no flow outside the tests runs the GCU
yet.
"""

from collections import Counter

from golden.collective import line_value
from golden.collective.control import TAG_SHIFT
from golden.runtime import packet as gp
from scripts.sim.devices.runtime import SwitchPort

__all__ = ["VC", "Leaf", "gradient_line"]

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
