"""The reduction table both orders of the reduction unit share: ids, slots, seen bits, drops, output."""

from amaranth.hdl import Array, Cat, Const, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory

from ..lib.counters import count_events, saturating_count
from ..lib.streams import Queue
from ..net.packet import LINE_BITS
from .reduction_engine import LINE_WORDS, ReductionEngine

__all__ = ["ReductionTable", "refused", "Contribution", "ReducedLine", "slot_signal",
           "LEAF_BITS", "PARTITION_BITS", "CHUNK_BITS", "COLLECTIVE_COUNTER_BITS", "GROUP", "COUNTERS"]

LEAF_BITS = 4
PARTITION_BITS = 10
CHUNK_BITS = 12
# The width of every collective block's event and drop counters (golden.collective.control.COUNTER_MAX).
COLLECTIVE_COUNTER_BITS = 16
# Output queue entries a reader may commit at once: the reduction unit's group of chunks (one pass
# over a group takes at least the engine's latency, so 16 keeps the engine busy every cycle).
GROUP = 16
COUNTERS = ("bad_leaf", "bad_partition", "bad_chunk", "conflicts", "duplicates", "nonfinite", "reduced")


class Contribution(data.Struct):
    """One gradient line from a leaf: chunk ``chunk`` of partition ``partition``, 14 binary32 words."""

    leaf: LEAF_BITS
    partition: PARTITION_BITS
    chunk: CHUNK_BITS
    data: LINE_BITS


class ReducedLine(data.Struct):
    """One line of a reduced partition; ``last`` marks its final chunk."""

    partition: PARTITION_BITS
    chunk: CHUNK_BITS
    last: 1
    data: LINE_BITS


def slot_signal(slots, name):
    return Signal(range(slots), name=name) if slots > 1 else Const(0, 1)


def refused(m, queue, name):
    """A sticky flag set by a write ``queue`` refuses (``w.valid`` while ``w.ready`` is low).

    For a queue whose writer does not wait for ``w.ready`` because credits or an invariant keep
    it from filling up: a broken invariant then loses a line, and this flag says so.
    """
    flag = Signal(name=f"{name}_refused")
    with m.If(queue.w.valid & ~queue.w.ready):
        m.d.sync += flag.eq(1)
    return flag


