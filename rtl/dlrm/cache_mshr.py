"""The embedding cache's non-blocking control (``mshrs`` > 1): lookups go on while rows are read from HBM.

:class:`rtl.dlrm.EmbeddingCache` builds its memories, HBM engines, tag decision and output stage
(stage R) itself and, when ``mshrs`` is above 1, hands them to :func:`mshr_control` instead of its
blocking state machine. The rules this control keeps are stated in the cache's docstring.
"""

from amaranth.hdl import Array, Cat, Signal
from amaranth.lib.fifo import SyncFIFO

__all__ = ["MSHR_CHOICES", "mshr_control"]

# Waiting entries are a ring indexed by a wrapping pointer, so their number is a power of two.
MSHR_CHOICES = (1, 2, 4, 8, 16)


def _ring(depth, name, width=1):
    return [Signal(width, name=f"wait{k}_{name}") for k in range(depth)]


def mshr_control(cache, m, d):
    """Drive the tag port, the HBM reader and stage R of ``cache`` (namespace ``d`` of its datapath).

    A lookup that misses, or that hits a way some waiting lookup still uses, enters the *waiting
    ring* (``mshrs`` entries, in lookup order); a miss also queues its row's HBM read. Reads return
    in the order they were asked (one AXI ID), so fills complete in that order; a fill marks every
    waiting entry of its way filled, and the ring's oldest entry enters stage R once it is filled.
    """
    depth = cache._mshrs
    slot_bits = d.set_bits + d.way_bits
    valid, filled, hit = _ring(depth, "valid"), _ring(depth, "filled"), _ring(depth, "hit")
    index, tag = _ring(depth, "index", cache._index_bits), _ring(depth, "tag", len(d.r.tag))
    slot = _ring(depth, "slot", slot_bits)
    head, tail = Signal(range(depth)), Signal(range(depth))

    # Misses whose HBM read is not yet asked, and misses whose fill is not complete (in read order).
    m.submodules.issue = issue = SyncFIFO(width=cache._index_bits, depth=depth)
    m.submodules.fills = fills = SyncFIFO(width=slot_bits, depth=depth)
    # After a failed read the reader answers zeros until it is idle, then clears its error: so no
    # new read is asked while the error stands (a stream of misses would otherwise keep it busy).
    m.d.comb += [d.reader.cmd.valid.eq(issue.r_rdy & ~d.reader.error),
                 d.reader.cmd.payload.address.eq(d.row_address(issue.r_data)),
                 d.reader.cmd.payload.length.eq(d.lines),
                 issue.r_en.eq(d.reader.cmd.valid & d.reader.cmd.ready)]

    state = Signal(range(4))
    CLEAR, RUN, WRITE_CMD, WRITE_DATA = range(4)
    write = cache._write_registers(d, state, WRITE_CMD, WRITE_DATA, RUN)

    # The fill: beats into the way its miss claimed. It waits while stage R reads that way (a hit
    # taken before the miss evicted the row) and while an update writes the data memory.
    fill_slot, fill_line, fill_failed = fills.r_data, Signal(d.line_bits), Signal()
    m.d.comb += d.reader.data.ready.eq(~(d.r_valid & (d.r_slot == fill_slot)) & (state != WRITE_DATA))
    fill_go = d.reader.data.valid & d.reader.data.ready
    failed = fill_failed | d.reader.error
    done = fill_go & d.reader.data.payload.last
    with m.If(fill_go):
        m.d.comb += [d.row_write.addr.eq(Cat(fill_line, fill_slot)),
                     d.row_write.data.eq(d.reader.data.payload.data), d.row_write.en.eq(1)]
        m.d.sync += [fill_line.eq(fill_line + 1), fill_failed.eq(failed)]
        with m.If(d.reader.data.payload.last):
            m.d.comb += fills.r_en.eq(1)
            m.d.sync += fill_failed.eq(0)
    for k in range(depth):
        with m.If(done & (slot[k] == fill_slot)):
            m.d.sync += filled[k].eq(1)
    forget = done & failed  # the failed row's way goes invalid; the tag port is the fill's this cycle

    # The ring's oldest entry enters stage R once filled, before any new hit.
    head_go = Array(valid)[head] & Array(filled)[head] & d.r_free
    with m.If(head_go):
        d.start_row(Array(index)[head], Array(tag)[head], Array(slot)[head], Array(hit)[head])
        m.d.sync += head.eq(head + 1)
    for k in range(depth):
        with m.If(head_go & (head == k)):
            m.d.sync += valid[k].eq(0)

    # The way the lookup or update on the tag port uses, against the waiting entries.
    uses = [valid[k] & (slot[k] == d.slot) for k in range(depth)]
    locked = Cat(*uses).any()
    joins_filled = Cat(*[uses[k] & filled[k] for k in range(depth)]).any() | (done & (fill_slot == d.slot))
    full = Array(valid)[tail]
    direct = d.hit & ~locked  # a hit on a way nobody waits for leaves at once
    # A miss whose victim way is still waited for stalls, so that way is never refilled under its waiters.
    may_wait = ~full & (d.hit | ~locked)
    lookup_ok = d.bad_lookup | (direct & d.r_free & ~head_go) | (~direct & may_wait)
    # An update of a cached row waits until no waiting entry and not stage R use its way.
    update_ok = ~(d.hit & (locked | (d.r_valid & (d.r_slot == d.slot))))

    with m.If(state == CLEAR):
        cache._sweep(m, d, state, RUN)
    with m.Elif(state == RUN):
        m.d.comb += [d.updating.eq(cache.u.valid), cache.u.ready.eq(~forget & update_ok),
                     cache.i.ready.eq(~cache.u.valid & ~forget & lookup_ok)]
        with m.If(cache.u.valid & cache.u.ready):
            cache._take_update(m, d, write)
        with m.Elif(cache.i.valid & cache.i.ready):
            def on_miss():  # the row's read queued, and its fill awaited in read order
                m.d.comb += [issue.w_data.eq(d.lookup.index), issue.w_en.eq(1),
                             fills.w_data.eq(d.slot), fills.w_en.eq(1)]
            cache._take_lookup(m, d, lambda: None, on_miss)
            with m.If(~d.bad_lookup):
                with m.If(direct):
                    d.start_row(d.lookup.index, d.lookup.tag, d.slot, 1)
                with m.Else():
                    m.d.sync += tail.eq(tail + 1)
                    for k in range(depth):
                        with m.If(tail == k):
                            m.d.sync += [valid[k].eq(1), index[k].eq(d.lookup.index),
                                         tag[k].eq(d.lookup.tag), slot[k].eq(d.slot), hit[k].eq(d.hit),
                                         filled[k].eq(d.hit & joins_filled)]
    cache._write_through(m, d, write)
    with m.If(forget):
        cache._forget(m, d, fill_slot, 1)
