"""Stream pieces: a FIFO as two streams, a round-robin merge, and the OR of many conditions."""

import functools
import operator

from amaranth.hdl import Cat, Const, Mux, Shape, Signal
from amaranth.lib import stream
from amaranth.lib.fifo import SyncFIFOBuffered

__all__ = ["Queue", "merge", "any_of", "any_of_chain"]


class Queue:
    """A :class:`~amaranth.lib.fifo.SyncFIFOBuffered` of ``shape`` items as two streams of that shape.

    ``w`` (write side) and ``r`` (read side) are ``stream.Interface`` objects whose payloads
    are views of ``shape``; ``level`` counts the entries.

    ``credited=True`` is for a queue filled by a sender that holds one credit per entry (a
    credit returns when an entry is read): it gets one more entry than ``depth``, because a
    ``SyncFIFOBuffered`` refuses a write while its last entry moves to the output register
    (its ``w_rdy`` is ``level < depth`` only once that move is done), and a credited sender
    may write exactly then. Such a sender writes on its credit, not on ``w.ready``, so a write
    the FIFO refuses would be lost: ``overflow`` (credited queues only; constant 0 otherwise) is a
    sticky flag set by that write, for the block to export as a drop flag. A sender that keeps
    to its credits never sets it.
    """

    def __init__(self, m, name, shape, depth, *, credited=False):
        self.fifo = SyncFIFOBuffered(width=Shape.cast(shape).width, depth=depth + int(credited))
        m.submodules[name] = self.fifo
        self.w = stream.Signature(shape).flip().create()
        self.r = stream.Signature(shape).create()
        m.d.comb += [
            self.fifo.w_data.eq(self.w.payload), self.fifo.w_en.eq(self.w.valid),
            self.w.ready.eq(self.fifo.w_rdy),
            self.r.payload.eq(self.fifo.r_data), self.r.valid.eq(self.fifo.r_rdy),
            self.fifo.r_en.eq(self.r.ready),
        ]
        self.level = self.fifo.level
        self.overflow = Signal(name=f"{name}_overflow")
        if credited:
            with m.If(self.w.valid & ~self.fifo.w_rdy):
                m.d.sync += self.overflow.eq(1)


def merge(m, name, inputs, out):
    """Round-robin merge of the streams ``inputs`` into ``out`` (combinational, no buffering).

    A waiting input is served within ``len(inputs)`` transfers of ``out``.
    """
    turn = Signal(range(len(inputs)), name=f"{name}_turn")
    chosen = Signal(range(len(inputs)), name=f"{name}_chosen")
    # The first valid input at or after the turn, else the first valid one.
    for phase in (0, 1):  # later assignments win: phase 1 overrides
        for index in reversed(range(len(inputs))):
            later = (turn <= index) if phase and index < len(inputs) - 1 else 1
            condition = inputs[index].valid & later
            with m.If(condition):
                m.d.comb += chosen.eq(index)
    for index, source in enumerate(inputs):
        with m.If(chosen == index):
            m.d.comb += [out.valid.eq(source.valid), out.payload.eq(source.payload),
                         source.ready.eq(out.ready)]
    with m.If(out.valid & out.ready):
        m.d.sync += turn.eq(Mux(chosen == len(inputs) - 1, 0, chosen + 1))


def any_of(values):
    """The OR of ``values`` as one reduction (0 when there are none)."""
    return Cat(*values).any() if values else Const(0)


def any_of_chain(values):
    """The OR of ``values`` as a chain of two-input ORs from a constant 0 (0 when there are none).

    The same function as :func:`any_of`; the blocks that were written with a chain keep it, so that
    their netlists do not change.
    """
    return functools.reduce(operator.or_, values, Const(0, 1))
