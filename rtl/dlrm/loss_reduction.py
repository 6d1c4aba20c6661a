"""Local loss reduction: the FP32 gradients of one row line summed in arrival order, one per cycle."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..fp.fp_add import FloatAdder
from ..lib.cam import KeyLookup
from ..lib.counters import COUNTER_BITS, count_events
from ..registration import NO_DROPS, Param, Parameterized, register_block
from .common import CACHE_LINE_BITS, CACHE_LINE_WORDS, DIM_PARAM, INDEX_BITS_PARAM, log2
from .dedupe_unit import CAPACITY_CHOICES

__all__ = ["LossReduction", "COUNTERS", "gradient_layout"]

COUNTERS = ("merged", "overflows")
_STATES = ("COLLECT", "FLUSH")


def gradient_layout(index_bits, line_bits):
    """A gradient line: ``line`` of row ``index``; ``last`` ends a batch."""
    return data.StructLayout({"index": index_bits, "line": max(line_bits, 1), "last": 1,
                              "data": CACHE_LINE_BITS})


class LossReduction(Parameterized, wiring.Component):
    """Sums a batch's gradients per row line (dissertation Section 5.5.2), as :mod:`golden.dlrm.reduction`.

    A table of ``capacity`` keys ``(index, line)`` (registers compared in parallel) and their
    running sums (a memory read combinationally). The first gradient of a key is stored as it
    came; each later one is added to the sum by sixteen :class:`rtl.fp.fp_add.FloatAdder` lanes
    (binary32, round to nearest even, canonical NaN), in arrival order, so the sums are
    deterministic. While a key's addition is in the adder, a further gradient of that key
    waits (no forwarding: the order of each key's additions is the arrival order); gradients
    of other keys go on, one per cycle.

    A gradient of a new key that finds the table full (an overflow), and the end of a batch
    (``last``), flush the table: once every addition is done, each key's sum leaves on ``o``
    in order of its first gradient, and the table is cleared.

    Parameters
    ----------
    capacity : int
        Keys in the table: 2, 4, 8, 16, 32 or 64.
    dim : int
        Embedding dimension: 16, 32, 64 or 128 (``dim / 16`` lines per row).
    index_bits : int
        Width of a row index, 4 to 32.

    Attributes
    ----------
    i : In(stream.Signature(gradient_layout(index_bits, line_bits)))
        Gradients.
    o : Out(stream.Signature(gradient_layout(index_bits, line_bits)))
        Sums; ``last`` marks the final sum of a batch.
    merged, overflows : Out(32)
        Saturating counters: gradients added to a sum, flushes caused by a full table.

    Notes
    -----
    A gradient is matched against the keys as it is taken from ``i`` and issued a cycle later.
    Latency of an addition: 6 cycles (the adder's). A flush starts at most 7 cycles after
    its cause and then gives one sum per cycle while ``o`` is ready.
    """

    PARAMS = (
        Param("capacity", int, 16, "row lines in the table", choices=CAPACITY_CHOICES),
        DIM_PARAM,
        INDEX_BITS_PARAM,
    )

    def __init__(self, *, capacity=16, dim=16, index_bits=24):
        self.lines = dim // 16
        layout = gradient_layout(index_bits, log2(self.lines))
        members = {"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout))}
        members.update({name: Out(COUNTER_BITS) for name in COUNTERS})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        capacity, lines = self._capacity, self.lines
        slot_bits, line_bits = log2(capacity), log2(lines)
        events = {name: Signal(name=f"{name}_event") for name in COUNTERS}
        key_layout = data.StructLayout({"index": self._index_bits, "line": max(line_bits, 1)})

        keys = [Signal(key_layout, name=f"key{k}") for k in range(capacity)]
        count = Signal(range(capacity + 1))
        busy = Signal(capacity)  # an addition into this slot is in the adder
        batch_end = Signal()
        m.submodules.sums = sums = Memory(shape=CACHE_LINE_BITS, depth=capacity, init=[])
        sum_read = sums.read_port(domain="comb")
        first_write, result_write = sums.write_port(), sums.write_port()

        lanes = []
        for word in range(CACHE_LINE_WORDS):
            lane = FloatAdder(fmt="f32", tag_width=slot_bits if word == 0 else 0)
            m.submodules[f"lane{word}"] = lane
            lanes.append(lane)
            m.d.comb += [lane.o.ready.eq(1),
                         result_write.data[32 * word:32 * word + 32].eq(lane.o.payload.result)]
        head = lanes[0]  # every lane advances on the same condition, so lane 0 speaks for all
        done_slot = head.o.payload.tag
        m.d.comb += [result_write.addr.eq(done_slot), result_write.en.eq(head.o.valid)]

        state = Signal(range(len(_STATES)))
        COLLECT, FLUSH = range(len(_STATES))
        # A lookup stage (ECP5: the key compare ran on through the sums' read into the adders,
        # 31 MHz, without it).
        take, inserting = Signal(), Signal()
        table = KeyLookup(m, i=self.i, keys=keys, key_of=lambda entry: Cat(entry.index, entry.line),
                          count=count, take=take, inserting=inserting)
        grad, found, slot = table.held, table.found, table.tag
        full = ~found & (count == capacity)
        out_slot = Signal(slot_bits)
        m.d.comb += sum_read.addr.eq(Mux(state == FLUSH, out_slot, slot))

        issued = Signal()
        with m.If(state == COLLECT):
            waits = found & busy.bit_select(slot, 1)
            m.d.comb += take.eq(table.valid & ~full & ~waits & head.i.ready)
            m.d.comb += [issued.eq(take & found), inserting.eq(take & ~found), events["merged"].eq(issued),
                         first_write.addr.eq(count[:slot_bits]), first_write.data.eq(grad.data),
                         first_write.en.eq(inserting)]
            with m.If(inserting):
                m.d.sync += count.eq(count + 1)
                table.insert()
            overflow = table.valid & full
            m.d.comb += events["overflows"].eq(overflow)
            with m.If(overflow | (take & grad.last)):
                m.d.sync += [batch_end.eq(~overflow), state.eq(FLUSH), out_slot.eq(0)]
        for word, lane in enumerate(lanes):
            bits = slice(32 * word, 32 * word + 32)
            m.d.comb += [lane.i.valid.eq(issued), lane.i.payload.a.eq(sum_read.data[bits]),
                         lane.i.payload.b.eq(grad.data[bits])]
        m.d.comb += head.i.payload.tag.eq(slot)
        set_busy = Mux(issued, Const(1, capacity) << slot, 0)
        clear_busy = Mux(head.o.valid, Const(1, capacity) << done_slot, 0)
        m.d.sync += busy.eq((busy | set_busy) & ~clear_busy)

        # Flush: every addition done, then one sum per cycle in slot (first-gradient) order.
        with m.If(state == FLUSH):
            final = out_slot == count - 1
            m.d.comb += [self.o.valid.eq(busy == 0), self.o.payload.data.eq(sum_read.data),
                         self.o.payload.last.eq(final & batch_end)]
            for k in range(capacity):
                with m.If(out_slot == k):
                    m.d.comb += [self.o.payload.index.eq(keys[k].index), self.o.payload.line.eq(keys[k].line)]
            with m.If(self.o.valid & self.o.ready):
                m.d.sync += out_slot.eq(out_slot + 1)
                with m.If(final):
                    m.d.sync += [count.eq(0), state.eq(COLLECT)]
                    table.clear()
        count_events(m, self, events)
        return m


register_block(
    "loss_reduction", LossReduction, family="dlrm",
    summary="DLRM: local loss reduction, binary32 gradients of each row line summed in arrival order.",
    golden="golden.dlrm.reduction:reduce_gradients",
    drops=NO_DROPS,
)
