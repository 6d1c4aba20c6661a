"""Pieces the collective testbenches share: gradient lines with special values, leaf traffic, and the
all-reduce testbench around the leaves (their SmartNICs on the cluster's switch ports). The
testbench (``AllReduceTB``), its driver :class:`Leaf` and :func:`random_words` are the host device's
(:mod:`scripts.sim.devices.collective`), which the benches drive too; :class:`TB` is that testbench
with the checks the tests share (:class:`AllReduceChecks`)."""


import numpy as np
import pytest
import softfloatpy as sf
from cocotb.triggers import ClockCycles

from golden.collective import (
    CANONICAL_NAN_BITS,
    LINE_WORDS,
    Contribution,
    line_value,
)
from golden.collective.control import TAG_SHIFT
from scripts.sim import knobs
from scripts.sim.devices.collective import (
    HYPER,
    VC,
    ZERO_COUNTERS,
    AllReduceTB,
    Leaf,
    gradient_line,
    random_words,
)
from scripts.sim.runner import component_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB

# The ring_cluster build that bench_ring measures on and test_ring also runs (up to 64 lines per
# segment at 16 nodes).
RING_BENCH_PARAMS = {"ports": 16, "nodes": 16, "depth": 1024}


__all__ = ["StreamTB", "Leaf", "TB", "VC", "HYPER", "ZERO_COUNTERS", "TAG_SHIFT", "gradient_line",
           "random_words", "leaf_traffic", "by_partition", "reshuffled", "nonfinite", "softfloat_add",
           "check_recursive_sum_bound", "AllReduceChecks", "parametrize_shapes", "rejects_at_elaboration",
           "RING_BENCH_PARAMS"]

def parametrize_shapes(shapes, slow):
    """A runner's ``shape`` parametrization: the names of ``shapes``, those in ``slow`` marked slow
    (``make test-full`` only)."""
    return pytest.mark.parametrize(
        "shape", [pytest.param(name, marks=pytest.mark.slow) if name in slow else name for name in shapes])


def rejects_at_elaboration(block, params, message):
    """Building the registered block ``block`` with ``params`` raises a ValueError matching ``message``."""
    from rtl.registry import get_block  # when called: a simulation importing this module elaborates nothing

    with pytest.raises(ValueError, match=message):
        get_block(block).build(params)


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


def check_recursive_sum_bound(ours, terms):
    """|fp32 chain - exact| <= (n-1) u sum|g| / (1 - (n-1) u) (Higham, recursive summation), for
    ``ours`` (binary32 bits) the sum over axis 0 of the ``n`` float32 ``terms``."""
    n = terms.shape[0]
    exact = terms.astype(np.float64).sum(axis=0)
    u = 2.0 ** -24
    gamma = (n - 1) * u / (1 - (n - 1) * u)
    bound = gamma * np.abs(terms.astype(np.float64)).sum(axis=0)
    assert np.all(np.abs(ours.view(np.float32).astype(np.float64) - exact) <= bound), knobs.describe()


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


class AllReduceChecks:
    """The checks the GCU and tiered tests share, on an all-reduce testbench
    (:class:`~scripts.sim.devices.collective.AllReduceTB` or a subclass) that this mixes into."""

    def all_counters(self):
        """Every counter that a clean all-reduce leaves at zero."""
        return self.counters()

    async def late_duplicate(self, rng, leaf, packet, counter):
        """Iteration 0; ``leaf`` sends ``packet`` (a gradient line of iteration 0 again, after its
        partition was reduced); iteration 1. Every sum must be exact and, of :meth:`all_counters`,
        only ``counter`` may count, once: the late line must not open its partition again."""
        await self.run(rng, 1)
        leaf.send(packet)
        await ClockCycles(self.clock, 100)
        await self.run(rng, 1, first=1)
        expected = dict.fromkeys(self.all_counters(), 0)
        expected[counter] = 1
        assert self.all_counters() == expected, knobs.describe()

    async def clean_after_reset(self, rng, cycles):
        """:meth:`reset_mid_iteration`, then two iterations: exact, with every counter of
        :meth:`all_counters` at zero."""
        await self.reset_mid_iteration(rng, cycles)
        await self.run(rng, 2)
        counters = self.all_counters()
        assert counters == dict.fromkeys(counters, 0), knobs.describe()


class TB(AllReduceChecks, AllReduceTB):
    """The device's all-reduce testbench with the shared checks."""


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
