"""The SmartNIC's embedding-bag kernel (forward): lookups deduped, cached, fanned out and pooled per bag."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4Signature
from ..lib.counters import COUNTER_BITS, count_events
from ..registration import Param, Parameterized, register_block
from .cache_mshr import MSHR_CHOICES
from .common import CACHE_LINE_BITS, DIM_PARAM, POW2_WAYS, check_table_cache, log2, table_bits
from .dedupe_unit import CAPACITY_CHOICES, DedupeUnit
from .embedding_cache import EmbeddingCache
from .loss_reduction import LossReduction

__all__ = ["EmbeddingBag", "COUNTERS", "bag_lookup_layout", "pooled_layout"]

COUNTERS = ("bad_index", "hits", "misses", "duplicates", "overflows")


def bag_lookup_layout(tables, row_bits, bag_bits):
    """A lookup: ``row`` of ``table`` for bag ``bag`` (the sample); ``group_end`` ends a group of bags,
    ``last`` the batch (and its final group)."""
    return data.StructLayout({"row": row_bits, "bag": bag_bits, "table": table_bits(tables), "group_end": 1,
                              "last": 1})


def pooled_layout(tables, bag_bits, line_bits):
    """A line of a pooled vector: ``line`` of bag ``bag`` of ``table``; ``last`` ends a group's vectors."""
    return data.StructLayout({"bag": bag_bits, "table": table_bits(tables), "line": max(line_bits, 1),
                              "last": 1, "data": CACHE_LINE_BITS})


