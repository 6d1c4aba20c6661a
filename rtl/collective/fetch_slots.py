"""What the global and the regional control units share: versioned partitions served to fetches.

Both units keep each partition's lines in a memory with a version (the reductions it holds, mod
256) and answer a leaf's fetch of ``(partition, version)`` from it once the partition reaches that
version, through one request slot per leaf and reduction slot. :func:`serve_fetches` builds that
logic into a unit's module; :func:`line_store` is the memory the reduced (or fetched) lines go to.
"""

from typing import NamedTuple

from amaranth.hdl import Array, Const, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

from ..lib.counters import add_saturating, pulse_count, saturating_count
from ..net.packet import LINE_BITS, NODE_BITS, Packet, PacketType, checksum, sealed

__all__ = ["VERSION_BITS", "FETCH_COUNTERS", "CHUNK_FIELD_BITS", "ReadPort", "Intact", "lookup", "line_store",
           "serve_fetches", "feed_reduction", "round_robin"]

VERSION_BITS = 8
FETCH_COUNTERS = (
    "bad_requests", "early_requests", "stale_requests", "duplicate_requests", "repeated_requests")
# A gradient line's ``line`` field: the chunk in its low 16 bits, the iteration tag above.
CHUNK_FIELD_BITS = 16


def lookup(signals, index):
    """``signals[index]`` for an index known to be in range (a full case: Verilator's lint wants one)."""
    bits = max(1, (len(signals) - 1).bit_length())
    padded = list(signals) + [Const(0, len(signals[0]))] * ((1 << bits) - len(signals))
    return Array(padded)[index[:bits]]


class ReadPort(NamedTuple):
    """A read port of stored partitions: ``addr``, ``en``, ``data``; ``stored``: a partition is complete."""

    addr: object
    en: object
    data: object
    stored: object


class Intact:
    """Check bytes of received packets: :meth:`check` a channel, then :meth:`count` the broken ones.

    Parameters
    ----------
    m : Module
        The unit's module.
    """

    def __init__(self, m):
        self._m = m
        self._broken = []

    def check(self, rx):
        """Whether the head of ``rx`` (a stream of packets) is intact; a broken one taken is counted."""
        broken = rx.valid & (checksum(rx.payload) != 0)
        self._broken.append(broken & rx.ready)
        return ~broken

    def count(self, counter):
        """Add the broken packets taken each cycle to ``counter``, saturating exactly at its largest value."""
        add_saturating(self._m, counter, pulse_count(*self._broken), name="malformed_total")


def feed_reduction(m, unit, rx, intact, *, partitions, late):
    """Gradient lines from ``rx`` (data packets: ``src`` leaf, ``range`` partition, ``line`` chunk and tag).

    ``line`` carries the chunk in bits 0 to 15 and the line's iteration tag in bits 16 to 23: the
    version its partition reaches with this reduction (the sender's iteration + 1, mod 256, as a
    fetch's ``first``). A line of a partition in range whose tag is not the partition's closed
    reductions + 1 (a late duplicate of a reduction already closed, or a tag out of step) is dropped
    and counted in ``late``; a chunk field past the unit's chunk width reaches the unit as a bad
    chunk. Returns the reductions closed per partition (mod 256), for the unit's outgoing tags.
    """
    data = rx.payload
    line = data.data_reply()
    chunk, tag = line.line[:CHUNK_FIELD_BITS], line.line[CHUNK_FIELD_BITS:CHUNK_FIELD_BITS + VERSION_BITS]
    chunk_bits = len(unit.i.payload.chunk)
    rounds = [Signal(VERSION_BITS, name=f"closed{p}") for p in range(partitions)]
    for p in range(partitions):
        with m.If(unit.closed & (unit.closed_partition == p)):
            m.d.sync += rounds[p].eq(rounds[p] + 1)
    m.d.comb += [unit.i.payload.leaf.eq(data.header.src), unit.i.payload.partition.eq(data.header.range),
                 unit.i.payload.chunk.eq(chunk), unit.i.payload.data.eq(line.data)]
    with m.If(chunk[chunk_bits:].any()):
        m.d.comb += unit.i.payload.chunk.eq((1 << chunk_bits) - 1)
    ok = intact.check(rx)
    known = data.header.range < partitions
    out_of_step = rx.valid & ok & known & (tag != (lookup(rounds, data.header.range) + 1)[:VERSION_BITS])
    m.d.comb += [unit.i.valid.eq(rx.valid & ok & ~out_of_step),
                 rx.ready.eq(unit.i.ready | ~ok | out_of_step)]
    saturating_count(m, late, out_of_step)
    return rounds


