"""A regional unit's fetches at the GCU: one per slot, asked again for a damaged or missing reply."""

from amaranth.hdl import Cat, Signal

from ..lib.counters import add_saturating, pulse_count
from .fetch_slots import lookup

__all__ = ["FetchRetry"]


class FetchRetry:
    """The fetches a regional unit has open at the GCU, one per slot, and their replies.

    A fetch of partition ``p`` occupies slot ``p mod slots`` until its reply is complete. The
    GCU sends a reply's ``chunks`` lines in order, so a reply is complete when its last line
    arrives intact and in order after every other: only then does the partition's version
    advance. A reply line is **solicited** when its slot has a fetch open for its partition;
    any other intact line (:attr:`accept` low) is the caller's to drop and count: it neither
    writes the copy nor advances a version.

    The slot asks again (``resend``) when the last line arrives after a gap (a line was lost or
    damaged), or when no line has come for ``cycles`` cycles (the whole reply, or its last line,
    was lost; or the GCU still holds the request early, which a repeat does not disturb). After
    ``limit`` re-asks of one fetch the slot gives up: the fetch is counted in ``lost`` and the
    slot is freed, so the unit's other fetches go on. ``retries`` counts the re-asks sent.

    Parameters
    ----------
    m : Module
        The unit's module.
    slots, partitions, chunks : int
        As the unit's.
    cycles : int
        Cycles without a line of an open fetch's reply before it is asked again.
    limit : int
        Re-asks of one fetch before it is given up.
    retries, lost : Signal(16)
        Saturating counters.
    """

    def __init__(self, m, *, slots, partitions, chunks, cycles, limit, retries, lost):
        self._m, self._slots, self._chunks = m, slots, chunks
        self._slot_bits = (slots - 1).bit_length()
        self.open = Signal(slots)
        self.resend = Signal(slots)
        self._asked = [Signal(range(partitions), name=f"asked{s}") for s in range(slots)]
        self._expect = [Signal(range(chunks + 1), name=f"expect{s}") for s in range(slots)]
        self._gap = [Signal(name=f"gap{s}") for s in range(slots)]
        self._timer = [Signal(range(cycles), name=f"timer{s}") for s in range(slots)]
        self._tries = [Signal(range(limit + 1), name=f"tries{s}") for s in range(slots)]
        self._cycles, self._limit = cycles, limit
        self._retries, self._lost = retries, lost
        self.accept = Signal()
        self.complete = Signal()

    def slot_of(self, partition):
        return partition[:self._slot_bits] if self._slots > 1 else 0

    def requests(self, *, head, head_valid, ready):
        """The next request: a re-ask first, else the queue's ``head``; returns ``(partition, valid, take)``.

        ``take`` pulses when the queue's head went out (the caller pops it); ``ready`` is the
        network's.
        """
        m, slots = self._m, self._slots
        partition = Signal(len(head), name="ask_partition")
        again = Signal(range(slots), name="again_slot") if slots > 1 else 0
        for s in reversed(range(slots)):
            with m.If(self.resend[s]):
                if slots > 1:
                    m.d.comb += again.eq(s)
        retrying = self.resend.any()
        fresh_ok = head_valid & ~self.open.bit_select(self.slot_of(head), 1)
        valid = retrying | fresh_ok
        take = ~retrying & fresh_ok & ready
        m.d.comb += partition.eq(head)
        with m.If(retrying):
            m.d.comb += partition.eq(lookup(self._asked, again) if slots > 1 else self._asked[0])
        sent_again = retrying & ready
        with m.If(sent_again & ~self._retries.all()):
            m.d.sync += self._retries.eq(self._retries + 1)
        for s in range(slots):
            with m.If(sent_again & (again == s)):
                m.d.sync += [self.resend[s].eq(0), self._expect[s].eq(0), self._gap[s].eq(0),
                             self._timer[s].eq(0)]
            with m.If(take & (self.slot_of(head) == s)):
                m.d.sync += [self.open[s].eq(1), self._asked[s].eq(head), self._expect[s].eq(0),
                             self._gap[s].eq(0), self._timer[s].eq(0), self._tries[s].eq(0)]
        return partition, valid, take

    def replies(self, *, valid, partition, line):
        """An intact reply line that fits (``valid``): sets :attr:`accept` and :attr:`complete`."""
        m, last = self._m, self._chunks - 1
        slot = self.slot_of(partition)
        lost, solicited = [], []
        for s in range(self._slots):
            mine = valid & (slot == s) & self.open[s] & (self._asked[s] == partition)
            solicited.append(mine)
            failed = Signal(name=f"failed{s}")
            with m.If(mine & ~self.resend[s]):
                in_order = line == self._expect[s]
                m.d.sync += [self._timer[s].eq(0), self._expect[s].eq(line + 1)]
                with m.If(~in_order):
                    m.d.sync += self._gap[s].eq(1)
                with m.If(line == last):
                    with m.If(in_order & ~self._gap[s]):
                        m.d.comb += self.complete.eq(1)
                        m.d.sync += self.open[s].eq(0)
                    with m.Else():
                        m.d.comb += failed.eq(1)
            with m.Elif(self.open[s] & ~self.resend[s]):
                m.d.sync += self._timer[s].eq(self._timer[s] + 1)
                with m.If(self._timer[s] == self._cycles - 1):
                    m.d.comb += failed.eq(1)
            give_up = failed & (self._tries[s] == self._limit)
            with m.If(failed & ~give_up):
                m.d.sync += [self.resend[s].eq(1), self._tries[s].eq(self._tries[s] + 1)]
            with m.If(give_up):
                m.d.sync += self.open[s].eq(0)
            lost.append(give_up)
        m.d.comb += self.accept.eq(Cat(*solicited).any())
        # Saturating: several slots may give up in one cycle.
        add_saturating(m, self._lost, pulse_count(*lost), name="lost_total")
