"""The reduction table of the global control unit: gradient partitions in, reduced partitions out."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..registration import Param, check_choice, check_int, register_block
from ..runtime.common import Queue
from .reduction_engine import LINE_BITS, LINE_WORDS, ReductionEngine

__all__ = ["ReductionUnit", "Contribution", "ReducedLine", "MODES", "SLOT_CHOICES", "GROUP", "COUNTERS"]

LEAF_BITS = 4
PARTITION_BITS = 10
CHUNK_BITS = 12
COUNTER_BITS = 16
# Chunks reduced together: one pass over a group takes at least the adder's latency, so a group
# of 16 chunks keeps the engine busy every cycle and shorter partitions pay a few bubbles.
GROUP = 16
SLOT_CHOICES = (1, 2, 4, 8, 16)
MODES = ("deterministic",)
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


class _Tag(data.Struct):
    final: 1
    partition: PARTITION_BITS
    chunk: CHUNK_BITS
    last: 1


class _Phase(enum.Enum, shape=1):
    IDLE = 0
    REDUCE = 1


class ReductionUnit(wiring.Component):
    """Holds the leaves' gradient lines per partition and reduces each complete partition in leaf order.

    Partition ``p`` lives in slot ``p mod slots``. Each accepted contribution is written to its
    ``(slot, leaf, chunk)`` line of a simple dual-port memory and marked seen; when a slot holds
    ``leaves * chunks`` lines, its index enters a queue of complete slots. The reducer takes the
    complete slots in that order and, for each group of up to 16 chunks, makes ``leaves`` passes
    through one :class:`ReductionEngine`: pass 0 adds ``-0.0`` to leaf 0's lines, pass ``l`` adds
    leaf ``l``'s lines to the partial sums of pass ``l - 1``, which wait in a feedback queue.
    The sums are therefore in leaf-id order whatever the order of arrival
    (:mod:`golden.collective.reduction` states the order and the rules).

    Contributions that are not merged are dropped and counted: a leaf id not below ``leaves``
    (``bad_leaf``), a partition id not below ``partitions`` (``bad_partition``), a chunk index not
    below ``chunks`` (``bad_chunk``), a partition whose slot holds another partition
    (``conflicts``), and a line this leaf already sent (``duplicates``). A contribution for a slot
    that is complete and not yet reduced waits (``i.ready`` low) until the reducer frees it.

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
    mode : str
        ``"deterministic"`` (leaf-id order).

    Attributes
    ----------
    i : In(stream.Signature(Contribution))
        Contributions. ``ready`` is low only for ``slots * leaves * chunks`` cycles after reset
        (the seen bits are cleared) and while the contribution's slot waits for the reducer.
    o : Out(stream.Signature(ReducedLine))
        Reduced partitions, in completion order, chunks in order.
    bad_leaf, bad_partition, bad_chunk, conflicts, duplicates : Out(16)
        Dropped contributions (saturating counts).
    nonfinite : Out(16)
        Reduced lines holding a NaN or an infinity (saturating).
    reduced : Out(16)
        Partitions reduced (wraps).

    Notes
    -----
    Buffering: ``slots * leaves * chunks`` lines of 448 bits, plus 32 lines of feedback and 32
    of output queue. Throughput: one contribution accepted per cycle; the reducer adds one line
    per cycle, ``leaves * chunks`` additions per partition, so it keeps up with contributions
    arriving at one per cycle when ``chunks >= 16``; a partition of fewer chunks costs
    ``leaves * (latency + 3)`` cycles. Latency from the last contribution of a partition to its
    first reduced line: ``leaves * max(group, ~9) + 9`` cycles.
    """

    def __init__(self, *, leaves=4, partitions=64, slots=2, chunks=16, mode="deterministic"):
        self._leaves = check_int("leaves", leaves, 2, 1 << LEAF_BITS)
        self._partitions = check_int("partitions", partitions, 1, 1 << PARTITION_BITS)
        self._slots = check_choice("slots", slots, SLOT_CHOICES)
        self._chunks = check_int("chunks", chunks, 1, 1 << CHUNK_BITS)
        self._mode = check_choice("mode", mode, MODES)
        members = {"i": In(stream.Signature(Contribution)), "o": Out(stream.Signature(ReducedLine))}
        members.update({name: Out(COUNTER_BITS) for name in COUNTERS})
        super().__init__(members)

    @property
    def lines(self):
        """Lines of gradient storage: ``slots * leaves * chunks``."""
        return self._slots * self._leaves * self._chunks

    def _address(self, slot, leaf, chunk):
        return (slot * self._leaves + leaf) * self._chunks + chunk

    def elaborate(self, platform):
        m = Module()
        leaves, chunks, slots = self._leaves, self._chunks, self._slots
        total = leaves * chunks
        m.submodules.lines = lines = Memory(shape=LINE_BITS, depth=self.lines, init=[])
        m.submodules.seen = seen = Memory(shape=1, depth=self.lines, init=[])
        store, load = lines.write_port(), lines.read_port()
        seen_read, seen_set, seen_clear = seen.read_port(domain="comb"), seen.write_port(), seen.write_port()

        busy = Array(Signal(name=f"busy{s}") for s in range(slots))
        complete = Array(Signal(name=f"complete{s}") for s in range(slots))
        owner = Array(Signal(PARTITION_BITS, name=f"owner{s}") for s in range(slots))
        count = Array(Signal(range(total + 1), name=f"count{s}") for s in range(slots))
        done = Queue(m, "done", range(slots) if slots > 1 else 1, slots)

        def bump(counter, event):
            with m.If(event & (counter != (1 << COUNTER_BITS) - 1)):
                m.d.sync += counter.eq(counter + 1)

        # After reset, clear every seen bit before the first contribution is taken.
        clearing = Signal(init=1)
        sweep = Signal(range(self.lines))
        with m.If(clearing):
            m.d.comb += [seen_clear.addr.eq(sweep), seen_clear.en.eq(1), seen_clear.data.eq(0)]
            m.d.sync += sweep.eq(sweep + 1)
            with m.If(sweep == self.lines - 1):
                m.d.sync += clearing.eq(0)

        # Arrivals.
        c = self.i.payload
        slot = Signal(range(slots)) if slots > 1 else Const(0, 1)
        if slots > 1:
            m.d.comb += slot.eq(c.partition[:(slots - 1).bit_length()])
        address = Signal(range(self.lines))
        m.d.comb += [address.eq(self._address(slot, c.leaf, c.chunk)), seen_read.addr.eq(address)]
        m.d.comb += self.i.ready.eq(~clearing & ~complete[slot])
        accepted = self.i.valid & self.i.ready
        bad_leaf = accepted & (c.leaf >= leaves)
        bad_partition = accepted & ~bad_leaf & (c.partition >= self._partitions)
        bad_chunk = accepted & ~bad_leaf & ~bad_partition & (c.chunk >= chunks)
        valid_ids = accepted & ~bad_leaf & ~bad_partition & ~bad_chunk
        conflict = valid_ids & busy[slot] & (owner[slot] != c.partition)
        duplicate = valid_ids & ~conflict & seen_read.data
        merged = valid_ids & ~conflict & ~seen_read.data
        drops = {"bad_leaf": bad_leaf, "bad_partition": bad_partition, "bad_chunk": bad_chunk,
                 "conflicts": conflict, "duplicates": duplicate}
        for name, event in drops.items():
            bump(getattr(self, name), event)
        m.d.comb += [store.addr.eq(address), store.data.eq(c.data), store.en.eq(merged),
                     seen_set.addr.eq(address), seen_set.data.eq(1), seen_set.en.eq(merged)]
        finished = merged & (count[slot] == total - 1)
        # Writes go slot by slot: a variable-index write leaves incomplete case statements in Verilog.
        for index in range(slots):
            with m.If(merged & (slot == index)):
                m.d.sync += [busy[index].eq(1), owner[index].eq(c.partition),
                             count[index].eq(count[index] + 1)]
                with m.If(finished):
                    m.d.sync += complete[index].eq(1)
        m.d.comb += [done.w.valid.eq(finished), done.w.payload.eq(slot)]

        # The reducer: passes over groups of chunks of the oldest complete slot.
        m.submodules.engine = engine = ReductionEngine(tag_width=_Tag.as_shape().size)
        feedback = Queue(m, "feedback", LINE_BITS, 2 * GROUP)
        out = Queue(m, "out", ReducedLine, 2 * GROUP, credited=True)
        phase = Signal(_Phase)
        current = Signal(range(slots)) if slots > 1 else Const(0, 1)
        base = Signal(range(chunks + GROUP))
        leaf = Signal(range(leaves))
        step = Signal(range(GROUP))
        credits = Signal(range(2 * GROUP + 1), init=2 * GROUP)
        group = Signal(range(GROUP + 1))
        m.d.comb += group.eq(GROUP)
        with m.If(chunks - base < GROUP):
            m.d.comb += group.eq(chunks - base)
        chunk = Signal(CHUNK_BITS)
        m.d.comb += chunk.eq(base + step)

        with m.If((phase == _Phase.IDLE) & done.r.valid):
            m.d.comb += done.r.ready.eq(1)
            m.d.sync += [phase.eq(_Phase.REDUCE), base.eq(0), leaf.eq(0), step.eq(0)]
            if slots > 1:
                m.d.sync += current.eq(done.r.payload)
        opening = (leaf == 0) & (step == 0)
        has_operand = (leaf == 0) | feedback.r.valid
        has_room = ~opening | (credits >= group)
        issue = Signal()
        m.d.comb += issue.eq((phase == _Phase.REDUCE) & has_operand & has_room)
        line = self._address(current, leaf, chunk)
        m.d.comb += [load.addr.eq(line), load.en.eq(1),
                     feedback.r.ready.eq(issue & (leaf != 0))]
        with m.If(~clearing):
            m.d.comb += [seen_clear.addr.eq(line), seen_clear.en.eq(issue), seen_clear.data.eq(0)]
        returned = out.r.valid & out.r.ready
        m.d.sync += credits.eq(credits + returned - Mux(issue & opening, group, 0))

        # The engine's operands: the line read this cycle, and -0.0 or the partial sum.
        a_valid = Signal()
        b = Signal(LINE_BITS)
        tag = Signal(_Tag)
        m.d.sync += [a_valid.eq(issue), b.eq(feedback.r.payload), tag.final.eq(leaf == leaves - 1),
                     tag.partition.eq(owner[current]), tag.chunk.eq(chunk), tag.last.eq(chunk == chunks - 1)]
        with m.If(leaf == 0):
            m.d.sync += b.eq(Cat(*[Const(0x80000000, 32)] * LINE_WORDS))
        m.d.comb += [engine.i.valid.eq(a_valid), engine.i.payload.a.eq(load.data), engine.i.payload.b.eq(b),
                     engine.i.payload.tag.eq(tag), engine.o.ready.eq(1)]
        result = engine.o.payload
        result_tag = _Tag(result.tag)
        final = engine.o.valid & result_tag.final
        m.d.comb += [
            feedback.w.valid.eq(engine.o.valid & ~result_tag.final), feedback.w.payload.eq(result.sum),
            out.w.valid.eq(final), out.w.payload.partition.eq(result_tag.partition),
            out.w.payload.chunk.eq(result_tag.chunk), out.w.payload.last.eq(result_tag.last),
            out.w.payload.data.eq(result.sum),
        ]
        special = Cat(*[result.sum[32 * w + 23:32 * w + 31].all() for w in range(LINE_WORDS)]).any()
        bump(self.nonfinite, final & special)
        with m.If(final & result_tag.last):
            m.d.sync += self.reduced.eq(self.reduced + 1)
        wiring.connect(m, out.r, wiring.flipped(self.o))

        # Advance through the chunks of a group, then the leaves, then the groups.
        with m.If(issue):
            m.d.sync += step.eq(step + 1)
            with m.If(step == group - 1):
                m.d.sync += step.eq(0)
                m.d.sync += leaf.eq(leaf + 1)
                with m.If(leaf == leaves - 1):
                    m.d.sync += [leaf.eq(0), base.eq(base + GROUP)]
                    with m.If(base + group == chunks):
                        m.d.sync += phase.eq(_Phase.IDLE)
                        for index in range(slots):
                            with m.If(current == index):
                                m.d.sync += [busy[index].eq(0), complete[index].eq(0), count[index].eq(0)]
        return m


register_block(
    "reduction_unit", ReductionUnit, family="collective",
    summary="Global control unit: reduction table holding leaves' gradient partitions, reduced in leaf-id "
            "order through the 14-lane binary32 engine.",
    params=[
        Param("leaves", int, 4, "contributing leaves", minimum=2, maximum=16),
        Param("partitions", int, 64, "partition ids", minimum=1, maximum=1024),
        Param("slots", int, 2, "partitions in flight", choices=SLOT_CHOICES),
        Param("chunks", int, 16, "448-bit lines per partition", minimum=1, maximum=4096),
        Param("mode", str, "deterministic", "summation order", choices=MODES),
    ],
)
