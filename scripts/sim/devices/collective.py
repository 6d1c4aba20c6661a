"""Host device of the collective family: a leaf of the all-reduce, its SmartNIC on a switch port.

:class:`Leaf` sends a leaf's gradient lines, fetch requests and barrier task to the gradient
control unit (GCU) through a :class:`scripts.sim.devices.runtime.SwitchPort`, and sorts the
replies (sums or new parameters by partition, barrier acknowledgements), checking each reply's
check byte and line order. The collective tests (``gcu_cluster``, the tiered and ring clusters)
drive their leaves with it, in :class:`AllReduceTB` (one switch level), :class:`TieredTB` (two)
and :class:`SlicedTB` (a GCU slice per leaf, ``sliced_gcu_cluster``), which check every leaf's
sums (or new parameters) against the golden; the sessions ``collective.gcu_traffic``,
``collective.tiered_traffic`` and ``collective.sliced_traffic`` count one all-reduce's packets
and cycles, which :func:`measure_traffic` runs for ``bench_collective``. :func:`run_program` runs a
host program that alternates with all-reduces through the GCU with its Adam step (session
``collective.program``: ``neartrain demo allreduce`` trains through it).

:class:`RingTB` drives ``ring_cluster`` (loads, starts, reads back and counts the flits on the
switch ports); :func:`ring_session` (session ``collective.ring``) times all-reduces of given
sizes for ``bench_ring``, and :func:`measure_ring` runs it in a simulation.
"""

from collections import Counter

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from golden.collective import (
    LINE_WORDS,
    delayed_update_step,
    line_value,
    mean_scale,
    reduce_hierarchical,
    reduce_leaf_order,
    ring_counts,
)
from golden.collective.control import TAG_SHIFT
from golden.optim import nonfinite_gradient
from golden.optim.host import scalar_bits
from golden.runtime import packet as gp
from scripts.sim import knobs
from scripts.sim.devices.runtime import SwitchPort
from scripts.sim.runner import component_from_env, resolved_params_from_env
from scripts.sim.stream import StreamSource, stream_layout
from scripts.sim.tb import CLOCK_PERIOD_NS, ClockedTB

__all__ = ["VC", "Leaf", "gradient_line", "HYPER", "ZERO_COUNTERS", "random_words", "AllReduceTB", "TieredTB",
           "SlicedTB", "gcu_traffic_session", "tiered_traffic_session", "sliced_traffic_session", "COUNTERS",
           "RingTB", "ring_session", "SESSIONS", "measure_traffic", "measure_ring", "line_words",
           "program_session", "run_program"]

# Virtual channel of each packet type on the switch.
VC = {gp.TASK: 0, gp.RDMA: 1, gp.DATA: 2}


def gradient_line(chunk, version):
    """The ``line`` field of a gradient line: ``chunk``, tagged with the ``version`` it reduces towards."""
    return chunk | version << TAG_SHIFT


def line_words(value):
    """The 14 binary32 words (uint32) of a 448-bit line, word 0 from the low bits (the inverse of
    :func:`golden.collective.line_value`)."""
    return [value >> (32 * word) & 0xFFFFFFFF for word in range(LINE_WORDS)]



class ChannelPort(SwitchPort):
    """A :class:`SwitchPort` whose channels never block each other, as the RTL's network interface
    (a send queue per channel): the first queued flit whose channel has a credit goes, so a fetch
    request waiting for an RDMA credit does not hold up the gradient lines queued behind it. Each
    channel's flits keep their order."""

    def pick(self):
        return next((index for index, (vc, _) in enumerate(self.outbound) if self.may_send(vc)), None)


