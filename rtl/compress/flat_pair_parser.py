"""Parser and checker of the flat wire stream (paper mode): one checked pair per cycle out."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import check_choice
from .chunk_parser import ERROR_NAMES, errors_layout
from .layouts import VALUE_WIDTHS, widen_f16, wire_layout
from .scatter import LANE_CHOICES

__all__ = ["FlatPairParser", "flat_pair_layout"]


def flat_pair_layout():
    """One accepted pair: shard-relative ``index`` and the f32 bit pattern of its (widened) ``value``."""
    return data.StructLayout({"index": 32, "value": 32})


class FlatPairParser(wiring.Component):
    """Checks the pair words of a flat wire stream and emits the accepted pairs one per cycle.

    A transfer (up to the wire beat with ``last``) is a flat stream of :mod:`golden.compress.layout`:
    pair words only, their number declared in the pair-count register ``declared``. The words are
    taken in order, one per cycle, and checked as :func:`golden.compress.scatter_stream` does for a
    flat stream (``chunk_size=None``, ``pair_count=declared``). A dropped word is counted once, under
    the first check it fails:

    1. ``excess_pairs``: the word comes after the ``declared`` pairs;
    2. ``out_of_range``: ``index >= size``;
    3. ``unsorted`` (only with ``sorted``): ``index`` is below the highest index accepted so far
       (equal indices are in order).

    At the end of the transfer ``missing`` = ``declared`` minus the words received, if positive.
    ``chunk_violation`` stays 0 (a flat stream has no chunks). Accepted pairs leave on ``o`` in
    stream order, f16 values widened exactly to f32.

    Parameters
    ----------
    lanes : int
        Words per wire beat: 1, 2, 4, 8 or 16.
    value_format : {"f32", "f16"}
        Pair value encoding.

    Attributes
    ----------
    i : In(stream.Signature(wire_layout(lanes)))
        Wire beats; ``count`` words valid, ``last`` ends the transfer. A beat with ``count`` = 0 is
        allowed (an empty transfer is one such beat with ``last``).
    o : Out(stream.Signature(flat_pair_layout()))
        Accepted pairs, at most one per cycle.
    size, declared : In(32)
        Shard length and pair-count register; held stable for the whole transfer.
    sorted : In(1)
        The sender promised non-decreasing indices; held stable for the whole transfer.
    clear : In(1)
        Clears the counters (pulse before a transfer starts).
    errors : Out(errors_layout())
        The five counters of :data:`~rtl.compress.chunk_parser.ERROR_NAMES`. No saturation is needed:
        a flat transfer holds fewer than 2**33 words.
    status : Out(5)
        Bit ``k`` set while counter ``k`` is non-zero (``golden.compress.ScatterStatus`` positions).
    done : Out(1)
        Pulse one cycle after the ``last`` beat is taken: the counters are final.

    Notes
    -----
    Throughput: one word per cycle, accepted or dropped; a beat with ``count`` = 0 takes one cycle.
    Latency: a word is on ``o`` the cycle after it is checked.
    """

    def __init__(self, *, lanes=8, value_format="f32"):
        self._lanes = check_choice("lanes", lanes, LANE_CHOICES)
        self._value_format = check_choice("value_format", value_format, tuple(VALUE_WIDTHS))
        super().__init__({
            "i": In(stream.Signature(wire_layout(lanes))),
            "o": Out(stream.Signature(flat_pair_layout())),
            "size": In(32),
            "declared": In(32),
            "sorted": In(1),
            "clear": In(1),
            "errors": Out(errors_layout()),
            "status": Out(len(ERROR_NAMES)),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self._lanes
        beat = self.i.payload

        lane = Signal(range(lanes))
        seen = Signal(33)           # words taken in this transfer
        highest = Signal(32)        # highest accepted index (0 before any: nothing is below 0)
        finishing = Signal()
        counters = Signal(errors_layout())

        word = beat.words[lane]
        index = word[0:32]
        value = widen_f16(word[32:48]) if self._value_format == "f16" else word[32:64]

        out_free = ~self.o.valid | self.o.ready
        step = self.i.valid & out_free
        in_word = lane < beat.count
        # The beat ends at its last valid word (or at once when it holds none).
        beat_end = ~in_word | (lane == beat.count - 1) | (lane == lanes - 1)

        excess = seen >= self.declared
        out_of_range = ~excess & (index >= self.size)
        unsorted = ~excess & ~out_of_range & self.sorted & (index < highest)
        accept = ~excess & ~out_of_range & ~unsorted
        take = step & in_word

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(take):
            m.d.sync += seen.eq(seen + 1)
            with m.If(accept):
                m.d.sync += [self.o.valid.eq(1), self.o.payload.index.eq(index),
                             self.o.payload.value.eq(value)]
                with m.If(index > highest):
                    m.d.sync += highest.eq(index)
            m.d.sync += [
                counters.excess_pairs.eq(counters.excess_pairs + excess),
                counters.out_of_range.eq(counters.out_of_range + out_of_range),
                counters.unsorted.eq(counters.unsorted + unsorted),
            ]
        with m.If(step):
            with m.If(beat_end):
                m.d.comb += self.i.ready.eq(1)
                m.d.sync += lane.eq(0)
            with m.Else():
                m.d.sync += lane.eq(lane + 1)

        # The cycle after the last beat is taken `seen` is final, and the counters a cycle later.
        done = Signal()
        m.d.sync += [finishing.eq(step & beat_end & beat.last), done.eq(finishing)]
        with m.If(finishing):
            m.d.sync += counters.missing.eq(Mux(seen < self.declared, self.declared - seen, 0))
        m.d.comb += self.done.eq(done)

        with m.If(self.clear):
            m.d.sync += [counters.eq(0), seen.eq(0), highest.eq(0), lane.eq(0), finishing.eq(0)]

        m.d.comb += self.errors.eq(counters)
        for bit, name in enumerate(ERROR_NAMES):
            m.d.comb += self.status[bit].eq(getattr(counters, name) != 0)
        return m
