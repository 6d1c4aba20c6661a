"""The task splitter: the local slots of a task go to the RDMA detector, the others to their owners."""

import functools
import operator

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..net.packet import ITEMS, NODE_BITS, Packet, range_owner
from ..registration import NO_DROPS, Parameterized, register_block
from .common import ConfigSignature
from .task_responder import responded_layout

__all__ = ["TaskSplitter"]


def _masked(m, source, target, mask):
    """Drive ``target`` (a Packet view) with ``source`` whose task slots outside ``mask`` are emptied."""
    task_in, task_out = source.task(), target.task()
    m.d.comb += target.eq(source)
    m.d.comb += task_out.mask.eq(mask)
    for slot in range(ITEMS):
        m.d.comb += task_out.items[slot].eq(Mux(mask[slot], task_in.items[slot].as_value(), 0))


class TaskSplitter(Parameterized, wiring.Component):
    """Splits a checked task: the local slots become one kernel-bound task, the rest one packet per owner.

    The kernel-bound task keeps the header except ``dst`` (this node), ``remote`` (the range is
    owned by another node) and ``check`` (0: it never leaves the node); its slots outside the
    local mask are emptied, the others keep their positions. The remote slots are grouped by
    owner in the order of each group's lowest slot; each group becomes a task for its owner
    (``src`` this node, ``remote`` set when the range is not the owner's), sealed afterwards by
    the :class:`~rtl.runtime.task_packager.TaskPackager`. Same decisions as
    :func:`golden.runtime.protocol.split`.

    Attributes
    ----------
    config : In(ConfigSignature())
    i : In(stream.Signature(responded_layout()))
        From the task responder.
    local : Out(stream.Signature(Packet))
        Kernel-bound tasks, to the RDMA detector (registered).
    remote : Out(stream.Signature(Packet))
        Unsealed tasks for other nodes, to the packager (registered).
    busy : Out(1)
        A task with several remote groups is being split.

    Notes
    -----
    Latency: 1 cycle. Throughput: one task per cycle when it has at most one remote group;
    a task with *k* remote groups takes *k* cycles.
    """

    def __init__(self):
        super().__init__({
            "config": In(ConfigSignature()),
            "i": In(stream.Signature(responded_layout())),
            "local": Out(stream.Signature(Packet)),
            "remote": Out(stream.Signature(Packet)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        config = self.config
        incoming = self.i.payload
        packet = incoming.packet
        header = packet.header

        started = Signal()
        remaining = Signal(ITEMS)
        pending = Signal(ITEMS)
        m.d.comb += [
            pending.eq(Mux(started, remaining, packet.task().mask & ~incoming.local)),
            self.busy.eq(started),
        ]
        # The lowest pending slot names the owner of this cycle's group. It is picked one-hot, and
        # the slots' owners are compared pairwise straight from the input, so that the path from
        # ``started`` to the payload registers is a few LUTs, not a priority mux then a compare.
        lowest = Signal(ITEMS)
        m.d.comb += lowest.eq(Cat(pending[slot] & ~pending[:slot].any() for slot in range(ITEMS)))
        data_owner = range_owner(header.range, config.range_shift, config.node_mask)
        group = Signal(ITEMS)
        for slot in range(ITEMS):
            same = Cat(*(incoming.owners[other] == incoming.owners[slot] for other in range(ITEMS)))
            m.d.comb += group[slot].eq(pending[slot] & (lowest & same).any())
        # One-hot selects: an AND-OR, not a priority chain.
        owner = Signal(NODE_BITS)
        owner_remote = Signal()  # the range is not the group owner's
        m.d.comb += [
            owner.eq(functools.reduce(operator.or_, (Mux(lowest[slot], incoming.owners[slot], 0)
                                                     for slot in range(ITEMS)))),
            owner_remote.eq(Cat(*(lowest[slot] & (data_owner != incoming.owners[slot])
                                  for slot in range(ITEMS))).any()),
        ]

        local_wanted = Signal()
        remote_wanted = Signal()
        m.d.comb += [local_wanted.eq(~started & (incoming.local != 0)), remote_wanted.eq(pending != 0)]
        local_free = ~self.local.valid | self.local.ready
        remote_free = ~self.remote.valid | self.remote.ready
        step = Signal()
        m.d.comb += step.eq(self.i.valid & (~local_wanted | local_free) & (~remote_wanted | remote_free))

        local_packet = Packet(Signal(Packet.as_shape().size, name="local_packet"))
        _masked(m, packet, local_packet, incoming.local)
        m.d.comb += [
            local_packet.header.dst.eq(config.node),
            local_packet.header.remote.eq(data_owner != config.node),
            local_packet.header.check.eq(0),
        ]
        remote_packet = Packet(Signal(Packet.as_shape().size, name="remote_packet"))
        _masked(m, packet, remote_packet, group)
        m.d.comb += [
            remote_packet.header.dst.eq(owner),
            remote_packet.header.src.eq(config.node),
            remote_packet.header.remote.eq(owner_remote),
            remote_packet.header.check.eq(0),
        ]

        with m.If(self.local.ready):
            m.d.sync += self.local.valid.eq(0)
        with m.If(self.remote.ready):
            m.d.sync += self.remote.valid.eq(0)
        with m.If(step):
            with m.If(local_wanted):
                m.d.sync += [self.local.valid.eq(1), self.local.payload.eq(local_packet)]
            with m.If(remote_wanted):
                m.d.sync += [self.remote.valid.eq(1), self.remote.payload.eq(remote_packet)]
            left = pending & ~group
            with m.If(left != 0):
                m.d.sync += [started.eq(1), remaining.eq(left)]
            with m.Else():
                m.d.sync += started.eq(0)
                m.d.comb += self.i.ready.eq(1)
        return m


register_block(
    "runtime_task_splitter", TaskSplitter, family="runtime",
    summary="FCsN task splitter: local slots to the RDMA detector, remote slots grouped per owner node.",
    golden="golden.runtime.protocol:split", drops=NO_DROPS,
)