class Leaf:
    """One leaf's SmartNIC: packets out through its switch port, replies sorted by type."""

    def __init__(self, tb, leaf, rng, *, gaps, slow, node, dst):
        self.tb, self.leaf, self.rng = tb, leaf, rng
        self.node, self.dst = node, dst  # its id and the control unit's, on its own switch
        self.port = tb.port_class(tb, leaf, rng, gaps, slow, depth=tb.params["switch_depth"],
                               rx_credits=tb.params["queue_depth"])
        self.seen = 0
        self.sums = {}  # (version, partition) -> {chunk: line}
        self.acks = []
        self.completed = {}  # (version, partition) -> the cycle its last line arrived
        self.sent, self.got = Counter(), Counter()  # packets by type
        self.asked, self.held_back = Counter(), {}  # fetches out, and those waiting, per control unit

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
                partition = self.tb.partition_of(packet.src, packet.range)
                lines = self.sums.setdefault((self.version, partition), {})
                assert packet.line not in lines and packet.last == int(packet.line == self.tb.chunks - 1), (
                    f"leaf {self.leaf}: line {packet.line} (last {packet.last}) of partition {partition}")
                lines[packet.line] = packet.data
                if len(lines) == self.tb.chunks:
                    self.completed[self.version, partition] = self.tb.cycle
                    self.asked[packet.src] -= 1
                    if self.held_back.get(packet.src):
                        self.fetch(self.held_back[packet.src].pop(0))

    def fetch(self, packet):
        """Send the fetch ``packet``, or hold it back while ``tb.fetches_ahead`` of this leaf's
        fetches to its control unit are unanswered (sent, in order, as each is answered)."""
        limit = self.tb.fetches_ahead
        if limit is not None and self.asked[packet.dst] >= limit:
            self.held_back.setdefault(packet.dst, []).append(packet)
            return
        self.asked[packet.dst] += 1
        self.send(packet)

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
        order = tb.send_order(self.leaf)
        for step, partition in enumerate(order):
            if step >= tb.window:  # the partition this one's slot held before must be done
                older = order[step - tb.window]
                await self.wait_for(lambda p=older: self.has_sums(p), f"sums of {older}")
            dst, local = tb.route(self, partition)
            for chunk in self.rng.permutation(tb.chunks):
                self.send(gp.Packet(gp.DATA, dst=dst, src=self.node, range=local,
                                    line=gradient_line(int(chunk), self.version),
                                    data=line_value(gradients[self.leaf, partition, chunk])))
            self.fetch(gp.Packet(gp.RDMA, dst=dst, src=self.node, range=local, first=self.version))
        for partition in order:
            await self.wait_for(lambda p=partition: self.has_sums(p), f"sums of {partition}")
        self.send(gp.Packet(gp.TASK, dst=self.dst, src=self.node, mask=1))
        await self.wait_for(lambda: self.acks and self.acks[-1] == self.version, f"barrier {iteration}")


# ---- the all-reduce through the GCU, on one switch level or two ----

DROPS = ("bad_leaf", "bad_partition", "bad_chunk", "conflicts", "duplicates")
HYPER = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
# Counters of a control unit that a clean all-reduce leaves at zero (and its sticky overflow flag).
ZERO_COUNTERS = ("malformed", "bad_requests", "stale_requests", "duplicate_requests", "late_gradients",
                 "barrier_bad_leaf", "barrier_duplicates", *(f"reduction_{name}" for name in DROPS),
                 "overflow")
_SPECIALS = np.array([0x7FC00000, 0x7F800001, 0x7F800000, 0xFF800000, 0x00000001, 0x80000000, 0x00000000,
                      0x7F7FFFFF, 0xFF7FFFFF, 0x00800000], np.uint32)


def random_words(rng, shape, *, specials=0.02):
    """Random binary32 bits: gradients of mixed scale, with a share of NaN, Inf, subnormals and zeros."""
    values = (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 3, shape)).astype(np.float32)
    bits = values.view(np.uint32)
    picks = rng.random(shape) < specials
    bits[picks] = rng.choice(_SPECIALS, int(picks.sum()))
    return bits


