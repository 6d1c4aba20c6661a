"""The SmartNIC's local embedding cache: set-associative, exact LRU, write-through to the GPU's HBM."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4Signature
from ..bus.axi_burst_reader import AXIBurstReader
from ..bus.axi_burst_writer import AXIBurstWriter
from ..lib.counters import COUNTER_BITS, count_events
from ..registration import Param, Parameterized, check_int, register_block
from .cache_mshr import MSHR_CHOICES, mshr_control
from .common import CACHE_LINE_BITS, DIM_PARAM, INDEX_BITS_PARAM, POW2_WAYS, log2

__all__ = ["EmbeddingCache", "COUNTERS", "lookup_layout", "row_line_layout", "update_layout"]

COUNTERS = ("hits", "misses", "bad_index", "updates")
_STATES = ("CLEAR", "RUN", "FETCH", "FILL", "WRITE_CMD", "WRITE_DATA")


def lookup_layout(index_bits, tag_width):
    """A lookup: the row ``index`` and a side-band ``tag`` returned with the row."""
    return data.StructLayout({"index": index_bits, "tag": max(tag_width, 1)})


def row_line_layout(index_bits, tag_width, line_bits):
    """One line of a looked-up row: ``line`` of the row, ``last`` its final line, ``hit``, ``data``."""
    return data.StructLayout({"index": index_bits, "tag": max(tag_width, 1), "line": max(line_bits, 1),
                              "last": 1, "hit": 1, "data": CACHE_LINE_BITS})


def update_layout(index_bits, line_bits):
    """A write-through update: ``data`` becomes ``line`` of row ``index``."""
    return data.StructLayout({"index": index_bits, "line": max(line_bits, 1), "data": CACHE_LINE_BITS})


class EmbeddingCache(Parameterized, wiring.Component):
    """An LRU cache of embedding rows in front of the GPU's HBM (dissertation Section 5.5.1).

    Row ``r`` (``dim`` binary32 values, ``dim / 16`` lines of 512 bits, at byte ``base + r * dim *
    4`` of HBM) lives in set ``r mod sets``, tag ``r // sets``, and may sit in any of the ``ways``
    ways. Replacement is exact LRU; the order of hits and misses is that of
    :class:`golden.dlrm.LruCache`, bit for bit.

    Tags (with a valid bit) and the per-set LRU ages sit in memories read combinationally
    (distributed RAM): a lookup reads, decides and writes back its set in the cycle it is
    taken, so back-to-back lookups of one set need no forwarding and a hit is taken every
    cycle. The rows sit in a block-RAM data memory (one line per address, read one cycle later).

    A miss claims the way of age ``ways - 1`` at once (tags and ages as the golden); its row is
    read from HBM with :class:`rtl.bus.AXIBurstReader`, written into the way, and then leaves like
    a hit (``hit`` low). With ``mshrs=1`` a miss is blocking: no lookup is taken meanwhile, so rows
    leave in lookup order.

    With ``mshrs`` above 1 the cache is non-blocking (:mod:`rtl.dlrm.cache_mshr`). Every lookup
    is still decided, and its tags and ages written, in the cycle it is taken, in lookup order,
    so the hit/miss sequence is the golden's. A lookup that misses, or that hits a way some
    *waiting* lookup uses (its row being read: the golden's hit, merged into that read, no
    second HBM read), waits in a ring of ``mshrs`` entries; so at most ``mshrs`` misses are
    outstanding, up to ``mshrs`` HBM reads in flight (one AXI ID: they return in order). The
    rules:

    * *Order.* A hit on a way no waiting lookup uses leaves at once (hits overtake misses); the
      waiting lookups leave in lookup order, each once its row is filled, and the oldest goes
      before a new hit. A lookup of a row with waiting lookups waits behind them, so **each
      row's lookups leave in lookup order**; across rows the order is not kept, and ``tag``
      tells the lookups apart.
    * *Victims.* A miss whose victim way (age ``ways - 1``) a waiting lookup still uses is not
      taken until that lookup has left, so a way is never refilled before its fill completed and
      its waiters read it; the LRU order stays the golden's (the lookup is only delayed).
    * *Fills* wait while stage R reads their way (a hit taken before the miss) or an update
      writes the data memory.
    * *Updates* of a cached row wait until no waiting lookup and not stage R use its way (a row
      being read from HBM is never updated under its fill).
    * *Stalls.* ``i`` is not ready for a lookup that must wait while the ring is full, for a
      miss held by the victims rule, nor for a hit while the oldest waiting lookup enters stage R.

    Gradient updates are **write-through**: an update of a row line writes HBM (with
    :class:`rtl.bus.AXIBurstWriter`, one beat per update) and the cached copy when the row is
    present; it changes neither tags nor ages. With ``mshrs=1`` an update is taken only while no
    miss is being served and no lookup waits to read its row; either way updates take priority
    over lookups. A lookup's HBM read is not ordered after an earlier update's write (AXI reads
    and writes are independent): a row updated and then evicted and read again soon after may
    come back without the update, in either mode.

    A lookup or update whose ``index`` is not below ``rows`` (or whose ``line`` is not below
    ``dim / 16``) is dropped and counted in ``bad_index``. After reset the cache sweeps every
    set invalid (``sets`` cycles) before it takes anything.

    Parameters
    ----------
    sets : int
        Sets, a power of two, 1 to 4096.
    ways : int
        Ways per set: 1, 2, 4 or 8.
    dim : int
        Embedding dimension (binary32 values per row): 16, 32, 64 or 128.
    index_bits : int
        Width of a row index, 4 to 32.
    tag_width : int
        Side-band bits carried from a lookup to its row lines, 0 to 32.
    address_width : int
        HBM byte address width, 32 to 64.
    mshrs : int
        Lookups that may wait for an HBM read at once (misses, and lookups merged into them): 1
        (blocking, the default), 2, 4, 8 or 16.
    counter_width : int
        Width of the four counters, 1 to 32 (the default); narrower ones saturate sooner (for
        tests). Not a registry parameter.

    Attributes
    ----------
    i : In(stream.Signature(lookup_layout(index_bits, tag_width)))
        Lookups.
    o : Out(stream.Signature(row_line_layout(...)))
        The ``dim / 16`` lines of every looked-up row (a row's lines together): in lookup order
        with ``mshrs=1``, else each row's lookups in order (see above).
    u : In(stream.Signature(update_layout(index_bits, line_bits)))
        Write-through updates.
    rows, base : In
        Rows of the table, and HBM byte address of row 0 (line aligned).
    m_axi : Out(AXI4Signature(address_width, 512))
        The GPU's HBM.
    hits, misses, bad_index, updates : Out(counter_width)
        Saturating counters: they stop at all ones (``updates``: updates taken and written
        through).
    hbm_error : Out(1)
        Sticky: an HBM read or write answered SLVERR or DECERR, or HBM broke the AXI protocol
        (an R or B response nobody asked for, dropped; an ``rlast`` on the wrong beat). A failed
        read fills zeros from the failing line on (the lines before it are HBM's); that row
        leaves with ``hit`` low but is not kept, so a later lookup of it misses and reads HBM
        again (with ``mshrs`` above 1, so may a row whose fill completes while the reader's error
        stands, and no read is asked until the reader has drained and cleared it). A failed write
        leaves HBM's line as it was (the cached copy, if any, has the
        update). Later reads and writes go on as normal.

    Notes
    -----
    Latency of a hit: its first line is on ``o`` two cycles after the lookup is taken.
    Throughput: one row every ``dim / 16`` cycles while hits follow each other and ``o`` is
    ready; with ``mshrs=1`` a miss adds the HBM read latency plus about four cycles, with more
    MSHRs up to ``mshrs`` misses overlap that latency with each other and with hits.
    """

    PARAMS = (
        Param("sets", int, 64, "sets (power of two)", minimum=1, maximum=4096),
        Param("ways", int, 4, "ways per set", choices=POW2_WAYS),
        DIM_PARAM,
        INDEX_BITS_PARAM,
        Param("tag_width", int, 8, "side-band bits carried with a lookup", minimum=0, maximum=32),
        Param("address_width", int, 48, "HBM byte address width", minimum=32, maximum=64),
        Param("mshrs", int, 1, "lookups that may wait for an HBM fill at once (1: blocking)",
              choices=MSHR_CHOICES),
    )

    def __init__(self, *, sets=64, ways=4, dim=16, index_bits=24, tag_width=8, address_width=48,
                 mshrs=1, counter_width=COUNTER_BITS):
        if sets & (sets - 1):
            raise ValueError(f"sets must be a power of two, not {sets}")
        counter_width = check_int("counter_width", counter_width, 1, COUNTER_BITS)
        self.lines = dim // 16
        self._set_bits, self._way_bits, self._line_bits = log2(sets), log2(ways), log2(self.lines)
        if self._set_bits >= index_bits:
            raise ValueError(f"index_bits must exceed log2(sets) = {self._set_bits}, not {index_bits}")
        members = {
            "i": In(stream.Signature(lookup_layout(index_bits, tag_width))),
            "o": Out(stream.Signature(row_line_layout(index_bits, tag_width, self._line_bits))),
            "u": In(stream.Signature(update_layout(index_bits, self._line_bits))),
            "rows": In(index_bits + 1),
            "base": In(address_width),
            "m_axi": Out(AXI4Signature(address_width=address_width, data_width=CACHE_LINE_BITS)),
            "hbm_error": Out(1),
        }
        members.update({name: Out(counter_width) for name in COUNTERS})
        super().__init__(members)

    def _datapath(self, m):
        """What the blocking and the non-blocking cache share: memories, HBM engines, the tag
        decision of the lookup or update on the tag port, and stage R; returned as a namespace."""
        sets, ways, lines = self._sets, self._ways, self.lines
        set_bits, way_bits, line_bits = self._set_bits, self._way_bits, self._line_bits
        tag_bits = self._index_bits - set_bits
        entry = tag_bits + 1  # a way's tag and, on top, its valid bit
        age_bits = max(way_bits, 1)
        fresh_ages = sum(way << (age_bits * way) for way in range(ways))

        m.submodules.tags = tags = Memory(shape=entry * ways, depth=sets, init=[])
        m.submodules.ages = ages = Memory(shape=age_bits * ways, depth=sets, init=[fresh_ages] * sets)
        tag_read, tag_write = tags.read_port(domain="comb"), tags.write_port()
        age_read, age_write = ages.read_port(domain="comb"), ages.write_port()
        m.submodules.data_ram = rows = Memory(shape=CACHE_LINE_BITS, depth=sets * ways * lines, init=[])
        row_read, row_write = rows.read_port(), rows.write_port()

        # With MSHRs, misses may ask a row read every cycle: the planner takes them back to back.
        m.submodules.reader = reader = AXIBurstReader(
            address_width=self._address_width, data_width=CACHE_LINE_BITS, max_burst=lines,
            max_outstanding=max(2, self._mshrs), length_width=log2(lines) + 1, back_to_back=self._mshrs > 1)
        m.submodules.writer = writer = AXIBurstWriter(
            address_width=self._address_width, data_width=CACHE_LINE_BITS, max_burst=1, max_outstanding=2,
            length_width=1)
        self._share_axi(m, reader, writer)
        # An engine's error is latched here, then cleared once the engine is idle (`clear` is honoured
        # only then): left set, the engine would issue no more bursts, and every later miss would read
        # zeros and every later update be discarded.
        m.d.comb += [reader.clear.eq(1), reader.cancel.eq(0), writer.clear.eq(1), writer.cancel.eq(0)]
        # A response the engines did not ask for (dropped and counted there) is an HBM error too.
        protocol = reader.protocol_error | reader.stray_beats.any() | writer.stray_responses.any()
        m.d.sync += self.hbm_error.eq(self.hbm_error | reader.error | writer.error | protocol)

        def row_address(index, line=0):
            return (self.base + (index << log2(lines * CACHE_LINE_BITS // 8))
                    + (line << log2(CACHE_LINE_BITS // 8)))

        # After reset, every set is made invalid with fresh ages before anything is taken.
        sweep = Signal(range(sets))

        # The lookup or update being decided reads its set's tags and ages combinationally.
        lookup, update = self.i.payload, self.u.payload
        updating = Signal()  # an update, not a lookup, owns the tag port this cycle
        index = Mux(updating, update.index, lookup.index)
        set_index = index[:set_bits]
        tag = index[set_bits:]
        m.d.comb += [tag_read.addr.eq(set_index), age_read.addr.eq(set_index)]
        way_tag = [tag_read.data[entry * w:entry * w + tag_bits] for w in range(ways)]
        way_valid = [tag_read.data[entry * w + tag_bits] for w in range(ways)]
        way_age = [age_read.data[age_bits * w:age_bits * (w + 1)] for w in range(ways)]
        match = Cat(*[way_valid[w] & (way_tag[w] == tag) for w in range(ways)])
        hit = match.any()
        way = Signal(max(way_bits, 1))
        for w in range(ways):  # one-hot match, else the oldest way
            with m.If(match[w] | (~hit & (way_age[w] == ways - 1))):
                m.d.comb += way.eq(w)
        used_age = Signal(age_bits)
        for w in range(ways):
            with m.If(way == w):
                m.d.comb += used_age.eq(way_age[w])
        new_ages = Cat(*[Mux(way == w, 0, Mux(way_age[w] < used_age, way_age[w] + 1, way_age[w]))[:age_bits]
                         for w in range(ways)])
        new_tags = Cat(*[Mux(way == w, Cat(tag, Const(1, 1)), tag_read.data[entry * w:entry * (w + 1)])
                         for w in range(ways)])

        # Stage R: the row whose lines are read from the data memory, line after line.
        r_valid = Signal()
        r = Signal(row_line_layout(self._index_bits, self._tag_width, line_bits))
        r_slot = Signal(set_bits + way_bits)
        o_free = ~self.o.valid | self.o.ready
        r_step = r_valid & o_free
        r_last = r.line == lines - 1 if lines > 1 else Const(1)
        r_free = ~r_valid | (r_step & r_last)
        m.d.comb += [row_read.addr.eq(Cat(r.line[:line_bits], r_slot)), row_read.en.eq(r_step)]
        with m.If(r_step):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.index.eq(r.index), self.o.payload.tag.eq(r.tag),
                         self.o.payload.line.eq(r.line), self.o.payload.last.eq(r_last),
                         self.o.payload.hit.eq(r.hit), r.line.eq(r.line + 1)]
            with m.If(r_last):
                m.d.sync += r_valid.eq(0)
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.comb += self.o.payload.data.eq(row_read.data)

        def start_row(source_index, source_tag, slot, was_hit):
            m.d.sync += [r_valid.eq(1), r.index.eq(source_index), r.tag.eq(source_tag), r.line.eq(0),
                         r.hit.eq(was_hit), r_slot.eq(slot)]

        slot = Cat(way[:way_bits], set_index)
        bad_lookup = lookup.index >= self.rows
        bad_update = (update.index >= self.rows) | (update.line >= lines)
        events = {name: Signal(name=f"{name}_event") for name in COUNTERS}
        return SimpleNamespace(**{name: value for name, value in locals().items() if name != "self"})

    def elaborate(self, platform):
        m = Module()
        d = self._datapath(m)
        if self._mshrs > 1:
            mshr_control(self, m, d)
            count_events(m, self, d.events)
            return m
        miss_index = Signal(self._index_bits)
        miss_tag = Signal.like(d.r.tag)
        miss_slot = Signal.like(d.r_slot)
        fill_line = Signal(d.line_bits)
        fill_failed = Signal()  # the fill's read answered SLVERR/DECERR

        # State machine as if-chains on a state register: Amaranth prints m.FSM as a case
        # statement without a default, which Verilator -Wall rejects (CASEINCOMPLETE).
        state = Signal(range(len(_STATES)))
        CLEAR, RUN, FETCH, FILL, WRITE_CMD, WRITE_DATA = range(len(_STATES))
        write = self._write_registers(d, state, WRITE_CMD, WRITE_DATA, RUN)
        with m.If(state == CLEAR):
            self._sweep(m, d, state, RUN)
        with m.Elif(state == RUN):
            m.d.comb += [d.updating.eq(self.u.valid & ~d.r_valid),
                         self.u.ready.eq(~d.r_valid),
                         self.i.ready.eq(~self.u.valid & d.r_free)]
            take_update = self.u.valid & self.u.ready
            take_lookup = self.i.valid & self.i.ready
            with m.If(take_update):
                self._take_update(m, d, write)
            with m.Elif(take_lookup):
                def on_miss():
                    m.d.sync += [miss_index.eq(d.lookup.index), miss_tag.eq(d.lookup.tag),
                                 miss_slot.eq(d.slot), fill_line.eq(0)]
                    m.d.sync += state.eq(FETCH)
                self._take_lookup(m, d, lambda: d.start_row(d.lookup.index, d.lookup.tag, d.slot, 1), on_miss)
        with m.Elif(state == FETCH):
            m.d.comb += [d.reader.cmd.valid.eq(1), d.reader.cmd.payload.address.eq(d.row_address(miss_index)),
                         d.reader.cmd.payload.length.eq(d.lines)]
            with m.If(d.reader.cmd.ready):
                m.d.sync += state.eq(FILL)
        with m.Elif(state == FILL):
            # Earlier hits leave stage R before the fill may overwrite a line they read.
            m.d.comb += [d.reader.data.ready.eq(~d.r_valid),
                         d.row_write.addr.eq(Cat(fill_line, miss_slot)),
                         d.row_write.data.eq(d.reader.data.payload.data),
                         d.row_write.en.eq(d.reader.data.valid & ~d.r_valid)]
            # The reader's error rises before its failing beat leaves (three edges later) and stays
            # until it is idle, so it is seen here by the fill's last beat at the latest.
            failed = fill_failed | d.reader.error
            m.d.sync += fill_failed.eq(failed)
            with m.If(d.reader.data.valid & ~d.r_valid):
                m.d.sync += fill_line.eq(fill_line + 1)
                with m.If(d.reader.data.payload.last):
                    d.start_row(miss_index, miss_tag, miss_slot, 0)
                    m.d.sync += [state.eq(RUN), fill_failed.eq(0)]
                    # A row whose read failed leaves (as zeros) but is not kept: its way goes invalid,
                    # so a later lookup misses and reads HBM again. Nothing else uses the tag port now.
                    self._forget(m, d, miss_slot, failed)
        self._write_through(m, d, write)
        count_events(m, self, d.events)
        return m

    def _sweep(self, m, d, state, run):
        """After reset: make set ``sweep`` invalid with fresh ages, one set a cycle, then go to ``run``."""
        m.d.comb += [d.tag_write.addr.eq(d.sweep), d.tag_write.data.eq(0), d.tag_write.en.eq(1),
                     d.age_write.addr.eq(d.sweep), d.age_write.data.eq(d.fresh_ages), d.age_write.en.eq(1)]
        m.d.sync += d.sweep.eq(d.sweep + 1)
        with m.If(d.sweep == d.sets - 1):
            m.d.sync += state.eq(run)

    def _forget(self, m, d, miss_slot, enable):
        """When ``enable``: way ``miss_slot`` goes invalid (its fill failed); it owns the tag port then."""
        miss_set, miss_way = miss_slot[d.way_bits:], miss_slot[:d.way_bits]
        m.d.comb += [d.tag_read.addr.eq(miss_set), d.tag_write.addr.eq(miss_set),
                     d.tag_write.data.eq(Cat(*[
                         Mux((miss_way == w) if d.ways > 1 else 1, 0,
                             d.tag_read.data[d.entry * w:d.entry * (w + 1)]) for w in range(d.ways)])),
                     d.tag_write.en.eq(enable)]

    def _write_registers(self, d, state, write_cmd, write_data, run):
        """The update being written through and the states it passes (shared by both controls)."""
        pending = Signal(update_layout(self._index_bits, d.line_bits))
        pending_hit = Signal()
        pending_slot = Signal(d.set_bits + d.way_bits + d.line_bits)
        return SimpleNamespace(pending=pending, pending_hit=pending_hit, pending_slot=pending_slot,
                               state=state, WRITE_CMD=write_cmd, WRITE_DATA=write_data, RUN=run)

    def _take_lookup(self, m, d, on_hit, on_miss):
        """A lookup taken on the tag port: counted if bad, else its set's ages (and on a miss its
        tags) written as the golden's; ``on_hit`` and ``on_miss`` add the control's own actions."""
        m.d.comb += d.events["bad_index"].eq(d.bad_lookup)
        with m.If(~d.bad_lookup):
            m.d.comb += [d.age_write.addr.eq(d.set_index), d.age_write.data.eq(d.new_ages),
                         d.age_write.en.eq(d.ways > 1)]
            with m.If(d.hit):
                m.d.comb += d.events["hits"].eq(1)
                on_hit()
            with m.Else():
                m.d.comb += [d.events["misses"].eq(1), d.tag_write.addr.eq(d.set_index),
                             d.tag_write.data.eq(d.new_tags), d.tag_write.en.eq(1)]
                on_miss()

    def _take_update(self, m, d, w):
        """An update taken on the tag port: counted if bad, else held for the write states."""
        m.d.comb += d.events["bad_index"].eq(d.bad_update)
        with m.If(~d.bad_update):
            m.d.sync += [w.pending.eq(d.update), w.pending_hit.eq(d.hit),
                         w.pending_slot.eq(Cat(d.update.line[:d.line_bits], d.slot))]
            m.d.sync += w.state.eq(w.WRITE_CMD)

    def _write_through(self, m, d, w):
        """The write states: the update's line to HBM (one beat), and into the cached copy if present."""
        with m.Elif(w.state == w.WRITE_CMD):
            m.d.comb += [d.writer.cmd.valid.eq(1),
                         d.writer.cmd.payload.address.eq(d.row_address(w.pending.index, w.pending.line)),
                         d.writer.cmd.payload.length.eq(1)]
            with m.If(d.writer.cmd.ready):
                m.d.sync += w.state.eq(w.WRITE_DATA)
        with m.Elif(w.state == w.WRITE_DATA):
            m.d.comb += [d.writer.data.valid.eq(1), d.writer.data.payload.eq(w.pending.data),
                         d.row_write.addr.eq(w.pending_slot), d.row_write.data.eq(w.pending.data)]
            with m.If(d.writer.data.ready):
                m.d.comb += [d.row_write.en.eq(w.pending_hit), d.events["updates"].eq(1)]
                m.d.sync += w.state.eq(w.RUN)

    def _share_axi(self, m, reader, writer):
        """Reads (AR, R) go to the reader, writes (AW, W, B) to the writer: one HBM port."""
        for name, member in self.m_axi.signature.members.items():
            owner = reader if name.startswith(("ar", "r")) else writer
            ours, theirs = getattr(self.m_axi, name), getattr(owner.m_axi, name)
            m.d.comb += ours.eq(theirs) if member.flow == Out else theirs.eq(ours)


register_block(
    "embedding_cache", EmbeddingCache, family="dlrm",
    summary="DLRM: set-associative exact-LRU embedding cache, write-through to HBM over AXI4.",
    golden="golden.dlrm.cache:LruCache",
    drops={
        "bad_index": "lookups and updates with an index or line out of range, dropped (saturating)",
        "hbm_error": ("sticky: an HBM read or write answered SLVERR/DECERR, or a stray R/B response "
                      "was dropped"),
    },
)
