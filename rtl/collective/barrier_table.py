"""The global barrier table: no leaf runs more than one iteration ahead of the slowest."""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.counters import saturating_count
from ..registration import Param, Parameterized, register_block
from .reduction_table import COLLECTIVE_COUNTER_BITS

__all__ = ["BarrierTable", "BarrierAck", "ITERATION_BITS"]

LEAF_BITS = 4
ITERATION_BITS = 8


class BarrierAck(data.Struct):
    """An acknowledgement: ``leaf`` may go on; it has completed ``iteration`` iterations (mod 256)."""

    leaf: LEAF_BITS
    iteration: ITERATION_BITS


class BarrierTable(Parameterized, wiring.Component):
    """Tracks each leaf's completed iterations and acknowledges a barrier only within one of the slowest.

    The table holds ``base`` (iterations the slowest leaf has completed) and per leaf an ``ahead``
    bit (it has completed ``base + 1``) and a ``pending`` bit. A barrier from a leaf at ``base``
    sets its ``ahead`` bit and makes its acknowledgement due; from a leaf already ahead, it is held
    (``pending``) until every leaf is ahead, when ``base`` advances, ``ahead`` takes the pending bits
    and each released leaf's acknowledgement becomes due. :mod:`golden.collective.barrier` states
    the same rules.

    Acknowledgements are cumulative: a due acknowledgement carries the leaf's current iteration,
    and the lowest due leaf id goes first.

    Parameters
    ----------
    leaves : int
        Leaves, 2 to 16.

    Attributes
    ----------
    barrier : In(stream.Signature(4))
        Barriers, by leaf id (always ready: one per cycle).
    ack : Out(stream.Signature(BarrierAck))
        Acknowledgements.
    base : Out(8)
        Iterations completed by the slowest leaf (mod 256).
    iterations : Out(data.ArrayLayout(8, leaves))
        Iterations completed by each leaf (mod 256): ``base`` or ``base + 1``.
    bad_leaf, duplicates : Out(16)
        Barriers dropped (saturating): a leaf id not below ``leaves``; a leaf whose barrier is
        already pending.

    Notes
    -----
    Latency: an acknowledgement is valid two cycles after the barrier that makes it due (it is
    registered), and ``base`` advances the cycle after the last leaf's barrier. Throughput: one
    barrier and one acknowledgement per cycle.
    """

    PARAMS = (
        Param("leaves", int, 4, "leaves", minimum=2, maximum=16),
    )

    def __init__(self, *, leaves=4):
        super().__init__({
            "barrier": In(stream.Signature(LEAF_BITS)),
            "ack": Out(stream.Signature(BarrierAck)),
            "base": Out(ITERATION_BITS),
            "iterations": Out(data.ArrayLayout(ITERATION_BITS, leaves)),
            "bad_leaf": Out(COLLECTIVE_COUNTER_BITS),
            "duplicates": Out(COLLECTIVE_COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        leaves = self._leaves
        ahead = Signal(leaves)
        pending = Signal(leaves)
        due = Signal(leaves)
        leaf = self.barrier.payload
        m.d.comb += self.barrier.ready.eq(1)
        arrived = self.barrier.valid
        bad = arrived & (leaf >= leaves) if leaves < 1 << LEAF_BITS else Const(0, 1)
        good = arrived & ~bad
        duplicate = good & pending.bit_select(leaf, 1)
        saturating_count(m, self.bad_leaf, bad)
        saturating_count(m, self.duplicates, duplicate)

        # The lowest due leaf's acknowledgement is loaded into the output register, which holds it
        # (payload and all) until it is taken; its due bit clears when it is loaded.
        chosen = Signal(range(leaves))
        for index in reversed(range(leaves)):
            with m.If(due[index]):
                m.d.comb += chosen.eq(index)
        taken = Signal(leaves)
        with m.If(self.ack.valid & self.ack.ready):
            m.d.sync += self.ack.valid.eq(0)
        with m.If(due.any() & (~self.ack.valid | self.ack.ready)):
            m.d.comb += taken.eq(Const(1, leaves) << chosen)
            m.d.sync += [self.ack.valid.eq(1), self.ack.payload.leaf.eq(chosen),
                         self.ack.payload.iteration.eq(self.iterations[chosen])]

        advance = Signal(leaves)  # leaves at base that move to base + 1 now
        hold = Signal(leaves)  # leaves already ahead whose barrier is held
        with m.If(good & ~duplicate):
            with m.If(ahead.bit_select(leaf, 1)):
                m.d.comb += hold.eq(Const(1, leaves) << leaf)
            with m.Else():
                m.d.comb += advance.eq(Const(1, leaves) << leaf)
        next_ahead = ahead | advance
        next_pending = pending | hold
        with m.If(next_ahead.all()):
            # Everyone completed base + 1: the base moves on and the held leaves are released.
            m.d.sync += [self.base.eq(self.base + 1), ahead.eq(next_pending), pending.eq(0),
                         due.eq((due & ~taken) | advance | next_pending)]
        with m.Else():
            m.d.sync += [ahead.eq(next_ahead), pending.eq(next_pending), due.eq((due & ~taken) | advance)]
        for index in range(leaves):
            m.d.comb += self.iterations[index].eq(self.base + ahead[index])
        return m


register_block(
    "barrier_table", BarrierTable, family="collective",
    drops={"bad_leaf": "barriers from a leaf id out of range",
           "duplicates": "barriers from a leaf already waiting"},
    summary="Global control unit: barrier table keeping every leaf within one iteration of the slowest.",
    golden="golden.collective.barrier:BarrierTable",
)