class AllReduceTB(ClockedTB):
    """The leaves of ``gcu_cluster`` (the GCU on the switch's last port), iterating an all-reduce.

    Subclasses place the leaves elsewhere (:meth:`leaf_count`, :meth:`placed`) and name the sums
    they expect (:meth:`reduce`).
    """

    # The leaves' port driver: one queue in send order (a flit waits for the one ahead of it).
    port_class = SwitchPort
    # Fetches a leaf keeps unanswered per control unit (None: no limit, each sent with its lines).
    fetches_ahead = None
    # Adam's hyper-parameters with ``update="adam"`` (golden.optim.adam's keywords, but the step's).
    hyper = HYPER

    def __init__(self, dut, *, gaps=True, slow=True, salt=0):
        super().__init__(dut)
        self.params = resolved_params_from_env()
        self.chunks, self.slots = self.params["chunks"], self.params["slots"]
        self.partitions = self.partition_count()
        self.patience = 400 * self.leaf_count() * self.partitions * self.chunks + 2000
        self.leaves = [Leaf(self, leaf, knobs.rng(salt + leaf), gaps=gaps, slow=slow, **self.placed(leaf))
                       for leaf in range(self.leaf_count())]
        self.adam = self.params.get("update") == "adam"
        self.nonfinite = False
        if self.adam:
            self.loads = StreamSource(dut, "load", self.clock, stream_layout(component_from_env(), "load"))

    @property
    def gcu(self):
        """The GCU's node id."""
        return self.params["nodes"] - 1

    def leaf_count(self):
        """Leaves on the cluster's ports."""
        return self.params["leaves"]

    def partition_count(self):
        """Partitions of the gradient."""
        return self.params["partitions"]

    @property
    def window(self):
        """Partitions a leaf keeps open: it sends the ``k``-th of :meth:`send_order` once it holds the
        sums of the ``(k - window)``-th, which held the same reduction (and request) slot."""
        return self.slots

    def send_order(self, leaf):
        """The partitions in the order leaf ``leaf`` sends them."""
        return range(self.partitions)

    def route(self, leaf, partition):
        """Where ``leaf`` (a :class:`Leaf`) sends ``partition``'s lines and fetch: the control unit's
        node id and the partition's id there."""
        return leaf.dst, partition

    def partition_of(self, src, local):
        """The partition whose sums a reply from node ``src`` with ``range`` = ``local`` carries."""
        return local

    def placed(self, leaf):
        """Leaf ``leaf``'s node id and its control unit's, on its switch."""
        return {"node": leaf, "dst": self.gcu}

    def reduce(self, gradients):
        """The sums every leaf must fetch, shape ``(partitions, chunks, 14)``."""
        return reduce_leaf_order(gradients)

    async def load_state(self, rng):
        """The host loads random parameters, first moments and non-negative second moments."""
        shape = (self.partitions, self.chunks, LINE_WORDS)
        await self.load([random_words(rng, shape, specials=0), random_words(rng, shape, specials=0),
                         random_words(rng, shape, specials=0) & 0x7FFFFFFF])

    async def load(self, state):
        """The host loads ``state``: parameters, first and second moments, uint32 bits of shape
        ``(partitions, chunks, 14)`` each, which the golden then steps from."""
        self.state = [np.asarray(tensor, np.uint32) for tensor in state]
        for tensor, lines in enumerate(self.state):
            for partition, chunk in np.ndindex(lines.shape[:2]):
                self.loads.send_nowait({"tensor": tensor, "address": partition * self.chunks + chunk,
                                        "data": line_value(lines[partition, chunk])})
        lines = self.partitions * self.chunks
        await self.bounded(self.loads.wait_idle(), cycles=30 * lines + 100, what="state load")

    def expected(self, gradients, step):
        """Every partition's lines a fetch returns after this iteration: sums, or new parameters."""
        if not self.adam:
            return self.reduce(gradients)
        self.state = list(delayed_update_step(gradients, *self.state, step=step, **self.hyper))
        self.nonfinite |= nonfinite_gradient(reduce_leaf_order(gradients).view(np.float32))
        return self.state[0]

    def gradients(self, rng):
        shape = (len(self.leaves), self.partitions, self.chunks, LINE_WORDS)
        return random_words(rng, shape, specials=0.01)

    async def run(self, rng, iterations, *, first=0):
        """Iterations ``first .. first + iterations - 1`` of the all-reduce, every leaf's sums checked."""
        if self.adam:
            await self.load_state(rng)
        self.started = self.cycle
        for iteration in range(first, first + iterations):
            gradients = self.gradients(rng)
            got, expected = await self.all_reduce(iteration, gradients)
            for leaf in self.leaves:
                for partition in range(self.partitions):
                    assert np.array_equal(got[leaf.leaf, partition], expected[partition]), (
                        f"leaf {leaf.leaf}, iteration {iteration}, partition {partition}: "
                        f"{'parameters' if self.adam else 'sums'} differ; {knobs.describe()}")

    async def all_reduce(self, iteration, gradients):
        """Iteration ``iteration`` of the all-reduce of ``gradients`` (uint32 bits, shape ``(leaves,
        partitions, chunks, 14)``): every leaf sends its lines, fetches every partition and passes the
        barrier. Returns what each leaf fetched, shape ``(leaves, partitions, chunks, 14)``, and the
        golden's lines (:meth:`expected`), shape ``(partitions, chunks, 14)``."""
        if self.adam:  # the step's scalars are stable while its partitions are reduced
            hyper = dict(self.hyper, step=iteration + 1, grad_scale=mean_scale(len(self.leaves)))
            for name, bits in scalar_bits("adam", hyper).items():
                getattr(self.dut, f"scalars__{name}").value = bits
        tasks = [cocotb.start_soon(leaf.iterate(iteration, gradients)) for leaf in self.leaves]
        for task in tasks:
            await task
        version = (iteration + 1) % 256
        got = np.array([[[line_words(leaf.sums[version, partition][chunk]) for chunk in range(self.chunks)]
                         for partition in range(self.partitions)] for leaf in self.leaves], np.uint32)
        return got, self.expected(gradients, iteration + 1)

    async def reset_mid_iteration(self, rng, cycles):
        """Start an iteration, reset the DUT after a random number of ``cycles`` (a pair, low and high),
        and make the leaves forget it."""
        gradients = self.gradients(rng)
        tasks = [cocotb.start_soon(leaf.iterate(0, gradients)) for leaf in self.leaves]
        await ClockCycles(self.clock, int(rng.integers(*cycles)))
        for task in tasks:
            task.cancel()
        await self.reset_mid_transfer(rng, after=(0, 0), drivers=[leaf.port for leaf in self.leaves])
        for leaf in self.leaves:
            leaf.seen, leaf.sums, leaf.acks, leaf.asked, leaf.held_back = 0, {}, [], Counter(), {}

    def counters(self, names=ZERO_COUNTERS):
        """The DUT's counters of ``names``."""
        return {name: int(getattr(self.dut, name).value) for name in names}


