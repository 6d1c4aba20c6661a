"""The reduction table of the global control unit: per-partition gradient sums, in a fixed order.

A leaf sends its gradient of one parameter partition as ``chunks`` lines of 14 binary32 words
(the 448-bit data line of a runtime data packet). A *contribution* is one such line:
``(leaf, partition, chunk, data)``. The table holds ``slots`` partitions in flight, partition
``p`` always in slot ``p mod slots``; when every leaf has sent every chunk of a partition, the
partition is reduced and leaves the table, and its slot is free again.

Order of operations (binary32, round to nearest even, NaN results replaced by the canonical
quiet NaN ``0x7FC00000``, as the ``rtl.fp`` adder returns them), per word of a chunk:

* **leaf order** (``mode="deterministic"``, the default)::

      s = g[0] + (-0.0)          # exact for every non-NaN g[0]: the adder's first pass
      s = s + g[1]
      ...
      s = s + g[leaves - 1]

  The result depends only on the contributions, never on the order in which they arrived.
* **arrival order** (``mode="arrival"``): the same chain, with the leaves of each chunk taken in
  the order their contributions were accepted.

Contributions that are not merged, each counted once, in this order of precedence:

* ``bad_leaf``: the leaf id is not below ``leaves``;
* ``bad_partition``: the partition id is not below ``partitions``;
* ``bad_chunk``: the chunk index is not below ``chunks``;
* ``conflicts``: the partition's slot holds another partition (a leaf ran more than ``slots``
  partitions ahead of the slowest one);
* ``duplicates``: this leaf already sent this chunk of this partition.

A contribution that arrives after its partition was reduced opens that partition again (it is
the first contribution of the next iteration's reduction). The table cannot tell a late duplicate
from it; the control units can, by the line's iteration tag, and drop it before the table
(:class:`golden.collective.control.IterationFilter`).

Reduced partitions leave in the order they completed (the order of their last contribution).

**Two levels** (:class:`TieredTable`, dissertation Section 7.3.2's sub-region switches): leaf
``i`` is leaf ``i mod region_leaves`` of region ``i // region_leaves``. Each region has a table of
its own leaves; its reduced lines (chunk order) are the contributions of leaf ``region`` to a
table of the regions. In deterministic mode the sum is therefore hierarchical
(:func:`reduce_hierarchical`): the regions' sums in region order, each the chain of its leaves in
leaf order, which is not the flat leaf-order chain (binary32 addition does not associate).
"""

from dataclasses import dataclass, field

import numpy as np

from ..optim._float32 import CANONICAL_NAN_BITS, canonical_nan

__all__ = ["LINE_WORDS", "NEG_ZERO_BITS", "CANONICAL_NAN_BITS", "MODES", "Contribution", "ReductionTable",
           "add_lines", "line_value", "reduce_leaf_order", "reduce_arrival_order", "reduce_hierarchical",
           "TieredTable"]

LINE_WORDS = 14
NEG_ZERO_BITS = 0x80000000
MODES = ("deterministic", "arrival")
COUNTERS = ("bad_leaf", "bad_partition", "bad_chunk", "conflicts", "duplicates")


def add_lines(a, b):
    """Word-wise binary32 ``a + b`` of two lines of raw bits (uint32 arrays), NaN made canonical."""
    with np.errstate(all="ignore"):
        total = np.asarray(a, np.uint32).view(np.float32) + np.asarray(b, np.uint32).view(np.float32)
    return np.asarray(canonical_nan(total), np.float32).view(np.uint32)


def _chain(lines):
    total = add_lines(lines[0], np.full(np.shape(lines[0]), NEG_ZERO_BITS, np.uint32))
    for line in lines[1:]:
        total = add_lines(total, line)
    return total


def reduce_leaf_order(lines):
    """The sum of ``lines[leaf]`` (raw bits, shape ``(leaves, ..., 14)``) in leaf-id order."""
    lines = np.asarray(lines, np.uint32)
    return _chain(list(lines))


def reduce_arrival_order(lines, order):
    """The sum of ``lines[leaf]`` taken in ``order`` (a permutation of the leaf ids)."""
    lines = np.asarray(lines, np.uint32)
    return _chain([lines[leaf] for leaf in order])


def reduce_hierarchical(lines, regions):
    """The two-level sum of ``lines[leaf]``: each of ``regions`` equal groups of consecutive leaves in
    leaf order, then the groups' sums in region order (both chains start with ``+ (-0.0)``)."""
    lines = np.asarray(lines, np.uint32)
    groups = np.split(lines, regions)
    return reduce_leaf_order([reduce_leaf_order(group) for group in groups])


