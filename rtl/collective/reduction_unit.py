"""The reduction unit of the global control unit: leaves' gradient lines in, reduced partitions out."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..lib.streams import Queue
from ..net.packet import LINE_BITS
from ..registration import Param, Parameterized, register_block
from .reduction_engine import LINE_WORDS, ReductionEngine
from .reduction_table import (
    CHUNK_BITS,
    COLLECTIVE_COUNTER_BITS,
    COUNTERS,
    GROUP,
    PARTITION_BITS,
    Contribution,
    ReducedLine,
    ReductionTable,
    refused,
    slot_signal,
)

__all__ = ["ReductionUnit", "MODES", "SLOT_CHOICES"]

SLOT_CHOICES = (1, 2, 4, 8, 16)
MODES = ("deterministic", "arrival")


class _Tag(data.Struct):
    final: 1
    partition: PARTITION_BITS
    chunk: CHUNK_BITS
    last: 1


class _ArrivalTag(data.Struct):
    address: 16
    finishing: 1
    slot: 4


_NEGATIVE_ZEROS = Cat(*[Const(0x80000000, 32)] * LINE_WORDS)
# A line's sum is written back 1 + 6 cycles after its acceptance (the read, then the engine), and a
# read in the write-back cycle still sees the old line: so much later may the next line of its
# accumulator be taken.
_HAZARD = 1 + ReductionEngine.LATENCY


class _Phase(enum.Enum, shape=1):
    IDLE = 0
    BUSY = 1


class ReductionUnit(Parameterized, wiring.Component):
    """Reduction table of the global control unit: gradient lines of leaves in, reduced partitions out.

    Partition ``p`` lives in slot ``p mod slots``; a slot frees once its partition is reduced.
    A word of seen bits per ``(slot, chunk)`` (one bit per leaf) tells a leaf's first line
    from a duplicate. Two orders of summation (:mod:`golden.collective.reduction` states both):

    * ``mode="deterministic"``: each accepted line is stored in its ``(slot, leaf, chunk)`` line of
      a simple dual-port memory. When a slot holds ``leaves * chunks`` lines, it is queued; the
      reducer makes ``leaves`` passes per group of up to 16 chunks through one
      :class:`ReductionEngine`: pass 0 adds ``-0.0`` to leaf 0's line, pass ``l`` adds leaf
      ``l``'s line to the partial sum of pass ``l - 1`` (kept in a feedback queue). The sums are
      in leaf-id order whatever the arrival order: bit-identical across arrival orders.
    * ``mode="arrival"``: each accepted line is added at once into its ``(slot, chunk)``
      accumulator (the first with ``-0.0``); a line for an accumulator whose previous addition
      is still in the engine waits (``i.ready`` low) until it is written back. A complete slot's
      accumulators are read out in chunk order. ``leaves`` times less storage, and the sums
      follow the arrival order.

    Contributions that are not merged are dropped and counted: a leaf id not below ``leaves``
    (``bad_leaf``), a partition id not below ``partitions`` (``bad_partition``), a chunk index not
    below ``chunks`` (``bad_chunk``), a partition whose slot holds another partition
    (``conflicts``), and a line this leaf already sent (``duplicates``). A contribution for a slot
    that is complete and not yet read out waits until the slot is free.

    Parameters
    ----------
    leaves : int
        Contributing leaves, 2 to 16.
    partitions : int
        Partition ids, 1 to 1024.
    slots : int
        Partitions in flight: 1, 2, 4, 8 or 16.
    chunks : int
        Lines per partition (14 binary32 words each), 1 to 4096.
    mode : {"deterministic", "arrival"}
        Summation order.

    Attributes
    ----------
    i : In(stream.Signature(Contribution))
        Contributions. ``ready`` is low for ``slots * chunks`` cycles after reset (the seen bits
        are cleared), while the contribution's slot waits to be read out, and in arrival mode
        while its accumulator is in the engine.
    o : Out(stream.Signature(ReducedLine))
        Reduced partitions, in completion order, chunks in order.
    bad_leaf, bad_partition, bad_chunk, conflicts, duplicates : Out(16)
        Dropped contributions (saturating counts).
    nonfinite : Out(16)
        Reduced lines holding a NaN or an infinity (saturating).
    reduced : Out(16)
        Partitions reduced (wraps: it numbers partitions rather than counting errors).
    closed : Out(1)
        Pulses when a partition's last contribution is merged (its reduction is then certain);
        ``closed_partition`` names it. A control unit counts its reductions per partition by it.
    overflow : Out(1)
        Sticky: a write that the output queue, the ``done`` queue or the feedback queue refused.
        Credits (output) and invariants (``done``: one entry per slot; feedback: one group) keep
        them from filling, so a raised flag means a lost line and a broken invariant.

    Notes
    -----
    Storage (448-bit lines): :attr:`lines`, i.e. ``slots * leaves * chunks`` (deterministic) or
    ``slots * chunks`` (arrival), plus a 32-line output queue (and a 32-line feedback queue,
    deterministic). Throughput: one contribution per cycle. Deterministic: the reducer adds one
    line per cycle, ``leaves * chunks`` additions per partition, so it keeps pace with
    contributions arriving at one per cycle when ``chunks >= 16``; a partition of fewer chunks
    costs about ``leaves * 9`` cycles. Arrival: one line per cycle while consecutive lines go to
    different accumulators; lines for the same ``(partition, chunk)`` less than 8 cycles apart
    wait for each other.
    """

    PARAMS = (
        Param("leaves", int, 4, "contributing leaves", minimum=2, maximum=16),
        Param("partitions", int, 64, "partition ids", minimum=1, maximum=1024),
        Param("slots", int, 2, "partitions in flight", choices=SLOT_CHOICES),
        Param("chunks", int, 16, "448-bit lines per partition", minimum=1, maximum=4096),
        Param("mode", str, "deterministic", "summation order", choices=MODES),
    )

    def __init__(self, *, leaves=4, partitions=64, slots=2, chunks=16, mode="deterministic"):
        members = {"i": In(stream.Signature(Contribution)), "o": Out(stream.Signature(ReducedLine))}
        members.update({name: Out(COLLECTIVE_COUNTER_BITS) for name in COUNTERS})
        members.update({"closed": Out(1), "closed_partition": Out(PARTITION_BITS), "overflow": Out(1)})
        super().__init__(members)

    @staticmethod
    def counter_names():
        """The counter ports' names."""
        return COUNTERS

    @property
    def lines(self):
        """448-bit lines of gradient storage (see Notes)."""
        per_slot = self._chunks * (self._leaves if self._mode == "deterministic" else 1)
        return self._slots * per_slot

    def elaborate(self, platform):
        m = Module()
        t = ReductionTable(m, self, _Tag if self._mode == "deterministic" else _ArrivalTag)
        if self._mode == "deterministic":
            self._leaf_order(m, t)
        else:
            self._arrival_order(m, t)
        m.d.comb += self.overflow.eq(Cat(*t.overflows).any())
        return m

    def _leaf_order(self, m, t):
        """Store every line; reduce a complete slot in leaf-id order, pass by pass."""
        leaves, chunks, slots = self._leaves, self._chunks, self._slots
        m.submodules.lines = lines = Memory(shape=LINE_BITS, depth=self.lines, init=[])
        store, load = lines.write_port(), lines.read_port()

        def address(slot, leaf, chunk):
            return (slot * leaves + leaf) * chunks + chunk

        # The store is registered (and the slot's completion with it, so a slot is read only after
        # its last line is in): the table's decision then ends at a register instead of fanning
        # out to every cell of the line memory's write port (ECP5: the GCU's 59 MHz path).
        finished, finished_slot = Signal(), slot_signal(slots, "finished_slot")
        m.d.sync += [store.addr.eq(address(t.slot, t.c.leaf, t.c.chunk)), store.data.eq(t.c.data),
                     store.en.eq(t.merged), finished.eq(t.finished)]
        if slots > 1:
            m.d.sync += finished_slot.eq(t.slot)
        m.d.comb += [t.done.w.valid.eq(finished), t.done.w.payload.eq(finished_slot)]
        feedback = Queue(m, "feedback", LINE_BITS, 2 * GROUP)
        # A group opens only with room for its sums, so at most a group's partial sums wait here.
        t.overflows.append(refused(m, feedback, "feedback"))
        phase = Signal(_Phase)
        current = slot_signal(slots, "current")
        base = Signal(range(chunks + GROUP))
        leaf = Signal(range(leaves))
        step = Signal(range(GROUP))
        group = Signal(range(GROUP + 1))
        m.d.comb += group.eq(GROUP)
        with m.If(chunks - base < GROUP):
            m.d.comb += group.eq(chunks - base)
        chunk = Signal(CHUNK_BITS)
        m.d.comb += chunk.eq(base + step)

        with m.If((phase == _Phase.IDLE) & t.done.r.valid):
            m.d.comb += t.done.r.ready.eq(1)
            m.d.sync += [phase.eq(_Phase.BUSY), base.eq(0), leaf.eq(0), step.eq(0)]
            if slots > 1:
                m.d.sync += current.eq(t.done.r.payload)
        opening = (leaf == 0) & (step == 0)
        issue = Signal()
        # A group opens only with room for its sums in the output queue, so the engine never waits.
        m.d.comb += issue.eq((phase == _Phase.BUSY) & ((leaf == 0) | feedback.r.valid)
                             & (~opening | (t.credits >= group)))
        m.d.comb += [load.addr.eq(address(current, leaf, chunk)), load.en.eq(1),
                     feedback.r.ready.eq(issue & (leaf != 0))]
        t.clear(current, chunk, issue & (leaf == 0))
        with m.If(issue & opening):
            m.d.comb += t.reserve.eq(group)

        # The engine's operands: the line read this cycle, and -0.0 or the partial sum.
        a_valid = Signal()
        b = Signal(LINE_BITS)
        tag = Signal(_Tag)
        m.d.sync += [a_valid.eq(issue), b.eq(feedback.r.payload), tag.final.eq(leaf == leaves - 1),
                     tag.partition.eq(t.owner[current]), tag.chunk.eq(chunk),
                     tag.last.eq(chunk == chunks - 1)]
        with m.If(leaf == 0):
            m.d.sync += b.eq(_NEGATIVE_ZEROS)
        engine = t.engine
        m.d.comb += [engine.i.valid.eq(a_valid), engine.i.payload.a.eq(load.data), engine.i.payload.b.eq(b),
                     engine.i.payload.tag.eq(tag)]
        result_tag = _Tag(engine.o.payload.tag)
        m.d.comb += [feedback.w.valid.eq(engine.o.valid & ~result_tag.final),
                     feedback.w.payload.eq(engine.o.payload.sum)]
        t.emit(engine.o.valid & result_tag.final, result_tag, engine.o.payload.sum)

        # Through the chunks of a group, then the leaves, then the groups.
        with m.If(issue):
            m.d.sync += step.eq(step + 1)
            with m.If(step == group - 1):
                m.d.sync += [step.eq(0), leaf.eq(leaf + 1)]
                with m.If(leaf == leaves - 1):
                    m.d.sync += [leaf.eq(0), base.eq(base + GROUP)]
                    with m.If(base + group == chunks):
                        m.d.sync += phase.eq(_Phase.IDLE)
                        t.free(current)

    def _arrival_order(self, m, t):
        """Add every line into its accumulator as it arrives; read a complete slot out."""
        chunks, slots = self._chunks, self._slots
        m.submodules.sums = sums = Memory(shape=LINE_BITS, depth=self.lines, init=[])
        fetch, write_back, read_out = sums.read_port(), sums.write_port(), sums.read_port()
        here = t.slot * chunks + t.c.chunk

        # Lines for an accumulator still in the engine wait: the read would miss the pending sum.
        in_flight = [Signal(range(self.lines), name=f"pending{k}") for k in range(_HAZARD)]
        busy = [Signal(name=f"pending{k}_valid") for k in range(_HAZARD)]
        m.d.sync += [in_flight[0].eq(here), busy[0].eq(t.merged)]
        for k in range(1, _HAZARD):
            m.d.sync += [in_flight[k].eq(in_flight[k - 1]), busy[k].eq(busy[k - 1])]
        hazard = Const(0, 1)
        for k in range(_HAZARD):
            hazard = hazard | (busy[k] & (in_flight[k] == here))
        m.d.comb += t.hold.eq(hazard)

        first = Signal()
        g = Signal(LINE_BITS)
        tag = Signal(_ArrivalTag)
        m.d.comb += [fetch.addr.eq(here), fetch.en.eq(1)]
        m.d.sync += [first.eq(t.first), g.eq(t.c.data), tag.address.eq(here), tag.finishing.eq(t.finished),
                     tag.slot.eq(t.slot)]
        engine = t.engine
        m.d.sync += engine.i.valid.eq(t.merged)
        m.d.comb += [engine.i.payload.a.eq(Mux(first, _NEGATIVE_ZEROS, fetch.data)), engine.i.payload.b.eq(g),
                     engine.i.payload.tag.eq(tag)]
        done_tag = _ArrivalTag(engine.o.payload.tag)
        m.d.comb += [write_back.addr.eq(done_tag.address), write_back.data.eq(engine.o.payload.sum),
                     write_back.en.eq(engine.o.valid),
                     t.done.w.valid.eq(engine.o.valid & done_tag.finishing),
                     t.done.w.payload.eq(done_tag.slot)]

        phase = Signal(_Phase)
        current = slot_signal(slots, "current")
        chunk = Signal(range(chunks))
        with m.If((phase == _Phase.IDLE) & t.done.r.valid):
            m.d.comb += t.done.r.ready.eq(1)
            m.d.sync += [phase.eq(_Phase.BUSY), chunk.eq(0)]
            if slots > 1:
                m.d.sync += current.eq(t.done.r.payload)
        issue = (phase == _Phase.BUSY) & (t.credits != 0)
        m.d.comb += [read_out.addr.eq(current * chunks + chunk), read_out.en.eq(1)]
        t.clear(current, chunk, issue)
        with m.If(issue):
            m.d.comb += t.reserve.eq(1)
            m.d.sync += chunk.eq(chunk + 1)
            with m.If(chunk == chunks - 1):
                m.d.sync += phase.eq(_Phase.IDLE)
                t.free(current)
        reading = Signal()
        out_tag = Signal(_Tag)
        m.d.sync += [reading.eq(issue), out_tag.partition.eq(t.owner[current]), out_tag.chunk.eq(chunk),
                     out_tag.last.eq(chunk == chunks - 1)]
        t.emit(reading, out_tag, read_out.data)


register_block(
    "reduction_unit", ReductionUnit, family="collective",
    drops={"bad_leaf": "contributions from a leaf id out of range",
           "bad_partition": "contributions of a partition id out of range",
           "bad_chunk": "contributions of a chunk out of range",
           "conflicts": "contributions of a partition whose slot holds another",
           "duplicates": "contributions a leaf already sent for the open reduction",
           "overflow": "a write refused by the output, done or feedback queue (sticky)"},
    summary="Global control unit: reduction table holding leaves' gradient partitions, reduced in leaf-id "
            "order through the 14-lane binary32 engine.",
    golden="golden.collective.reduction:ReductionTable",
)
