"""The dedupe kernel: each unique row of a batch is asked for once, and replies fan out in input order."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..lib.cam import KeyLookup
from ..lib.counters import COUNTER_BITS, count_events
from ..registration import Param, Parameterized, register_block
from .common import CACHE_LINE_BITS, DIM_PARAM, INDEX_BITS_PARAM, log2

__all__ = ["DedupeUnit", "COUNTERS", "CAPACITY_CHOICES"]

COUNTERS = ("issued", "duplicates", "overflows", "bad_replies")
CAPACITY_CHOICES = (2, 4, 8, 16, 32, 64)
_STATES = ("COLLECT", "FANOUT")


class DedupeUnit(Parameterized, wiring.Component):
    """Dedupe of a batch's row lookups (dissertation Section 5.5.1), as :mod:`golden.dlrm.dedupe` states it.

    A content-addressed table of ``capacity`` rows (registers compared in parallel) and a
    position list of ``positions`` lookups. A lookup whose row is in the table only takes a
    position; a new row takes the next entry and is issued once on ``req`` with the entry's
    number as its tag. A lookup that finds the table full (no free entry for a new row, or no
    free position) **overflows**: it waits, and the lookups taken so far form a segment that
    is answered and fanned out alone; then the table is cleared and the lookup is taken.

    Replies (``rep``, one per line of each issued row, in any order) are written into a row
    buffer and are taken while the segment is being collected, so the unit never blocks the
    cache that answers it. A reply whose tag names no issued entry of the segment, or a line
    already answered, is dropped and counted in ``bad_replies``. Once every line is in, the
    segment fans out: for each lookup in input order, the lines of its row on ``o``.

    Parameters
    ----------
    capacity : int
        Unique rows per segment: 2, 4, 8, 16, 32 or 64.
    positions : int
        Lookups per segment, 2 to 1024.
    dim : int
        Embedding dimension: 16, 32, 64 or 128 (a row is ``dim / 16`` lines of 512 bits).
    index_bits : int
        Width of a row index, 4 to 32.

    Attributes
    ----------
    i : In(stream.Signature({"index": index_bits, "last": 1}))
        Lookups; ``last`` ends a batch (and its final segment).
    req : Out(stream.Signature({"index": index_bits, "tag": log2(capacity)}))
        Unique rows to fetch (the cache's lookups).
    rep : In(stream.Signature({"tag": log2(capacity), "line": ..., "data": 512}))
        Replies.
    o : Out(stream.Signature({"index": index_bits, "line": ..., "last": 1, "data": 512}))
        The fanned-out rows in input order; ``last`` marks the final line of a batch.
    issued, duplicates, overflows, bad_replies : Out(32)
        Saturating counters (``bad_replies`` counts a reply the cycle after it arrives).

    Notes
    -----
    Throughput: one lookup per cycle while collecting (``req`` ready), one line per cycle of
    fan-out while ``o`` is ready; a segment's fan-out starts once its last reply is in (written
    into the row buffer the cycle after it arrives).
    Latency: a lookup is matched against the table as it is taken from ``i``, the match is
    reduced to a hit and its entry a cycle later, and the lookup goes to ``req`` (or takes its
    position) a cycle after that.
    """

    PARAMS = (
        Param("capacity", int, 16, "unique rows per segment", choices=CAPACITY_CHOICES),
        Param("positions", int, 64, "lookups per segment", minimum=2, maximum=1024),
        DIM_PARAM,
        INDEX_BITS_PARAM,
    )

    def __init__(self, *, capacity=16, positions=64, dim=16, index_bits=24):
        self.lines = dim // 16
        tag_bits, line_bits = log2(capacity), max(log2(self.lines), 1)
        members = {
            "i": In(stream.Signature(data.StructLayout({"index": index_bits, "last": 1}))),
            "req": Out(stream.Signature(data.StructLayout({"index": index_bits, "tag": tag_bits}))),
            "rep": In(stream.Signature(data.StructLayout({"tag": tag_bits, "line": line_bits,
                                                          "data": CACHE_LINE_BITS}))),
            "o": Out(stream.Signature(data.StructLayout({"index": index_bits, "line": line_bits, "last": 1,
                                                        "data": CACHE_LINE_BITS}))),
        }
        members.update({name: Out(COUNTER_BITS) for name in COUNTERS})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        capacity, positions, lines = self._capacity, self._positions, self.lines
        tag_bits, line_bits = log2(capacity), log2(lines)
        events = {name: Signal(name=f"{name}_event") for name in COUNTERS}

        key_layout = data.StructLayout({"index": self._index_bits})
        keys = [Signal(key_layout, name=f"key{k}") for k in range(capacity)]
        count = Signal(range(capacity + 1))
        taken = Signal(range(positions + 1))
        # In the fan-out, ``position == taken - 1``, as a flag beside ``position`` (ECP5: the compare
        # ran on through the table's clear into the lookup's front register, 123 MHz).
        last_position = Signal()
        batch_end = Signal()
        entry = data.StructLayout({"index": self._index_bits, "tag": tag_bits})
        m.submodules.position_list = plist = Memory(shape=entry, depth=positions, init=[])
        plist_write, plist_read = plist.write_port(), plist.read_port(domain="comb")
        m.submodules.row_buffer = rows = Memory(shape=CACHE_LINE_BITS, depth=capacity * lines, init=[])
        row_write, row_read = rows.write_port(), rows.read_port()

        state = Signal(range(len(_STATES)))
        COLLECT, FANOUT = range(len(_STATES))

        # Two lookup stages (ECP5: the table's compare ran on into the position list's write port,
        # 82 MHz, without a lookup stage; with one, from the input through the compares and their OR
        # into the hit, 115 MHz).
        take, inserting, leaving = Signal(), Signal(), Signal()  # leaving: an overflow or a batch's last
        table = KeyLookup(m, i=self.i, keys=keys, key_of=lambda entry: entry.index, count=count, take=take,
                          inserting=inserting, stages=2)
        held, held_found = table.held, table.found
        # taken == positions and count == capacity, kept as flags beside the counts (with the
        # lookup in two stages, the compares ran on through `full` into the table's write, 122.9 MHz).
        positions_full, table_full = Signal(), Signal()
        full = positions_full | (~held_found & table_full)

        # Replies, in any state: a line of an issued entry of this segment, answered once. It is
        # checked as it arrives (``got`` is set then, so a repeat a cycle later is caught) and written
        # into the row buffer, and counted, a cycle later (ECP5: the check ran on into the row
        # buffer's write enable and the bad-reply counter, 114-120 MHz). "Issued" is the table's
        # in-use flag of the reply's tag, a multiplexer instead of the compare ``tag < count``.
        got = Signal(capacity * lines)
        received = Signal(range(capacity * lines + 1))
        reply = self.rep.payload
        reply_slot = Cat(reply.line[:line_bits], reply.tag)
        issued = table.used.bit_select(reply.tag, 1)
        fresh = issued & (reply.line < lines) & ~got.bit_select(reply_slot, 1)
        write, bad_reply = Signal(), Signal()
        write_slot, write_data = Signal.like(reply_slot), Signal.like(reply.data)
        m.d.sync += [write.eq(self.rep.valid & fresh), bad_reply.eq(self.rep.valid & ~fresh),
                     write_slot.eq(reply_slot), write_data.eq(reply.data)]
        m.d.comb += [self.rep.ready.eq(1), row_write.addr.eq(write_slot), row_write.data.eq(write_data),
                     row_write.en.eq(write), events["bad_replies"].eq(bad_reply)]
        with m.If(self.rep.valid & fresh):
            m.d.sync += got.eq(got | (Const(1, len(got)) << reply_slot))
        # Counted as written, so the fan-out, which starts at the last count, reads written rows.
        with m.If(write):
            m.d.sync += received.eq(received + 1)

        # Collect: the held lookup takes a position, and a new row an entry (below ``count``).
        m.d.comb += [self.req.payload.index.eq(held.index), self.req.payload.tag.eq(count[:tag_bits]),
                     plist_write.addr.eq(taken), plist_write.data.index.eq(held.index)]
        with m.If(state == COLLECT):
            m.d.comb += [self.req.valid.eq(table.valid & ~held_found & ~full),
                         take.eq(table.valid & ~full & (held_found | self.req.ready)),
                         inserting.eq(take & ~held_found)]
            m.d.comb += [plist_write.en.eq(take),
                         plist_write.data.tag.eq(Mux(held_found, table.tag, count[:tag_bits]))]
            with m.If(take):
                m.d.sync += [taken.eq(taken + 1), positions_full.eq(taken == positions - 1)]
                m.d.comb += [events["duplicates"].eq(held_found), events["issued"].eq(~held_found)]
            with m.If(inserting):
                m.d.sync += [count.eq(count + 1), table_full.eq(count == capacity - 1)]
                table.insert()
            cut = table.valid & full
            m.d.comb += [events["overflows"].eq(cut), leaving.eq(cut | (take & held.last))]
            with m.If(leaving):
                m.d.sync += batch_end.eq(take & held.last)
                m.d.sync += state.eq(FANOUT)
                # The fan-out starts at position 0: the last one if a single position is taken.
                m.d.sync += last_position.eq(Mux(take, taken == 0, taken == 1))

        # Fan-out: once every reply is in, each position's row lines, through the row buffer.
        position = Signal(range(positions))
        line = Signal(max(line_bits, 1))
        o_free = ~self.o.valid | self.o.ready
        ready = (state == FANOUT) & (received == count * lines)
        step = ready & o_free
        final_line = line == lines - 1 if lines > 1 else Const(1)
        final = final_line & last_position
        m.d.comb += [plist_read.addr.eq(position),
                     row_read.addr.eq(Cat(line[:line_bits], plist_read.data.tag)), row_read.en.eq(step)]
        m.d.comb += self.o.payload.data.eq(row_read.data)
        with m.If(step):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.index.eq(plist_read.data.index),
                         self.o.payload.line.eq(line), self.o.payload.last.eq(final & batch_end)]
            m.d.sync += line.eq(line + 1)
            with m.If(final_line):
                m.d.sync += [line.eq(0), position.eq(position + 1), last_position.eq(position + 2 == taken)]
            with m.If(final):
                m.d.sync += [position.eq(0), count.eq(0), taken.eq(0), got.eq(0), received.eq(0),
                             positions_full.eq(0), table_full.eq(0), state.eq(COLLECT)]
                table.clear()
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        count_events(m, self, events)
        return m


register_block(
    "dedupe_unit", DedupeUnit, family="dlrm",
    summary="DLRM: dedupe of a batch's row lookups (CAM, overflow cuts segments), replies fanned out.",
    golden="golden.dlrm:dedupe",
    drops={"bad_replies": "HBM replies for no request of the batch, or answered twice, dropped (saturating)"},
)
