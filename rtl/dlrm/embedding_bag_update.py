"""The SmartNIC's embedding-bag training step (SGD): pooled gradients fanned out, summed per row, applied."""

from amaranth.hdl import Array, Cat, Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4Signature
from ..fp.fp_add import FloatAdder
from ..fp.fp_mul import FloatMultiplier
from ..lib.counters import COUNTER_BITS, count_events
from ..registration import Param, Parameterized, register_block
from .common import (
    CACHE_LINE_BITS,
    CACHE_LINE_WORDS,
    DIM_PARAM,
    POW2_WAYS,
    check_table_cache,
    log2,
    table_bits,
)
from .dedupe_unit import CAPACITY_CHOICES
from .embedding_cache import EmbeddingCache
from .loss_reduction import LossReduction

__all__ = ["EmbeddingBagUpdate", "COUNTERS", "update_item_layout"]

COUNTERS = ("bad_index", "bad_gradient", "hits", "misses", "overflows", "updates")
_STATES = ("GATHER", "LOOKUP", "READ", "SETTLE", "WRITE")


def update_item_layout(tables, row_bits, line_bits):
    """An item of the step's stream: a line of a bag's pooled gradient (``gradient`` high: ``line``
    and ``data``) or one of the bag's lookups (``table`` and ``row``); ``last`` ends a table."""
    return data.StructLayout({"gradient": 1, "row": row_bits, "table": table_bits(tables),
                              "line": max(line_bits, 1), "last": 1, "data": CACHE_LINE_BITS})


class _Lines:
    """A row's ``lines`` 512-bit registers, read through a chooser by line number and written one
    register per condition (an ``Array`` target, or a one-bit index into one register, would
    leave a case uncovered)."""

    def __init__(self, name, lines):
        self.registers = [Signal(CACHE_LINE_BITS, name=f"{name}{k}") for k in range(lines)]
        self._array = Array(self.registers)

    def __call__(self, index):
        lines = len(self.registers)
        return self.registers[0] if lines == 1 else self._array[index[:log2(lines)]]

    def write(self, m, index, value, bits=slice(None)):
        """``value`` into ``bits`` of register ``index`` at the next edge."""
        for k, register in enumerate(self.registers):
            with m.If((index == k) if len(self.registers) > 1 else Const(1)):
                m.d.sync += register[bits].eq(value)


