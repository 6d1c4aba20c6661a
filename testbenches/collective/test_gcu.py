"""The global control unit on a switch: leaves all-reduce their gradients through it, bit-exact.

The testbench plays the leaves on the ports of ``gcu_cluster`` (the GCU sits on the last port).
Each leaf, per iteration, sends its gradient lines of every partition (a window of ``slots``
partitions open: it opens partition ``p`` once it holds the sums of ``p - slots``), asks for each
partition's sums, then sends a barrier and waits for its acknowledgement. Every leaf must receive
every partition's sums equal to :func:`golden.collective.reduce_leaf_order` of all leaves'
lines, in chunk order. Leaves have random gaps and return their receive credits slowly.

With ``update="adam"`` the host loads random parameters and moments first and sets each step's
scalars, and what every leaf fetches must be the new parameters of
:func:`golden.collective.delayed_update_step`: one step of delayed-update training in the GCU.
"""

from collections import Counter

import cocotb
import numpy as np
import pytest
from cocotb.triggers import ClockCycles

from golden.collective import LINE_WORDS, delayed_update_step, line_value, mean_scale, reduce_leaf_order
from golden.optim import nonfinite_gradient
from golden.optim.host import scalar_bits
from golden.runtime import packet as gp
from scripts.sim import knobs
from scripts.sim.channel import has_job, reply
from scripts.sim.runner import component_from_env, resolved_params_from_env, run_cocotb
from scripts.sim.stream import StreamSource, stream_layout
from scripts.sim.tb import ClockedTB
from testbenches.collective.tb import random_words
from testbenches.runtime.tb import SwitchPort

VC = {gp.TASK: 0, gp.RDMA: 1, gp.DATA: 2}
DROPS = ("bad_leaf", "bad_partition", "bad_chunk", "conflicts", "duplicates")
HYPER = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
ZERO_COUNTERS = ("malformed", "bad_requests", "stale_requests", "duplicate_requests", "barrier_bad_leaf",
                 "barrier_duplicates", *(f"reduction_{name}" for name in DROPS))


class Leaf:
    """One leaf's SmartNIC: packets out through its switch port, replies sorted by type."""

    def __init__(self, tb, leaf, rng, *, gaps, slow):
        self.tb, self.leaf, self.rng = tb, leaf, rng
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
                self.send(gp.Packet(gp.DATA, dst=tb.gcu, src=self.leaf, range=partition, line=int(chunk),
                                    data=line_value(gradients[self.leaf, partition, chunk])))
            self.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=self.leaf, range=partition, first=self.version))
        for partition in range(tb.partitions):
            await self.wait_for(lambda p=partition: self.has_sums(p), f"sums of {partition}")
        self.send(gp.Packet(gp.TASK, dst=tb.gcu, src=self.leaf, mask=1))
        await self.wait_for(lambda: self.acks and self.acks[-1] == self.version, f"barrier {iteration}")