class ReductionTable:
    """What both orders share: id checks, slot state, seen bits, drop counters, engine, output queue.

    The back-end (one per order) drives ``hold`` (a contribution must wait), ``reserve`` (output
    queue entries it commits to this cycle) and the ``done`` queue's write side, and calls
    :meth:`clear`, :meth:`emit` and :meth:`free`.
    """

    def __init__(self, m, unit, tag_layout):
        self._m = m
        self._unit = unit
        leaves, chunks, slots = unit._leaves, unit._chunks, unit._slots
        self._chunks, self._slots = chunks, slots
        total = leaves * chunks
        self.c = c = unit.i.payload
        # One word per (slot, chunk), a bit per leaf: a leaf's first line, or a duplicate.
        m.submodules.seen = seen = Memory(shape=leaves, depth=slots * chunks, init=[])
        seen_read, seen_set = seen.read_port(domain="comb"), seen.write_port()
        self._seen_clear = seen.write_port()
        self.owner = Array(Signal(PARTITION_BITS, name=f"owner{s}") for s in range(slots))
        self._busy = Array(Signal(name=f"busy{s}") for s in range(slots))
        self._complete = Array(Signal(name=f"complete{s}") for s in range(slots))
        self._count = Array(Signal(range(total + 1), name=f"count{s}") for s in range(slots))
        # ``done`` holds at most one entry per slot (a complete slot takes nothing more until it is
        # read out). With several slots, one entry more than that: a SyncFIFOBuffered refuses a
        # write while its last entry moves to the output register, and two slots can complete on
        # consecutive cycles (seen at NEARTRAIN_VECTORS=18: the second slot's entry was lost and the
        # unit hung). One slot completes again only after it is read out, so its one entry (a
        # register, no added latency) is enough. So it never refuses a write; a refused one is flagged.
        self.done = Queue(m, "done", range(slots) if slots > 1 else 1, slots + 1 if slots > 1 else 1)
        self.overflows = [refused(m, self.done, "done")]
        self.hold = Signal()

        # After reset, clear every seen word before the first contribution is taken.
        self._clearing = clearing = Signal(init=1)
        sweep = Signal(range(slots * chunks))
        with m.If(clearing):
            m.d.comb += [self._seen_clear.addr.eq(sweep), self._seen_clear.en.eq(1)]
            m.d.sync += sweep.eq(sweep + 1)
            with m.If(sweep == slots * chunks - 1):
                m.d.sync += clearing.eq(0)

        self.slot = slot = slot_signal(slots, "slot")
        if slots > 1:
            m.d.comb += slot.eq(c.partition[:(slots - 1).bit_length()])
        m.d.comb += [seen_read.addr.eq(slot * chunks + c.chunk),
                     unit.i.ready.eq(~clearing & ~self._complete[slot] & ~self.hold)]
        accepted = unit.i.valid & unit.i.ready
        bad_leaf = accepted & (c.leaf >= leaves)
        bad_partition = accepted & ~bad_leaf & (c.partition >= unit._partitions)
        bad_chunk = accepted & ~bad_leaf & ~bad_partition & (c.chunk >= chunks)
        valid_ids = accepted & ~bad_leaf & ~bad_partition & ~bad_chunk
        conflict = valid_ids & self._busy[slot] & (self.owner[slot] != c.partition)
        repeated = seen_read.data.bit_select(c.leaf, 1)
        duplicate = valid_ids & ~conflict & repeated
        self.merged = merged = valid_ids & ~conflict & ~repeated
        self.first = seen_read.data == 0
        drops = {"bad_leaf": bad_leaf, "bad_partition": bad_partition, "bad_chunk": bad_chunk,
                 "conflicts": conflict, "duplicates": duplicate}
        count_events(m, unit, drops)
        m.d.comb += [seen_set.addr.eq(seen_read.addr), seen_set.en.eq(merged),
                     seen_set.data.eq(seen_read.data | (Const(1, leaves) << c.leaf))]
        self.finished = merged & (self._count[slot] == total - 1)
        m.d.comb += [unit.closed.eq(self.finished), unit.closed_partition.eq(c.partition)]
        # Writes go slot by slot: a variable-index write leaves incomplete case statements in Verilog.
        for index in range(slots):
            with m.If(merged & (slot == index)):
                m.d.sync += [self._busy[index].eq(1), self.owner[index].eq(c.partition),
                             self._count[index].eq(self._count[index] + 1)]
                with m.If(self.finished):
                    m.d.sync += self._complete[index].eq(1)

        m.submodules.engine = self.engine = ReductionEngine(tag_width=data.Layout.cast(tag_layout).size)
        m.d.comb += self.engine.o.ready.eq(1)
        self._out = Queue(m, "out", ReducedLine, 2 * GROUP, credited=True)
        self.credits = Signal(range(2 * GROUP + 1), init=2 * GROUP)
        self.reserve = Signal(range(GROUP + 1))
        returned = self._out.r.valid & self._out.r.ready
        m.d.sync += self.credits.eq(self.credits + returned - self.reserve)
        wiring.connect(m, self._out.r, wiring.flipped(unit.o))
        self.overflows.append(self._out.overflow)

    def clear(self, slot, chunk, enable):
        """Clear the seen word of ``(slot, chunk)`` when ``enable`` (the slot is being read out)."""
        with self._m.If(~self._clearing):
            self._m.d.comb += [self._seen_clear.addr.eq(slot * self._chunks + chunk),
                               self._seen_clear.en.eq(enable)]

    def emit(self, valid, tag, line):
        """Write one reduced line (``tag``: partition, chunk, last) into the output queue."""
        m, unit, out = self._m, self._unit, self._out
        m.d.comb += [out.w.valid.eq(valid), out.w.payload.partition.eq(tag.partition),
                     out.w.payload.chunk.eq(tag.chunk), out.w.payload.last.eq(tag.last),
                     out.w.payload.data.eq(line)]
        special = Cat(*[line[32 * w + 23:32 * w + 31].all() for w in range(LINE_WORDS)]).any()
        saturating_count(m, unit.nonfinite, valid & special)
        with m.If(valid & tag.last):
            m.d.sync += unit.reduced.eq(unit.reduced + 1)

    def free(self, slot):
        """Free ``slot`` (in the caller's condition): its partition has been read out."""
        for index in range(self._slots):
            with self._m.If(slot == index):
                self._m.d.sync += [self._busy[index].eq(0), self._complete[index].eq(0),
                                   self._count[index].eq(0)]


