"""A credited queue never overflows while its sender keeps to its credits.

:class:`rtl.lib.streams.Queue` with ``credited=True`` is the input buffer of the runtime
switch and the receive queue of the network interface. Its sender writes on a credit, not on
``ready``: it starts with ``depth`` credits, spends one per write, and gets one back per entry
read, a cycle later through a registered pulse (the switch's ``p<i>_in_credit``, the interface's
``net_in_credit``) or, the most aggressive sender, in the same cycle as the read. The harness
plays such a sender against a free reader and asserts that the queue's sticky ``overflow`` flag
never rises, that the queue never refuses the write (``w.ready``) and that its level never
passes ``depth``. A cover shows the credits really run out (the queue holds ``depth`` entries).
"""

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cover, Module, ResetSignal, Signal

__all__ = ["credited_queue_harness"]


def credited_queue_harness(*, depth, lag, width=2):
    """The harness (see the module docstring).

    Parameters
    ----------
    depth : int
        Queue entries the sender holds credits for.
    lag : {0, 1}
        Cycles from a read to its credit being usable beyond the next edge: 1 as in the switch
        and the network interface (a registered credit pulse), 0 for a credit counted at the
        read's own edge.
    width : int
        Payload bits (the payload does not matter to the claim).
    """
    from rtl.lib.streams import Queue

    if lag not in (0, 1):
        raise ValueError(f"lag must be 0 or 1, not {lag}")
    m = Module()
    queue = Queue(m, "queue", width, depth, credited=True)
    m.d.comb += Assume(~ResetSignal("sync"), "no reset after the initial state")

    credits = Signal(range(depth + 1), init=depth)
    read = Signal()
    m.d.comb += [read.eq(queue.r.valid & queue.r.ready), queue.r.ready.eq(AnySeq(1)),
                 queue.w.payload.eq(AnySeq(width))]
    returned = Signal()
    if lag:
        m.d.sync += returned.eq(read)
    else:
        m.d.comb += returned.eq(read)
    write = Signal()
    m.d.comb += [write.eq(AnySeq(1)), queue.w.valid.eq(write),
                 Assume(~write | (credits != 0), "the sender writes only with a credit")]
    m.d.sync += credits.eq(credits - write + returned)

    m.d.comb += [Assert(~queue.overflow, "overflow never rises"),
                 Assert(~write | queue.w.ready, "a credited write is never refused"),
                 Assert(queue.level <= depth, "never more entries than credits")]
    m.d.comb += Cover(queue.level == depth, "every credit spent: the queue holds depth entries")
    return m