class TB(ClockedTB):
    def __init__(self, dut, *, gaps=True, slow=True, salt=0):
        super().__init__(dut)
        self.params = resolved_params_from_env()
        self.partitions, self.chunks, self.slots = (self.params[k] for k in ("partitions", "chunks", "slots"))
        self.gcu = self.params["nodes"] - 1
        self.patience = 400 * self.params["leaves"] * self.partitions * self.chunks + 2000
        self.leaves = [Leaf(self, leaf, knobs.rng(salt + leaf), gaps=gaps, slow=slow)
                       for leaf in range(self.params["leaves"])]
        self.adam = self.params["update"] == "adam"
        self.nonfinite = False
        if self.adam:
            self.loads = StreamSource(dut, "load", self.clock, stream_layout(component_from_env(), "load"))

    async def load_state(self, rng):
        """The host loads random parameters, first moments and non-negative second moments."""
        shape = (self.partitions, self.chunks, LINE_WORDS)
        self.state = [random_words(rng, shape, specials=0), random_words(rng, shape, specials=0),
                      random_words(rng, shape, specials=0) & 0x7FFFFFFF]
        for tensor, lines in enumerate(self.state):
            for partition, chunk in np.ndindex(shape[:2]):
                self.loads.send_nowait({"tensor": tensor, "address": partition * self.chunks + chunk,
                                        "data": line_value(lines[partition, chunk])})
        await self.bounded(self.loads.wait_idle(), cycles=30 * shape[0] * shape[1] + 100, what="state load")

    def expected(self, gradients, step):
        """Every partition's lines a fetch returns after this iteration: sums, or new parameters."""
        if not self.adam:
            return reduce_leaf_order(gradients)
        self.state = list(delayed_update_step(gradients, *self.state, step=step, **HYPER))
        self.nonfinite |= nonfinite_gradient(reduce_leaf_order(gradients).view(np.float32))
        return self.state[0]

    def gradients(self, rng):
        shape = (len(self.leaves), self.partitions, self.chunks, LINE_WORDS)
        return random_words(rng, shape, specials=0.01)

    async def run(self, rng, iterations):
        if self.adam:
            await self.load_state(rng)
        self.started = self.cycle
        for iteration in range(iterations):
            gradients = self.gradients(rng)
            if self.adam:  # the step's scalars are stable while its partitions are reduced
                hyper = dict(HYPER, step=iteration + 1, grad_scale=mean_scale(len(self.leaves)))
                for name, bits in scalar_bits("adam", hyper).items():
                    getattr(self.dut, f"scalars__{name}").value = bits
            tasks = [cocotb.start_soon(leaf.iterate(iteration, gradients)) for leaf in self.leaves]
            for task in tasks:
                await task
            expected = self.expected(gradients, iteration + 1)  # (partitions, chunks, 14)
            for leaf in self.leaves:
                for partition in range(self.partitions):
                    got = leaf.sums[(iteration + 1) % 256, partition]
                    want = [line_value(expected[partition, chunk]) for chunk in range(self.chunks)]
                    assert [got[chunk] for chunk in range(self.chunks)] == want, (
                        f"leaf {leaf.leaf}, iteration {iteration}, partition {partition}: "
                        f"{'parameters' if self.adam else 'sums'} differ; {knobs.describe()}")

    def counters(self, names=ZERO_COUNTERS):
        return {name: int(getattr(self.dut, name).value) for name in names}


@cocotb.test()
async def leaves_all_reduce_through_the_gcu(dut):
    tb = TB(dut, salt=1)
    await tb.reset()
    await tb.run(knobs.rng(5), knobs.vectors(3))
    assert tb.counters() == dict.fromkeys(ZERO_COUNTERS, 0), knobs.describe()
    if tb.adam:
        assert int(dut.update_nonfinite.value) == int(tb.nonfinite), knobs.describe()


@cocotb.test()
async def bad_packets_are_counted_and_dropped(dut):
    """A corrupt packet, fetches out of range, twice, or for sums already replaced: counted, and the
    all-reduce goes on."""
    tb = TB(dut, salt=2)
    await tb.reset()
    rng = knobs.rng(6)
    await tb.run(rng, 1)
    leaf = tb.leaves[0]
    leaf.send(gp.Packet(gp.DATA, dst=tb.gcu, src=0, range=0, line=0, data=1), broken=True)
    leaf.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=0, range=tb.partitions + 1, first=1))
    if tb.params["leaves"] < tb.gcu:
        leaf.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=tb.params["leaves"], range=0, first=1))
    leaf.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=0, range=0, first=0))  # version 1 replaced version 0
    leaf.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=0, range=1, first=9))  # waits: never reduced 9 times
    # ... so a fetch of a partition in the same slot is a duplicate
    leaf.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=0, range=1 + tb.slots, first=9))
    await ClockCycles(tb.clock, 200)
    expected = dict.fromkeys(ZERO_COUNTERS, 0)
    expected.update(malformed=1, bad_requests=1 + int(tb.params["leaves"] < tb.gcu), stale_requests=1,
                    duplicate_requests=1)
    assert tb.counters() == expected, knobs.describe()


