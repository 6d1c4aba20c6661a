"""The task packager: seals a task bound for another node and hands it to the send queue."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..net.packet import Packet, sealed
from ..registration import NO_DROPS, Parameterized, register_block

__all__ = ["TaskPackager"]


class TaskPackager(Parameterized, wiring.Component):
    """Wraps a split-off task for the network: sets its ``check`` byte (the XOR of the 64 bytes is 0).

    Attributes
    ----------
    i : In(stream.Signature(Packet))
        Unsealed tasks from the splitter (``dst``, ``src`` and ``remote`` already set).
    o : Out(stream.Signature(Packet))
        Sealed tasks, to the task send queue (registered).

    Notes
    -----
    Latency: 1 cycle. Throughput: one packet per cycle.
    """

    def __init__(self):
        super().__init__({"i": In(stream.Signature(Packet)), "o": Out(stream.Signature(Packet))})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(sealed(self.i.payload))]
        return m


register_block(
    "runtime_task_packager", TaskPackager, family="runtime",
    summary="FCsN task packager: seals split-off tasks (check byte) for the send queue.",
    golden="golden.runtime.packet:encode", drops=NO_DROPS,
)