class EmbeddingBagUpdate(Parameterized, wiring.Component):
    """The embedding-bag backward and SGD row update on one node, bit for bit
    :func:`golden.dlrm.embedding_bag.row_gradients` (``nodes=1``, ``capacity``) then
    :func:`golden.dlrm.embedding_bag.sgd_rows`.

    The host sends, table by table and bag by bag (slot order, the golden's order), each bag's
    pooled gradient (``dim / 16`` items with ``gradient`` high) followed by the bag's lookups
    (``gradient`` low), and marks ``last`` on each table's final item. The blocks, in order:

    * **Fan-out.** The latest gradient lines are kept; every good lookup becomes ``dim / 16``
      contributions ``(row, line, gradient line)``. A lookup whose ``row`` is not below ``rows``
      or whose ``table`` is not below ``tables`` is dropped and counted in ``bad_index``. The
      latest contribution is held until the next one (or the table's ``last``) arrives, so the
      table's final good contribution carries ``last`` whatever follows it.
    * **Local loss reduction** (:class:`rtl.dlrm.LossReduction`, ``capacity`` keys ``(row,
      line)``): contributions summed per key in arrival order, flushed at each table's end, so
      each table's sums are :func:`golden.dlrm.reduce_gradients` of its contributions.
    * **Row update**, one row at a time as its sums leave: the row's ``dim / 16`` summed lines
      are gathered and each multiplied by ``lr`` (sixteen :class:`rtl.fp.fp_mul.FloatMultiplier`
      lanes); a row whose sum holds a NaN or an infinity is counted in ``bad_gradient`` and left
      alone; else the row is read through the cache (:class:`rtl.dlrm.EmbeddingCache`, blocking,
      HBM on a miss), each line becomes ``w - (lr * g)`` (sixteen subtracting
      :class:`rtl.fp.fp_add.FloatAdder` lanes: binary32, round to nearest even, canonical NaN)
      and is written through the cache's update port to the cache and HBM.

    Table ``t``'s row ``r`` is at byte ``base + (t * 2**row_bits + r) * dim * 4`` of HBM, as in
    :class:`rtl.dlrm.EmbeddingBag`. A key the reduction emits twice within a table (an overflow,
    counted in ``overflows``: more than ``capacity`` row lines in the table's batch) is applied
    twice, ``w - lr g1 - lr g2``, where the golden adds the partial sums first: the host keeps a
    table's touched rows within ``capacity / (dim / 16)`` for bit-exact updates.

    Parameters
    ----------
    tables : int
        Embedding tables, 1 to 64.
    row_bits : int
        Width of a row id within a table, 4 to 24.
    dim : int
        Embedding dimension: 16, 32, 64 or 128.
    sets, ways : int
        The cache's (:class:`rtl.dlrm.EmbeddingCache`, with one miss outstanding).
    capacity : int
        Keys of the loss reduction, at least ``dim / 16``.
    address_width : int
        HBM byte address width, 32 to 64.

    Attributes
    ----------
    i : In(stream.Signature(update_item_layout(tables, row_bits, log2(dim / 16))))
        Gradient lines and lookups.
    lr : In(32)
        The learning rate, binary32.
    rows : In(row_bits + 1)
        Rows of each table.
    base : In(address_width)
        HBM byte address of table 0's row 0 (line aligned).
    m_axi : Out(AXI4Signature(address_width, 512))
        The GPU's HBM.
    bad_index, bad_gradient, hits, misses, overflows, updates : Out(32)
        Saturating counters: lookups dropped as out of range; rows not updated for a NaN or
        infinite gradient; the cache's hits and misses (one per updated row); the reduction's
        overflows; row lines written through.
    hbm_error : Out(1)
        The cache's: sticky, an HBM read or write failed.

    Notes
    -----
    Throughput: the fan-out takes a gradient line or a lookup's line per cycle; the reduction one
    contribution per cycle (a key's next addition waits for its previous one, 6 cycles). The row
    update is sequential, one row at a time (gather its sums, read it through the cache, the
    multipliers' and subtractors' latencies, write it); the reduction's flush waits on it.
    """

    PARAMS = (
        Param("tables", int, 4, "embedding tables", minimum=1, maximum=64),
        Param("row_bits", int, 16, "row id width within a table", minimum=4, maximum=24),
        DIM_PARAM,
        Param("sets", int, 64, "cache sets (power of two)", minimum=1, maximum=4096),
        Param("ways", int, 4, "cache ways per set", choices=POW2_WAYS),
        Param("capacity", int, 16, "loss reduction: row lines summed at once", choices=CAPACITY_CHOICES),
        Param("address_width", int, 48, "HBM byte address width", minimum=32, maximum=64),
    )

    @classmethod
    def check_params(cls, values):
        if values["capacity"] < values["dim"] // 16:
            raise ValueError(f"capacity must hold a row's {values['dim'] // 16} lines, "
                             f"not {values['capacity']}")
        check_table_cache(values)

    def __init__(self, *, tables=4, row_bits=16, dim=16, sets=64, ways=4, capacity=16, address_width=48):
        self.lines = dim // 16
        members = {
            "i": In(stream.Signature(update_item_layout(tables, row_bits, log2(self.lines)))),
            "lr": In(32),
            "rows": In(row_bits + 1),
            "base": In(address_width),
            "m_axi": Out(AXI4Signature(address_width=address_width, data_width=CACHE_LINE_BITS)),
            "hbm_error": Out(1),
        }
        members.update({name: Out(COUNTER_BITS) for name in COUNTERS})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        index_bits = self._row_bits + table_bits(self._tables)
        m.submodules.reduce = reduce = LossReduction(capacity=self._capacity, dim=self._dim,
                                                     index_bits=max(index_bits, 4))
        m.submodules.cache = cache = EmbeddingCache(
            sets=self._sets, ways=self._ways, dim=self._dim, index_bits=index_bits, tag_width=0,
            address_width=self._address_width, mshrs=1)
        events = {name: Signal(name=f"{name}_event") for name in ("bad_index", "bad_gradient")}
        self._fan_out(m, reduce, index_bits, events)
        self._row_update(m, reduce, cache, events)
        wiring.connect(m, wiring.flipped(self.m_axi), cache.m_axi)
        m.d.comb += [cache.rows.eq(Const(1 << index_bits, index_bits + 1)), cache.base.eq(self.base),
                     self.hits.eq(cache.hits), self.misses.eq(cache.misses), self.updates.eq(cache.updates),
                     self.overflows.eq(reduce.overflows), self.hbm_error.eq(cache.hbm_error)]
        count_events(m, self, events)
        return m

    def _fan_out(self, m, reduce, index_bits, events):
        """Gradient lines kept, each good lookup sent on as ``dim / 16`` contributions, the latest held
        back so that a table's ``last`` (which may come on a dropped lookup or a gradient line) lands
        on the table's final contribution."""
        lines, item = self.lines, self.i.payload
        gradient = _Lines("gradient", lines)
        held = Signal.like(reduce.i.payload)
        held_valid, flush = Signal(), Signal()
        step = Signal(range(lines))  # the line of the current lookup sent next
        good = ~item.gradient & (item.row < self.rows) & (item.table < self._tables)
        with m.If(flush):
            # The table ended: its final contribution (if any) leaves with `last`.
            m.d.comb += [reduce.i.valid.eq(held_valid), reduce.i.payload.eq(held),
                         reduce.i.payload.last.eq(1)]
            with m.If(~held_valid | reduce.i.ready):
                m.d.sync += [held_valid.eq(0), flush.eq(0)]
        with m.Else():
            moves = ~good | ~held_valid | reduce.i.ready
            final = ~good | (step == lines - 1)
            advance = self.i.valid & moves
            m.d.comb += [reduce.i.valid.eq(self.i.valid & good & held_valid), reduce.i.payload.eq(held),
                         reduce.i.payload.last.eq(0), self.i.ready.eq(moves & final),
                         events["bad_index"].eq(advance & ~item.gradient & ~good)]
            with m.If(advance & good):
                m.d.sync += [held.index.eq(Cat(item.row, item.table)), held.line.eq(step),
                             held.data.eq(gradient(step)), held_valid.eq(1),
                             step.eq(0 if lines == 1 else step + 1)]
            with m.If(advance & item.gradient & (item.line < lines)):
                gradient.write(m, item.line, item.data)
            with m.If(advance & final & item.last):
                m.d.sync += flush.eq(1)

    def _row_update(self, m, reduce, cache, events):
        """One row at a time: its summed lines times ``lr``, the row read through the cache, each line
        ``w - lr * g`` written through the update port."""
        lines, line_bits = self.lines, max(log2(self.lines), 1)
        GATHER, LOOKUP, READ, SETTLE, WRITE = range(len(_STATES))
        state = Signal(range(len(_STATES)))
        products, results = _Lines("product", lines), _Lines("result", lines)
        row = Signal.like(reduce.o.payload.index)
        nonfinite = Signal()  # some word of the row's gradient so far is a NaN or an infinity
        in_flight = Signal(range(2 * lines + 1))  # products and differences in the lanes
        line = Signal(line_bits)

        multipliers, subtractors = [], []
        for word in range(CACHE_LINE_WORDS):
            bits = slice(32 * word, 32 * word + 32)
            mul = FloatMultiplier(fmt="f32", tag_width=line_bits if word == 0 else 0)
            sub = FloatAdder(fmt="f32", subtract=True, tag_width=line_bits if word == 0 else 0)
            m.submodules[f"mul{word}"], m.submodules[f"sub{word}"] = mul, sub
            multipliers.append(mul)
            subtractors.append(sub)
            m.d.comb += [mul.o.ready.eq(1), sub.o.ready.eq(1),
                         mul.i.payload.a.eq(self.lr), mul.i.payload.b.eq(reduce.o.payload.data[bits]),
                         sub.i.payload.a.eq(cache.o.payload.data[bits]),
                         sub.i.payload.b.eq(products(cache.o.payload.line)[bits])]
            with m.If(mul.o.valid):
                products.write(m, multipliers[0].o.payload.tag, mul.o.payload.result, bits)
            with m.If(sub.o.valid):
                results.write(m, subtractors[0].o.payload.tag, sub.o.payload.result, bits)
        mul_head, sub_head = multipliers[0], subtractors[0]  # every lane moves on the same condition
        m.d.comb += [mul_head.i.payload.tag.eq(reduce.o.payload.line),
                     sub_head.i.payload.tag.eq(cache.o.payload.line)]
        started, done = mul_head.i.valid | sub_head.i.valid, mul_head.o.valid | sub_head.o.valid
        m.d.sync += in_flight.eq(in_flight + started - done)

        summed = reduce.o.payload
        word_nonfinite = Cat(summed.data[32 * w + 23:32 * w + 31].all()
                             for w in range(CACHE_LINE_WORDS)).any()
        final_line = (summed.line == lines - 1) if lines > 1 else Const(1)
        with m.If(state == GATHER):
            m.d.comb += [reduce.o.ready.eq(1)] + [mul.i.valid.eq(reduce.o.valid) for mul in multipliers]
            with m.If(reduce.o.valid):
                m.d.sync += [row.eq(summed.index), nonfinite.eq(nonfinite | word_nonfinite)]
                with m.If(final_line):
                    m.d.sync += nonfinite.eq(0)
                    with m.If(nonfinite | word_nonfinite):
                        m.d.comb += events["bad_gradient"].eq(1)
                    with m.Else():
                        m.d.sync += state.eq(LOOKUP)
        with m.Elif(state == LOOKUP):
            m.d.comb += [cache.i.valid.eq(1), cache.i.payload.index.eq(row), cache.i.payload.tag.eq(0)]
            with m.If(cache.i.ready):
                m.d.sync += state.eq(READ)
        with m.Elif(state == READ):
            # The products are done before a row line is taken (its lane reads them).
            ready = in_flight == 0
            m.d.comb += [cache.o.ready.eq(ready)]
            m.d.comb += [sub.i.valid.eq(cache.o.valid & ready) for sub in subtractors]
            with m.If(cache.o.valid & ready & cache.o.payload.last):
                m.d.sync += state.eq(SETTLE)
        with m.Elif(state == SETTLE):
            with m.If(in_flight == 0):
                m.d.sync += [state.eq(WRITE), line.eq(0)]
        with m.Else():  # WRITE
            m.d.comb += [cache.u.valid.eq(1), cache.u.payload.index.eq(row),
                         cache.u.payload.line.eq(line), cache.u.payload.data.eq(results(line))]
            with m.If(cache.u.ready):
                m.d.sync += line.eq(line + 1)
                with m.If(line == lines - 1):
                    m.d.sync += state.eq(GATHER)


register_block(
    "embedding_bag_update", EmbeddingBagUpdate, family="dlrm",
    summary="DLRM: embedding-bag training step; pooled gradients fanned out, summed per row, SGD "
            "written through.",
    golden="golden.dlrm.embedding_bag:sgd_rows",
    drops={
        "bad_index": "lookups whose row or table is out of range, dropped (saturating)",
        "bad_gradient": "rows whose summed gradient holds a NaN or an infinity, not updated (saturating)",
        "overflows": "reduction overflows: a key's partial sums applied one by one (saturating)",
        "hbm_error": "sticky: an HBM read or write answered SLVERR/DECERR, or a stray R/B response",
    },
)