@cocotb.test()
async def reset_mid_iteration(dut):
    tb = TB(dut, salt=3)
    await tb.reset()
    rng = knobs.rng(7)
    gradients = tb.gradients(rng)
    tasks = [cocotb.start_soon(leaf.iterate(0, gradients)) for leaf in tb.leaves]
    await ClockCycles(tb.clock, int(rng.integers(20, 200)))
    for task in tasks:
        task.cancel()
    await tb.reset_mid_transfer(rng, after=(0, 0), drivers=[leaf.port for leaf in tb.leaves])
    for leaf in tb.leaves:
        leaf.seen, leaf.sums, leaf.acks = 0, {}, []
    await tb.run(rng, 2)
    assert tb.counters() == dict.fromkeys(ZERO_COUNTERS, 0), knobs.describe()


@cocotb.test()
async def traffic_of_one_all_reduce(dut):
    """The packets of one all-reduce, counted at the leaves' ports, against the seed's formula.

    Section 7.5.1: reduce plus broadcast moves ``Z/P * 2(N + S)`` packets (``P`` = 14 elements per
    packet, ``S`` = 0 second-level switches here), each crossing two links (leaf to switch, switch
    to GCU). Beyond the formula: one fetch request per leaf and partition, and per leaf a barrier
    and its acknowledgement. With a job (``bench_collective traffic``) the counts and the cycle at
    which each partition's last line reached its last leaf are replied.
    """
    tb = TB(dut, gaps=False, slow=False, salt=4)
    await tb.reset()
    await tb.run(knobs.rng(8), 1)
    leaves, lines = len(tb.leaves), tb.partitions * tb.chunks
    sent = sum((leaf.sent for leaf in tb.leaves), Counter())
    got = sum((leaf.got for leaf in tb.leaves), Counter())
    assert sent[gp.DATA] == got[gp.DATA] == leaves * lines, (sent, got, knobs.describe())
    assert sent[gp.DATA] + got[gp.DATA] == lines * 2 * leaves  # Z/P * 2(N + S), S = 0
    assert sent[gp.RDMA] == leaves * tb.partitions and sent[gp.TASK] == got[gp.TASK] == leaves, (sent, got)
    assert got[gp.RDMA] == 0, got
    if has_job():
        done = [max(leaf.completed[1, p] for leaf in tb.leaves) - tb.started for p in range(tb.partitions)]
        reply({"leaves": leaves, "elements": lines * LINE_WORDS, "data_packets": sent[gp.DATA] + got[gp.DATA],
               "control_packets": sent[gp.RDMA] + sent[gp.TASK] + got[gp.TASK], "hops_per_packet": 2,
               "partition_done": sorted(done)})


SHAPES = {
    "3_leaves": {},
    "7_leaves_one_chunk": {"nodes": 8, "leaves": 7, "chunks": 1, "partitions": 6, "slots": 4},
    "15_leaves": {"nodes": 16, "leaves": 15, "chunks": 2, "partitions": 4, "slots": 2},
    "3_leaves_adam": {"update": "adam", "partitions": 4, "chunks": 2},
}


# The 15-leaf network takes minutes to build and run: make test-full only.
SLOW_SHAPES = {"15_leaves"}


@pytest.mark.parametrize("shape", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_SHAPES else name
                                   for name in SHAPES])
def test_gcu(shape):
    run_cocotb("gcu_cluster", __name__, params=SHAPES[shape])


@pytest.mark.parametrize("params,message", [
    ({"leaves": 4, "node": 3}, "node must be in 4..15"),
    ({"slots": 3}, "slots must be one of"),
    ({"partitions": 65}, "partitions must be in 1..64"),
    ({"mode": "fastest"}, "mode must be one of"),
    ({"update": "sgd"}, "update must be one of"),
    ({"update_lanes": 4}, "update_lanes must be one of"),
])
def test_gcu_rejects_bad_parameters_at_elaboration(params, message):
    from rtl.registry import get_block

    with pytest.raises(ValueError, match=message):
        get_block("gcu").build(params)