def switch_size(ports):
    """The runtime switch sizes (4, 8, 16 ports): the smallest with ``ports`` ports."""
    return min(nodes for nodes in (4, 8, 16) if nodes >= ports)


class TieredTB(AllReduceTB):
    """The leaves of ``tiered_cluster``, region after region."""

    def leaf_count(self):
        return self.params["regions"] * self.params["region_leaves"]

    def placed(self, leaf):
        per_region = self.params["region_leaves"]
        return {"node": leaf % per_region, "dst": switch_size(per_region + 1) - 1}

    def reduce(self, gradients):
        return reduce_hierarchical(gradients, self.params["regions"])

    @property
    def gcu(self):
        return switch_size(self.params["regions"] + 1) - 1


class SlicedTB(AllReduceTB):
    """The leaves of ``sliced_gcu_cluster``: partition ``p`` goes to slice ``p mod N`` (node
    ``N + p mod N``) as its partition ``p // N``.

    The leaves send round after round (round ``r``: partitions ``r N .. r N + N - 1``, one per
    slice), leaf ``i`` starting each round at slice ``i``, so leaves in step never target one
    slice at once; a leaf keeps ``slots`` rounds open (a slice's reduction slots). The barrier is
    slice 0's, which :attr:`gcu` names. The leaves' channels are independent (:class:`ChannelPort`):
    a slice's port is busy with gradient lines most of the time, the switch serves data before
    RDMA, and a leaf whose fetch request waited for an RDMA credit at the head of one queue would
    stop sending lines until that slice's input had a gap.
    """

    port_class = ChannelPort
    # A slice serves its lowest waiting fetch entry first, and entries go by leaf id: with every
    # fetch sent at once, leaf 0's newer partitions went before leaf N - 1's older ones (at N = 4,
    # partition 0 reached leaf 3 about 3,000 cycles after leaf 0) and the last leaves' windows
    # stalled. Two fetches out per slice make the service take the leaves nearly in turn (one left
    # each slice idle for a fetch's round trip: 1.72 cycles per line at N = 2 against 1.07 with two,
    # bench_collective sliced).
    fetches_ahead = 2

    def partition_count(self):
        return self.params["partitions"] * self.params["leaves"]

    @property
    def gcu(self):
        return self.params["leaves"]

    @property
    def window(self):
        return self.slots * self.params["leaves"]

    def send_order(self, leaf):
        n = self.params["leaves"]
        return [r * n + (leaf + k) % n for r in range(self.params["partitions"]) for k in range(n)]

    def route(self, leaf, partition):
        n = self.params["leaves"]
        return n + partition % n, partition // n

    def partition_of(self, src, local):
        n = self.params["leaves"]
        return local * n + src - n