class EmbeddingBag(Parameterized, wiring.Component):
    """Embedding-bag forward (``torch.nn.EmbeddingBag(mode="sum")`` over ``tables`` tables), bit for bit
    :func:`golden.dlrm.embedding_bag.pool`.

    The host sends a batch's lookups in :func:`golden.dlrm.embedding_bag.interleaved_lookups`'
    order (bags ``group`` at a time; ``scripts.sim.devices.dlrm.kjt_lookups`` turns a
    ``KeyedJaggedTensor``-shaped batch into this stream), marking the final lookup of every group
    (``group_end``) and of the batch (``last``). The blocks, in order:

    * **Front end.** A lookup whose ``row`` is not below ``rows`` or whose ``table`` is not below
      ``tables`` is dropped and counted in ``bad_index``; its ``group_end`` and ``last`` pass to
      the group's latest good lookup. So the front end holds each good lookup until the next good
      one arrives (or the held one ends the batch): it knows then whether the held one is the
      last good lookup of its group.
    * **Dedupe** (:class:`rtl.dlrm.DedupeUnit`, ``capacity`` rows and ``positions`` lookups per
      segment, a segment ending at ``last`` or an overflow): each unique row of table ``t`` is
      asked once, as cache row ``t * 2**row_bits + row``.
    * **Cache** (:class:`rtl.dlrm.EmbeddingCache`, ``sets`` x ``ways``, ``mshrs``): exact LRU, rows
      read from HBM on a miss; table ``t``'s row ``r`` is at byte ``base + (t * 2**row_bits + r) *
      dim * 4``. Its update port is unused (forward only).
    * **Fan-out**: the dedupe unit returns every lookup's row in lookup order; a queue beside it
      holds each lookup's bag and ``group_end``.
    * **Pooling** (:class:`rtl.dlrm.LossReduction`, keyed by (bag, line), ``group * dim / 16``
      keys): a bag's first row is kept as it came, each later one is added in lookup order, one
      binary32 rounding each (:func:`pool`'s order). The table is flushed at each group's end:
      the group's pooled vectors leave in order of their first good lookup (lines together),
      ``last`` on the group's final line.

    A bag with no good lookup (empty, or all bad) sends nothing: its pooled vector is ``+0.0``.
    A group of more than ``group`` bags overflows the pooling table: its partial sums leave
    early and it is counted in ``overflows`` (the host broke the grouping; sums are then wrong).

    Parameters
    ----------
    tables : int
        Embedding tables, 1 to 64.
    row_bits : int
        Width of a row id within a table, 4 to 24.
    bag_bits : int
        Width of a bag (sample) number, 3 to 16.
    dim : int
        Embedding dimension: 16, 32, 64 or 128.
    sets, ways, mshrs : int
        The cache's (:class:`rtl.dlrm.EmbeddingCache`).
    capacity, positions : int
        The dedupe unit's unique rows and lookups per segment.
    group : int
        Bags pooled at once; ``group * dim / 16`` must be one of 2 to 64 (the pooling table).
    address_width : int
        HBM byte address width, 32 to 64.

    Attributes
    ----------
    i : In(stream.Signature(bag_lookup_layout(tables, row_bits, bag_bits)))
        Lookups.
    o : Out(stream.Signature(pooled_layout(tables, bag_bits, log2(dim / 16))))
        Pooled vectors, ``dim / 16`` lines each.
    rows : In(row_bits + 1)
        Rows of each table.
    base : In(address_width)
        HBM byte address of table 0's row 0 (line aligned).
    m_axi : Out(AXI4Signature(address_width, 512))
        The GPU's HBM (reads only).
    bad_index, hits, misses, duplicates, overflows : Out(32)
        Saturating counters: lookups dropped as out of range; the cache's hits and misses; lookups
        that found their row in the dedupe table; pooling-table overflows.
    hbm_error : Out(1)
        The cache's: sticky, an HBM read failed (that row pools zeros from the failing line on).

    Notes
    -----
    Throughput: one lookup per cycle into the dedupe unit, whose segments alternate between
    collecting (one lookup a cycle) and fanning out (one row line a cycle, once every unique
    row is back); hits and, with ``mshrs`` above 1, overlapping misses feed it. The pooling adds
    one line a cycle unless a line's previous addition is still in its adders (6 cycles): a
    group of at least 7 rows' lines between two lookups of a bag never waits.
    Latency: a group's vectors start about 10 cycles after its last row line leaves the dedupe
    unit; a lookup waits in the front end until the next good one (or ``last``) arrives.
    """

    PARAMS = (
        Param("tables", int, 4, "embedding tables", minimum=1, maximum=64),
        Param("row_bits", int, 16, "row id width within a table", minimum=4, maximum=24),
        Param("bag_bits", int, 8, "bag (sample) number width", minimum=3, maximum=16),
        DIM_PARAM,
        Param("sets", int, 64, "cache sets (power of two)", minimum=1, maximum=4096),
        Param("ways", int, 4, "cache ways per set", choices=POW2_WAYS),
        Param("mshrs", int, 4, "cache lookups that may wait for HBM at once", choices=MSHR_CHOICES),
        Param("capacity", int, 16, "dedupe: unique rows per segment", choices=CAPACITY_CHOICES),
        Param("positions", int, 64, "dedupe: lookups per segment", minimum=2, maximum=1024),
        Param("group", int, 8, "bags pooled at once", minimum=1, maximum=64),
        Param("address_width", int, 48, "HBM byte address width", minimum=32, maximum=64),
    )

    @classmethod
    def check_params(cls, values):
        keys = values["group"] * values["dim"] // 16
        if keys not in CAPACITY_CHOICES:
            raise ValueError(f"group * dim / 16 must be one of {', '.join(map(str, CAPACITY_CHOICES))}, "
                             f"not {keys}")
        check_table_cache(values)

    def __init__(self, *, tables=4, row_bits=16, bag_bits=8, dim=16, sets=64, ways=4, mshrs=4, capacity=16,
                 positions=64, group=8, address_width=48):
        self.lines = dim // 16
        members = {
            "i": In(stream.Signature(bag_lookup_layout(tables, row_bits, bag_bits))),
            "o": Out(stream.Signature(pooled_layout(tables, bag_bits, log2(self.lines)))),
            "rows": In(row_bits + 1),
            "base": In(address_width),
            "m_axi": Out(AXI4Signature(address_width=address_width, data_width=CACHE_LINE_BITS)),
            "hbm_error": Out(1),
        }
        members.update({name: Out(COUNTER_BITS) for name in COUNTERS})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        lines, table_width = self.lines, table_bits(self._tables)
        index_bits = self._row_bits + table_width
        key_bits = self._bag_bits + table_width
        m.submodules.dedupe = dedupe = DedupeUnit(capacity=self._capacity, positions=self._positions,
                                                  dim=self._dim, index_bits=index_bits)
        m.submodules.cache = cache = EmbeddingCache(
            sets=self._sets, ways=self._ways, dim=self._dim, index_bits=index_bits,
            tag_width=log2(self._capacity), address_width=self._address_width, mshrs=self._mshrs)
        m.submodules.pool = pool = LossReduction(capacity=self._group * lines, dim=self._dim,
                                                 index_bits=max(key_bits, 4))
        # Each lookup's bag and group end, from the dedupe unit's input to its fan-out: it holds at
        # most ``positions`` lookups, one more that cuts the segment, and one in its output register.
        side_layout = data.StructLayout({"bag": self._bag_bits, "table": table_width, "group_end": 1})
        m.submodules.side = side = SyncFIFO(width=side_layout.size, depth=self._positions + 4)
        events = {"bad_index": Signal(name="bad_index_event")}

        # Front end: the latest good lookup waits in `held` until it is known to be its group's
        # last good one or not; a bad lookup's group_end and last go to it.
        lookup = self.i.payload
        good = (lookup.row < self.rows) & (lookup.table < self._tables)
        held = Signal.like(lookup)
        held_valid = Signal()
        release = held_valid & (held.last | (self.i.valid & good))
        fire = release & dedupe.i.ready & side.w_rdy
        m.d.comb += [dedupe.i.valid.eq(release & side.w_rdy),
                     dedupe.i.payload.index.eq(Cat(held.row, held.table)),
                     dedupe.i.payload.last.eq(held.last),
                     side.w_en.eq(fire), side.w_data.eq(Cat(held.bag, held.table, held.group_end))]
        with m.If(good):
            m.d.comb += self.i.ready.eq(~held_valid | (fire & ~held.last))
        with m.Else():
            m.d.comb += self.i.ready.eq(~(held_valid & held.last))
        taken = self.i.valid & self.i.ready
        m.d.comb += events["bad_index"].eq(taken & ~good)
        with m.If(taken & good):
            m.d.sync += [held.eq(lookup), held_valid.eq(1)]
        with m.Elif(taken):
            m.d.sync += [held.group_end.eq(held.group_end | lookup.group_end),
                         held.last.eq(held.last | lookup.last)]
        with m.Elif(fire):
            m.d.sync += held_valid.eq(0)

        # Dedupe <-> cache; the cache always answers (its update port idle, every index in range).
        request, reply = dedupe.req.payload, cache.o.payload
        m.d.comb += [cache.i.valid.eq(dedupe.req.valid), dedupe.req.ready.eq(cache.i.ready),
                     cache.i.payload.index.eq(request.index), cache.i.payload.tag.eq(request.tag),
                     dedupe.rep.valid.eq(cache.o.valid), cache.o.ready.eq(dedupe.rep.ready),
                     dedupe.rep.payload.tag.eq(reply.tag), dedupe.rep.payload.line.eq(reply.line),
                     dedupe.rep.payload.data.eq(reply.data),
                     cache.u.valid.eq(0), cache.rows.eq(Const(1 << index_bits, index_bits + 1)),
                     cache.base.eq(self.base)]
        wiring.connect(m, wiring.flipped(self.m_axi), cache.m_axi)

        # Fan-out into pooling: a row line with its lookup's bag; the group's final line flushes.
        fanned = dedupe.o.payload
        bag = side_layout(side.r_data)
        final_line = fanned.line == lines - 1 if lines > 1 else Const(1)
        m.d.comb += [pool.i.valid.eq(dedupe.o.valid & side.r_rdy),
                     dedupe.o.ready.eq(pool.i.ready & side.r_rdy),
                     pool.i.payload.index.eq(Cat(bag.bag, bag.table)), pool.i.payload.line.eq(fanned.line),
                     pool.i.payload.last.eq(bag.group_end & final_line), pool.i.payload.data.eq(fanned.data),
                     side.r_en.eq(dedupe.o.valid & pool.i.ready & final_line)]
        summed = pool.o.payload
        m.d.comb += [self.o.valid.eq(pool.o.valid), pool.o.ready.eq(self.o.ready),
                     self.o.payload.bag.eq(summed.index[:self._bag_bits]),
                     self.o.payload.table.eq(summed.index[self._bag_bits:key_bits]),
                     self.o.payload.line.eq(summed.line), self.o.payload.last.eq(summed.last),
                     self.o.payload.data.eq(summed.data)]

        # Counters: the front end's drops here, the others the blocks' own.
        m.d.comb += [self.hits.eq(cache.hits), self.misses.eq(cache.misses),
                     self.duplicates.eq(dedupe.duplicates),
                     self.overflows.eq(pool.overflows), self.hbm_error.eq(cache.hbm_error)]
        count_events(m, self, events)
        return m


register_block(
    "embedding_bag", EmbeddingBag, family="dlrm",
    summary="DLRM: embedding-bag forward; lookups deduped, cached (HBM on AXI4), pooled per bag (binary32).",
    golden="golden.dlrm.embedding_bag:pool",
    drops={
        "bad_index": "lookups whose row or table is out of range, dropped (saturating)",
        "overflows": "groups of more than `group` bags, whose sums left in parts (saturating)",
        "hbm_error": "sticky: an HBM read answered SLVERR/DECERR, or a stray R/B response was dropped",
    },
)
