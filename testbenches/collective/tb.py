"""Pieces the collective testbenches share: gradient lines with special values, leaf traffic, and the
all-reduce testbench around the leaves (their SmartNICs on the cluster's switch ports), whose
driver :class:`Leaf` is the host device's (:mod:`scripts.sim.devices.collective`)."""


import cocotb
import numpy as np
import softfloatpy as sf
from cocotb.triggers import ClockCycles

from golden.collective import (
    CANONICAL_NAN_BITS,
    LINE_WORDS,
    Contribution,
    delayed_update_step,
    line_value,
    mean_scale,
    reduce_leaf_order,
)
from golden.collective.control import TAG_SHIFT
from golden.optim import nonfinite_gradient
from golden.optim.host import scalar_bits
from scripts.sim import knobs
from scripts.sim.devices.collective import VC, Leaf, gradient_line
from scripts.sim.runner import component_from_env, resolved_params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB

DROPS = ("bad_leaf", "bad_partition", "bad_chunk", "conflicts", "duplicates")
HYPER = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
# Counters of a control unit that a clean all-reduce leaves at zero (and its sticky overflow flag).
ZERO_COUNTERS = ("malformed", "bad_requests", "stale_requests", "duplicate_requests", "late_gradients",
                 "barrier_bad_leaf", "barrier_duplicates", *(f"reduction_{name}" for name in DROPS),
                 "overflow")
# The ring_cluster build that bench_ring measures on and test_ring also runs (up to 64 lines per
# segment at 16 nodes).
RING_BENCH_PARAMS = {"ports": 16, "nodes": 16, "depth": 1024}


__all__ = ["StreamTB", "Leaf", "TB", "VC", "HYPER", "ZERO_COUNTERS", "TAG_SHIFT", "gradient_line",
           "random_words", "leaf_traffic", "by_partition", "reshuffled", "nonfinite", "softfloat_add",
           "RING_BENCH_PARAMS"]

_SPECIALS = np.array([0x7FC00000, 0x7F800001, 0x7F800000, 0xFF800000, 0x00000001, 0x80000000, 0x00000000,
                      0x7F7FFFFF, 0xFF7FFFFF, 0x00800000], np.uint32)


def random_words(rng, shape, *, specials=0.02):
    """Random binary32 bits: gradients of mixed scale, with a share of NaN, Inf, subnormals and zeros."""
    values = (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 3, shape)).astype(np.float32)
    bits = values.view(np.uint32)
    picks = rng.random(shape) < specials
    bits[picks] = rng.choice(_SPECIALS, int(picks.sum()))
    return bits


def softfloat_add(a, b):
    """Berkeley SoftFloat's binary32 ``a + b`` of raw bits, a NaN result made canonical (the oracle)."""
    result = sf.f32_add(sf.Float32.from_bytes(int(a).to_bytes(4, "big")),
                        sf.Float32.from_bytes(int(b).to_bytes(4, "big")))
    bits = int.from_bytes(result.to_bytes(), "big")
    return CANONICAL_NAN_BITS if (bits >> 23) & 0xFF == 0xFF and bits & 0x7FFFFF else bits


def nonfinite(line):
    """Whether a 448-bit line holds a NaN or an infinity in any word."""
    return any((line >> (32 * word + 23)) & 0xFF == 0xFF for word in range(LINE_WORDS))


def leaf_traffic(rng, *, leaves, partitions, slots, chunks, count, first=0, specials=0.02):
    """Contributions of ``count`` partitions as leaves would send them through one switch port.

    Partitions ``first, first + 1, ...`` (ids wrap at ``partitions``) each get ``leaves * chunks``
    contributions in a random order. Up to ``slots`` partitions are open at once and are
    interleaved at random; partition ``p`` opens only once ``p - slots`` is complete, as the
    leaves' window guarantees, so no contribution meets a slot held by another partition.
    """
    pending = {}
    order = []
    opened = 0

    def open_next():
        nonlocal opened
        index = first + opened
        lines = random_words(rng, (leaves, chunks, LINE_WORDS), specials=specials)
        items = [Contribution(leaf, index % partitions, chunk, line_value(lines[leaf, chunk]))
                 for leaf in range(leaves) for chunk in range(chunks)]
        pending[index] = [items[k] for k in rng.permutation(len(items))]
        order.append(index)
        opened += 1

    while opened < min(slots, count):
        open_next()
    sequence = []
    while pending:
        index = order[int(rng.integers(0, len(order)))]
        sequence.append(pending[index].pop())
        if not pending[index]:
            del pending[index]
            order.remove(index)
            # Partitions complete out of order; the next one opens once its slot's owner is done.
            while opened < count and first + opened - slots not in pending:
                open_next()
    return sequence


def by_partition(sequence):
    """``{partition: [contribution, ...]}`` in sequence order."""
    groups = {}
    for c in sequence:
        groups.setdefault(c.partition, []).append(c)
    return groups


def reshuffled(rng, sequence):
    """The same contributions, partition after partition, each partition's in a new random order."""
    groups = by_partition(sequence)
    return [groups[p][k] for p in sorted(groups) for k in rng.permutation(len(groups[p]))]


class StreamTB(ClockedTB):
    """Clock, reset, one source on ``i`` and one sink on ``o`` (dict items, by the block's layouts).

    ``idle`` inserts random gaps before 40 % of the transfers on ``i``; ``backpressure`` lowers
    ``o.ready`` on 40 % of the cycles.
    """

    def __init__(self, dut, *, idle=False, backpressure=False, salt=0):
        super().__init__(dut)
        self.component = component_from_env()
        self.source = StreamSource(dut, "i", self.clock, stream_layout(self.component, "i"),
                                   pause=random_pauses(knobs.rng(salt + 101), 0.4) if idle else never())
        self.sink = StreamSink(dut, "o", self.clock, stream_layout(self.component, "o"),
                               backpressure=random_pauses(knobs.rng(salt + 202), 0.4) if backpressure
                               else never())

    @property
    def drivers(self):
        return [self.source, self.sink]


class TB(ClockedTB):
    """The leaves of ``gcu_cluster`` (the GCU on the switch's last port), iterating an all-reduce.

    Subclasses place the leaves elsewhere (:meth:`leaf_count`, :meth:`placed`) and name the sums
    they expect (:meth:`reduce`).
    """

    def __init__(self, dut, *, gaps=True, slow=True, salt=0):
        super().__init__(dut)
        self.params = resolved_params_from_env()
        self.partitions, self.chunks, self.slots = (self.params[k] for k in ("partitions", "chunks", "slots"))
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

    def placed(self, leaf):
        """Leaf ``leaf``'s node id and its control unit's, on its switch."""
        return {"node": leaf, "dst": self.gcu}

    def reduce(self, gradients):
        """The sums every leaf must fetch, shape ``(partitions, chunks, 14)``."""
        return reduce_leaf_order(gradients)

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
            return self.reduce(gradients)
        self.state = list(delayed_update_step(gradients, *self.state, step=step, **HYPER))
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
            leaf.seen, leaf.sums, leaf.acks = 0, {}, []

    def counters(self, names=ZERO_COUNTERS):
        """The DUT's counters of ``names``."""
        return {name: int(getattr(self.dut, name).value) for name in names}