async def gcu_traffic_session(dut, job):
    """The packets of one all-reduce, counted at the leaves' ports, against the seed's formula.

    Section 7.5.1: reduce plus broadcast moves ``Z/P * 2(N + S)`` packets (``P`` = 14 elements per
    packet, ``S`` = 0 second-level switches here), each crossing two links (leaf to switch, switch
    to GCU). Beyond the formula: one fetch request per leaf and partition, and per leaf a barrier
    and its acknowledgement. Returns the counts and the cycle at which each partition's last line
    reached its last leaf (``bench_collective traffic``); ``job`` is unused.
    """
    return await _one_level_traffic(AllReduceTB(dut, gaps=False, slow=False, salt=4))


async def sliced_traffic_session(dut, job):
    """:func:`gcu_traffic_session` on ``sliced_gcu_cluster``: the same packets (``Z/P * 2N`` data
    packets, each crossing two links, leaf to switch and switch to slice), spread over the ``N``
    slices' ports; every leaf sends and receives ``Z/P`` lines (``bench_collective sliced``)."""
    return await _one_level_traffic(SlicedTB(dut, gaps=False, slow=False, salt=4))


async def _one_level_traffic(tb):
    """One all-reduce by ``tb``'s leaves without gaps (credits back within 2 cycles): its packets
    at the leaves' ports, checked against the seed's formula, and each partition's completion."""
    await tb.reset()
    await tb.run(knobs.rng(8), 1)
    leaves, lines = len(tb.leaves), tb.partitions * tb.chunks
    for leaf in tb.leaves:  # Z/P lines each way on every leaf's link
        assert leaf.sent[gp.DATA] == leaf.got[gp.DATA] == lines, (leaf.leaf, leaf.sent, leaf.got)
    sent = sum((leaf.sent for leaf in tb.leaves), Counter())
    got = sum((leaf.got for leaf in tb.leaves), Counter())
    assert sent[gp.DATA] == got[gp.DATA] == leaves * lines, (sent, got, knobs.describe())
    assert sent[gp.DATA] + got[gp.DATA] == lines * 2 * leaves  # Z/P * 2(N + S), S = 0
    assert sent[gp.RDMA] == leaves * tb.partitions and sent[gp.TASK] == got[gp.TASK] == leaves, (sent, got)
    assert got[gp.RDMA] == 0, got
    done = [max(leaf.completed[1, p] for leaf in tb.leaves) - tb.started for p in range(tb.partitions)]
    return {"leaves": leaves, "elements": lines * LINE_WORDS, "data_packets": sent[gp.DATA] + got[gp.DATA],
            "control_packets": sent[gp.RDMA] + sent[gp.TASK] + got[gp.TASK], "hops_per_packet": 2,
            "partition_done": sorted(done)}


async def count_gcu_port(tb, counts):
    """Count the packets into and out of the GCU's root switch port, by direction and type (the
    root level's traffic: every packet there goes between a regional unit and the GCU)."""
    gcu = tb.dut.block.gcu
    while True:
        await RisingEdge(tb.clock)
        for direction in ("in", "out"):
            if int(getattr(gcu, f"net_{direction}__valid").value):
                word = int(getattr(gcu, f"net_{direction}__payload").value) & ((1 << gp.PACKET_BITS) - 1)
                counts[direction, gp.decode(word).ptype] += 1