def line_store(m, *, partitions, chunks, valid, partition, chunk, data, last):
    """A memory of ``partitions * chunks`` lines written with ``data`` when ``valid``; its :class:`ReadPort`.

    ``stored`` pulses with the write of a partition's ``last`` line.
    """
    m.submodules.results = results = Memory(shape=LINE_BITS, depth=partitions * chunks, init=[])
    store, fetch = results.write_port(), results.read_port()
    m.d.comb += [store.addr.eq(partition * chunks + chunk), store.data.eq(data), store.en.eq(valid)]
    stored = wiring.Signature({"valid": Out(1), "payload": Out(len(partition))}).create()
    m.d.comb += [stored.valid.eq(valid & last), stored.payload.eq(partition)]
    return ReadPort(fetch.addr, fetch.en, fetch.data, stored)


def serve_fetches(m, *, requests, ok, version, read, tx, leaves, partitions, chunks, slots, node, counters):
    """Fetches (RDMA packets on ``requests``) wait in one slot per leaf, and are answered from ``read``.

    A fetch of partition ``range`` at version ``first`` (mod 256) from leaf ``src`` waits in entry
    ``(src, range mod slots)`` until ``version[range]`` equals it, then the partition's lines go
    out on ``tx`` as data packets (``src`` = ``node``), one per cycle; servable entries are
    served in round robin (the first after the one served last), so a servable fetch is answered
    after at most one service of each other entry, whatever the other leaves ask. Counted in
    ``counters`` (signals by :data:`FETCH_COUNTERS` name): a leaf or partition id out of range
    (``bad_requests``), a second fetch in a waiting entry (``duplicate_requests``), a version
    already passed (``stale_requests``: its lines are gone), and fetches that had to wait
    (``early_requests``). A fetch equal to the one its entry holds (a requester asking again)
    changes nothing and is counted in ``repeated_requests``: it is
    answered once, with the first. ``ok`` is the request's integrity.
    """
    request = requests.payload
    wanted_of = request.rdma().first[:VERSION_BITS]
    m.d.comb += requests.ready.eq(1)
    # One entry per leaf and reduction slot: a leaf has at most ``slots`` partitions open.
    slot_bits = (slots - 1).bit_length()
    entries = leaves * slots
    waiting = Signal(entries)
    slot_partition = [Signal(range(partitions), name=f"wants_partition{e}") for e in range(entries)]
    slot_version = [Signal(VERSION_BITS, name=f"wants_version{e}") for e in range(entries)]
    leaf = request.header.src
    entry = Signal(range(1 << (NODE_BITS + slot_bits)))
    m.d.comb += entry.eq(leaf if slots == 1 else (leaf << slot_bits) | request.header.range[:slot_bits])
    arrived = requests.valid & ok
    bad = arrived & ((leaf >= leaves) | (request.header.range >= partitions))
    held = waiting.bit_select(entry, 1)
    same = ((lookup(slot_partition, entry) == request.header.range)
            & (lookup(slot_version, entry) == wanted_of))
    repeated = arrived & ~bad & held & same
    duplicate = arrived & ~bad & held & ~same
    behind = (lookup(version, request.header.range) - wanted_of)[:VERSION_BITS]
    stale = arrived & ~bad & ~held & (behind != 0) & ~behind[-1]
    early = arrived & ~bad & ~held & behind[-1]
    take = arrived & ~bad & ~held & ~stale
    events = {"bad_requests": bad, "duplicate_requests": duplicate, "stale_requests": stale,
              "early_requests": early, "repeated_requests": repeated}
    for name, event in events.items():
        saturating_count(m, counters[name], event)

    # Serve the waiting entries whose partitions have reached their versions in round robin: the
    # first servable entry after the one last served, wrapping. Lowest id first let a leaf that keeps
    # fetching starve every leaf above it; round robin answers a servable fetch within one service
    # of every other entry, without the timestamps oldest-first needs. ``after`` (the entries past
    # the one served, decoded from the ``serving`` register into a register) is ready by the next
    # grant, at least two cycles on; the grant itself stays registered (``serving``). One read
    # per cycle; the read port's data register is the output register (its enable stalls it).
    active = Signal()
    serving = Signal(range(entries), init=entries - 1)  # so the first grant goes to the lowest
    chunk = Signal(range(chunks))
    servable = Signal(entries)
    for e in range(entries):
        m.d.comb += servable[e].eq(waiting[e] & (lookup(version, slot_partition[e]) == slot_version[e]))
    chosen = round_robin(m, servable, serving)
    served = Signal(entries)
    partition = lookup(slot_partition, serving)
    out_valid, out_leaf = Signal(), Signal(NODE_BITS)
    out_partition, out_chunk = Signal(range(partitions)), Signal(range(chunks))
    advance = ~out_valid | tx.ready
    m.d.comb += [read.addr.eq(partition * chunks + chunk), read.en.eq(advance)]
    with m.If(advance):
        m.d.sync += [out_valid.eq(active), out_leaf.eq(serving >> slot_bits), out_partition.eq(partition),
                     out_chunk.eq(chunk)]
        with m.If(active):
            m.d.sync += chunk.eq(chunk + 1)
            with m.If(chunk == chunks - 1):
                m.d.sync += active.eq(0)
                m.d.comb += served.eq(Const(1, entries) << serving)
    with m.If(~active & servable.any()):
        m.d.sync += [serving.eq(chosen), chunk.eq(0), active.eq(1)]
    reply = Signal(Packet)
    line = reply.data_reply()
    m.d.comb += [reply.header.ptype.eq(PacketType.DATA), reply.header.dst.eq(out_leaf),
                 reply.header.src.eq(node), reply.header.range.eq(out_partition),
                 line.line.eq(out_chunk), line.last.eq(out_chunk == chunks - 1), line.data.eq(read.data),
                 tx.payload.eq(sealed(reply)), tx.valid.eq(out_valid)]
    taken = Signal(entries)
    with m.If(take):
        m.d.comb += taken.eq(Const(1, entries) << entry)
        for e in range(entries):
            with m.If(entry == e):
                m.d.sync += [slot_partition[e].eq(request.header.range), slot_version[e].eq(wanted_of)]
    m.d.sync += waiting.eq((waiting & ~served) | taken)


def round_robin(m, requests, last):
    """The index of the first set bit of ``requests`` after ``last`` (a register), wrapping round.

    Which bits come after ``last`` is itself a register, decoded from ``last``: a grant must come
    at least two cycles after ``last`` changed (one to decode it), which a grant that starts a
    service of one or more cycles guarantees. The index is combinational; register it as the grant.
    """
    after = Signal(len(requests))
    m.d.sync += [after[e].eq(last < e) for e in range(1, len(requests))]  # none is before bit 0
    index = Signal(range(len(requests)))
    for bits in (requests, requests & after):  # the later assignment wins: after ``last`` first
        with m.If(bits.any()):
            for e in reversed(range(len(requests))):
                with m.If(bits[e]):
                    m.d.comb += index.eq(e)
    return index