@dataclass(frozen=True)
class Contribution:
    """One gradient line from a leaf: 14 binary32 words as raw bits in ``data`` (an int, word 0 lowest)."""

    leaf: int
    partition: int
    chunk: int
    data: int

    def words(self):
        return np.array([self.data >> (32 * word) & 0xFFFFFFFF for word in range(LINE_WORDS)], np.uint32)


def line_value(words):
    """The 448-bit integer of 14 words (word 0 in the low bits)."""
    return sum(int(word) << (32 * index) for index, word in enumerate(words))


@dataclass
class _Slot:
    partition: int
    lines: dict = field(default_factory=dict)  # (leaf, chunk) -> words
    arrivals: dict = field(default_factory=dict)  # chunk -> [leaf, ...] in acceptance order


class ReductionTable:
    """The reduction table (see the module docstring for the rules and the order of operations).

    Parameters
    ----------
    leaves, partitions, slots, chunks : int
        Leaves that contribute, partition ids, partitions in flight, lines per partition.
    mode : {"deterministic", "arrival"}

    Attributes
    ----------
    counters : dict
        ``bad_leaf``, ``bad_partition``, ``bad_chunk``, ``conflicts``, ``duplicates``.
    """

    def __init__(self, *, leaves, partitions, slots, chunks, mode="deterministic"):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.leaves, self.partitions, self.slots, self.chunks = leaves, partitions, slots, chunks
        self.mode = mode
        self.counters = dict.fromkeys(COUNTERS, 0)
        self._slots = [None] * slots

    def accept(self, contribution):
        """Take one contribution; returns ``(partition, lines)`` when it completes one, else None.

        ``lines`` is a list of ``chunks`` ints (448-bit reduced lines, chunk 0 first).
        """
        c = contribution
        if c.leaf >= self.leaves:
            return self._count("bad_leaf")
        if c.partition >= self.partitions:
            return self._count("bad_partition")
        if c.chunk >= self.chunks:
            return self._count("bad_chunk")
        index = c.partition % self.slots
        slot = self._slots[index]
        if slot is None:
            slot = self._slots[index] = _Slot(c.partition)
        elif slot.partition != c.partition:
            return self._count("conflicts")
        if (c.leaf, c.chunk) in slot.lines:
            return self._count("duplicates")
        slot.lines[c.leaf, c.chunk] = c.words()
        slot.arrivals.setdefault(c.chunk, []).append(c.leaf)
        if len(slot.lines) < self.leaves * self.chunks:
            return None
        self._slots[index] = None
        return slot.partition, [line_value(self._reduce(slot, chunk)) for chunk in range(self.chunks)]

    def run(self, contributions):
        """Every reduced partition of a sequence of contributions, in completion order."""
        return [done for done in map(self.accept, contributions) if done is not None]

    def _reduce(self, slot, chunk):
        order = range(self.leaves) if self.mode == "deterministic" else slot.arrivals[chunk]
        return _chain([slot.lines[leaf, chunk] for leaf in order])

    def _count(self, name):
        self.counters[name] += 1
        return None


class TieredTable:
    """Two levels of :class:`ReductionTable`: one per region, then one over the regions (module docstring).

    Parameters
    ----------
    regions, region_leaves : int
        Regions, and leaves in each (leaf ids ``0 .. regions * region_leaves - 1``).
    partitions, slots, chunks, mode
        As :class:`ReductionTable`, at both levels.

    Attributes
    ----------
    regions : list of ReductionTable
        The regions' tables (their counters count what each region drops).
    root : ReductionTable
        The table of the regions.
    """

    def __init__(self, *, regions, region_leaves, partitions, slots, chunks, mode="deterministic"):
        shape = dict(partitions=partitions, slots=slots, chunks=chunks, mode=mode)
        self.region_leaves = region_leaves
        self.regions = [ReductionTable(leaves=region_leaves, **shape) for _ in range(regions)]
        self.root = ReductionTable(leaves=regions, **shape)

    def accept(self, contribution):
        """Take one contribution of a global leaf id; returns what the root completes, as
        :meth:`ReductionTable.accept` does."""
        region, leaf = divmod(contribution.leaf, self.region_leaves)
        done = self.regions[region].accept(Contribution(leaf, contribution.partition, contribution.chunk,
                                                        contribution.data))
        if done is None:
            return None
        partition, lines = done
        results = [self.root.accept(Contribution(region, partition, chunk, line))
                   for chunk, line in enumerate(lines)]
        return results[-1]

    def run(self, contributions):
        """Every partition the root reduces, in completion order."""
        return [done for done in map(self.accept, contributions) if done is not None]
