"""A small content-addressable memory: unique keys filled in order, matched in one cycle."""

from amaranth.hdl import Cat, Mux, Signal

__all__ = ["one_hot_index", "KeyLookup"]


def one_hot_index(bits):
    """The index of the set bit of ``bits``, which has at most one (0 when none).

    An OR per index bit, one LUT level per four inputs, where a priority chain would be as deep
    as ``bits`` is wide: the CAMs' keys are unique, so a match is one-hot.
    """
    width = max(1, (len(bits) - 1).bit_length())
    return Cat(*[Cat(*[bits[k] for k in range(len(bits)) if (k >> b) & 1]).any() for b in range(width)])


class KeyLookup:
    """A CAM of unique keys filled in order, and the lookup register in front of it (builds into ``m``).

    A lookup taken from ``i`` is matched against the keys as it enters the register and used a
    cycle later, so the compare ends at a register. The key inserted in that cycle is forwarded
    to it. The block drives ``take`` (the held lookup is used) and ``inserting`` (used as a new
    key, at entry ``count``), calls :meth:`insert` where a new key is taken and :meth:`clear`
    where the table is emptied: the clear voids a match made in its own cycle, as its
    assignment comes later.

    With ``stages=2`` a front register comes first: the keys are compared as a lookup enters
    it and the registered match vector is reduced to ``found`` and ``tag`` as it moves on to
    the held register, a cycle more of latency, the same throughput. Between the two a key can
    be inserted only in the cycle the lookup enters the front register and in the cycle it
    leaves it (an insertion takes the held lookup, which is what moves the front on), so a
    compare with the held key in each of those two cycles forwards what the vector misses.

    Parameters
    ----------
    i : stream interface
        The lookups (its ``ready`` is driven here).
    keys : list of Signal
        The table's entries; ``key_of(keys[k])`` and ``key_of(payload)`` are the compared values.
    count : Signal
        Entries in use.
    stages : {1, 2}
        Register stages from ``i`` to ``held``.

    Attributes
    ----------
    held, valid, found, tag
        The held lookup, whether there is one, whether its key is in the table, and its entry.
    """

    def __init__(self, m, *, i, keys, key_of, count, take, inserting, stages=1):
        if stages not in (1, 2):
            raise ValueError(f"stages must be 1 or 2, not {stages!r}")
        self._m, self._keys, self._key_of, self._count = m, keys, key_of, count
        capacity = len(keys)
        incoming = i.payload
        self.held = Signal.like(incoming)
        self.valid, self.found, self.tag = Signal(), Signal(), Signal(capacity.bit_length() - 1)
        # Entries below ``count``, as flags: no comparator on the match path.
        self._used = used = Signal(capacity)
        match = Cat(*[used[k] & (key_of(keys[k]) == key_of(incoming)) for k in range(capacity)])
        forwarded = inserting & (key_of(self.held) == key_of(incoming))
        if stages == 2:
            self._two_stages(m, i, match, forwarded, take, inserting)
            return
        m.d.comb += i.ready.eq(~self.valid | take)
        with m.If(i.valid & i.ready):
            m.d.sync += [self.held.eq(incoming), self.valid.eq(1), self.found.eq(match.any() | forwarded),
                         self.tag.eq(Mux(forwarded, count[:len(self.tag)], one_hot_index(match)))]
        with m.Elif(take):
            m.d.sync += self.valid.eq(0)

    def _two_stages(self, m, i, match, forwarded, take, inserting):
        count, key_of = self._count, self._key_of
        front, front_valid = Signal.like(i.payload, name="front"), Signal(name="front_valid")
        front_match, front_forwarded = Signal(len(match), name="front_match"), Signal(name="front_forwarded")
        front_tag = Signal.like(self.tag, name="front_tag")
        held_free = ~self.valid | take
        front_ready = ~front_valid | held_free
        m.d.comb += i.ready.eq(front_ready)
        with m.If(front_ready):  # forwarded: the held key, inserted in this cycle at entry ``count``
            m.d.sync += [front.eq(i.payload), front_valid.eq(i.valid), front_match.eq(match),
                         front_forwarded.eq(forwarded), front_tag.eq(count[:len(self.tag)])]
        # The held key inserted as the front lookup moves on.
        late = inserting & (key_of(self.held) == key_of(front))
        # The front's match is gated by the entries in use rather than voided by a clear: entries
        # are only added between clears, so the gate changes nothing else, and a clear no longer
        # reaches into the front register (ECP5: the fan-out's end ran through the clear into
        # ``front_match``, 123 MHz).
        used = self._used
        still = Signal.like(front_match, name="front_still_used")
        m.d.comb += still.eq(front_match & used)
        forwarded_kept = front_forwarded & used.bit_select(front_tag, 1)
        with m.If(held_free):
            m.d.sync += [self.held.eq(front), self.valid.eq(front_valid),
                         self.found.eq(still.any() | forwarded_kept | late),
                         self.tag.eq(Mux(late, count[:len(self.tag)],
                                         Mux(front_forwarded, front_tag, one_hot_index(front_match))))]

    @property
    def used(self):
        """The entries in use, as flags (entry ``k`` is in use when ``k < count``)."""
        return self._used

    def insert(self):
        """The held lookup's key goes into entry ``count`` (the block increments ``count``)."""
        self._m.d.sync += self._used.eq(Cat(1, self._used))
        for k, key in enumerate(self._keys):  # slot by slot: a variable-index write is an incomplete case
            with self._m.If(self._count == k):
                self._m.d.sync += self._key_of(key).eq(self._key_of(self.held))

    def clear(self):
        """Empty the table (the block resets ``count``).

        With two stages the front lookup's match was made against the old keys too; it is gated
        by the entries in use as it moves on, which the clear empties.
        """
        self._m.d.sync += [self.found.eq(0), self._used.eq(0)]
