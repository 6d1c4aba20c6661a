"""The data packager: wraps each line read for an RDMA request into a sealed data packet."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..net.packet import LINE_BITS, Packet, PacketType, sealed
from ..registration import NO_DROPS, Parameterized, register_block
from .common import ConfigSignature
from .rdma_responder import read_layout

__all__ = ["DataPackager"]


class DataPackager(Parameterized, wiring.Component):
    """Pairs each line from the memory controller with its data-read-queue entry and seals a data packet.

    The packet goes to the entry's requester: ``DATA``, the request's kernel id, ``dst`` the
    requester, ``src`` this node, the range, and in the payload the line address, ``last`` and
    the 448 data bits.

    Attributes
    ----------
    config : In(ConfigSignature())
    info : In(stream.Signature(read_layout()))
        The data read queue's head (from the RDMA responder).
    mem_rd_data : In(stream.Signature(448))
        Lines from the local data memory, in the order they were requested.
    o : Out(stream.Signature(Packet))
        Sealed data packets, to the data send queue (registered).

    Notes
    -----
    Latency: 1 cycle. Throughput: one packet per cycle.
    """

    def __init__(self):
        super().__init__({
            "config": In(ConfigSignature()),
            "info": In(stream.Signature(read_layout())),
            "mem_rd_data": In(stream.Signature(LINE_BITS)),
            "o": Out(stream.Signature(Packet)),
        })

    def elaborate(self, platform):
        m = Module()
        info = self.info.payload
        packet = Packet(Signal(Packet.as_shape().size, name="data_packet"))
        m.d.comb += [
            packet.header.ptype.eq(PacketType.DATA),
            packet.header.task_id.eq(info.task_id),
            packet.header.dst.eq(info.dst),
            packet.header.src.eq(self.config.node),
            packet.header.range.eq(info.range),
            packet.data_reply().line.eq(info.line),
            packet.data_reply().last.eq(info.last),
            packet.data_reply().data.eq(self.mem_rd_data.payload),
        ]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        step = Signal()
        m.d.comb += step.eq(self.info.valid & self.mem_rd_data.valid & (~self.o.valid | self.o.ready))
        m.d.comb += [self.info.ready.eq(step), self.mem_rd_data.ready.eq(step)]
        with m.If(step):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(sealed(packet))]
        return m


register_block(
    "runtime_data_packager", DataPackager, family="runtime",
    summary="FCsN data packager: one sealed data packet per line read for an RDMA request.",
    golden="golden.runtime.packet:encode", drops=NO_DROPS,
)