async def tiered_traffic_session(dut, job):
    """The packets of one all-reduce on two levels, against the seed's ``Z/P * 2(N + S)``.

    Section 7.5.1 with ``S`` sub-region switches: the ``N`` leaves send ``Z/P`` lines each to their
    region, the ``S`` regions send ``Z/P`` reduced lines each to the GCU, and the broadcast moves as
    many back (each region fetches once for its leaves). Counted at the leaves' ports and at the
    GCU's root port; each packet crosses two links at its level. Beyond the formula: a fetch request
    per leaf (region) and partition, a barrier and its acknowledgement per leaf (region). The counts
    (``bench_collective tiered``) and the cycle at which each partition's last line reached
    its last leaf are returned; ``job`` is unused.
    """
    tb = TieredTB(dut, gaps=False, slow=False, salt=14)
    await tb.reset()
    root = Counter()
    cocotb.start_soon(count_gcu_port(tb, root))
    await tb.run(knobs.rng(18), 1)
    leaves, regions, lines = len(tb.leaves), tb.params["regions"], tb.partitions * tb.chunks
    sent = sum((leaf.sent for leaf in tb.leaves), Counter())
    got = sum((leaf.got for leaf in tb.leaves), Counter())
    assert sent[gp.DATA] == got[gp.DATA] == leaves * lines, (sent, got, knobs.describe())
    assert root["in", gp.DATA] == root["out", gp.DATA] == regions * lines, (root, knobs.describe())
    assert sent[gp.DATA] + got[gp.DATA] + root["in", gp.DATA] + root["out", gp.DATA] == lines * 2 * (
        leaves + regions)  # Z/P * 2(N + S)
    assert sent[gp.RDMA] == leaves * tb.partitions and sent[gp.TASK] == got[gp.TASK] == leaves, (sent, got)
    assert root["in", gp.RDMA] == regions * tb.partitions, root
    assert root["in", gp.TASK] == root["out", gp.TASK] == regions and not root["out", gp.RDMA], root
    done = [max(leaf.completed[1, p] for leaf in tb.leaves) - tb.started for p in range(tb.partitions)]
    leaf_control = sent[gp.RDMA] + sent[gp.TASK] + got[gp.TASK]
    root_control = root["in", gp.RDMA] + root["in", gp.TASK] + root["out", gp.TASK]
    return {"leaves": leaves, "regions": regions, "elements": lines * LINE_WORDS,
            "leaf_data_packets": sent[gp.DATA] + got[gp.DATA],
            "root_data_packets": root["in", gp.DATA] + root["out", gp.DATA],
            "control_packets": leaf_control + root_control, "hops_per_packet": 2,
            "partition_done": sorted(done)}


async def program_session(dut, job):
    """``await job["program"](tb, job["payload"])``, ``tb`` an :class:`AllReduceTB` on ``gcu_cluster``
    after reset (leaves without gaps, credits back within 2 cycles): host work that alternates with
    all-reduces, as a training loop does (the leaves' next gradients depend on the parameters they
    fetched). The program loads the GCU's state (:meth:`AllReduceTB.load`), sets ``tb.hyper`` and
    calls :meth:`AllReduceTB.all_reduce` once per step; returns what it returns."""
    tb = AllReduceTB(dut, gaps=False, slow=False, salt=job["salt"])
    await tb.reset()
    return await job["program"](tb, job["payload"])


def run_program(params, program, payload, *, salt=0):
    """Run ``await program(tb, payload)`` (:func:`program_session`) on ``gcu_cluster`` built with
    ``params``; its result. ``program`` is a module-level coroutine function (pickled by reference
    into the simulation), ``payload`` anything picklable, ``salt`` the leaves' random line orders.

    Raises
    ------
    scripts.sim.runner.SimulationError
        If the program raises or an assertion fails in the simulation.
    """
    from scripts.sim.devices import run_session

    return run_session("gcu_cluster", "collective.program", {"program": program, "payload": payload,
                                                              "salt": salt}, params=params)


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


SESSIONS = {"gcu_traffic": gcu_traffic_session, "tiered_traffic": tiered_traffic_session,
            "sliced_traffic": sliced_traffic_session, "ring": ring_session, "program": program_session}


def measure_ring(params, points):
    """:func:`ring_session` of ``points`` (``(nodes, lines)`` pairs) on ``ring_cluster`` built with
    ``params``: one dict per point."""
    from scripts.sim.devices import run_session

    return run_session("ring_cluster", "collective.ring", [tuple(point) for point in points], params=params)


def measure_traffic(block, params):
    """One all-reduce on ``gcu_cluster`` (:func:`gcu_traffic_session`), ``tiered_cluster``
    (:func:`tiered_traffic_session`) or ``sliced_gcu_cluster`` (:func:`sliced_traffic_session`) built
    with ``params``: the session's counts and cycles."""
    from scripts.sim.devices import run_session

    session = {"gcu_cluster": "collective.gcu_traffic", "tiered_cluster": "collective.tiered_traffic",
               "sliced_gcu_cluster": "collective.sliced_traffic"}[block]
    # The tiered session counts at the GCU's root port, inside the cluster: the whole design public.
    return run_session(block, session, None, params=params, internals=block == "tiered_cluster")
