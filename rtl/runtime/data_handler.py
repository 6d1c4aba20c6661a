"""The data handler: stores the lines of a requested range and reports the range complete."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..net.packet import RANGE_BITS, MemWrite, Packet
from ..registration import Parameterized, register_block
from .common import BLOCK_PARAM, ConfigSignature, range_lines

__all__ = ["DataHandler"]


class DataHandler(Parameterized, wiring.Component):
    """Writes each expected data line to the local data memory; the range's last line makes it present.

    A data packet is expected when the RDMA detector has requested its range and the range
    has not arrived (``outstanding`` for ``query``), its ``line`` lies in the range, and its
    ``last`` flag marks exactly the range's final line. Anything else is dropped and counted
    (``data_unsolicited``). Lines of one range come from one responder over one path, in
    order, so the last line arrives after all the others.

    Parameters
    ----------
    block : int
        Lines per data range, 1 to 255.

    Attributes
    ----------
    config : In(ConfigSignature())
    i : In(stream.Signature(Packet))
        Data packets from the classifier.
    query : Out(10)
    outstanding : In(1)
        The RDMA detector's answer for range ``query`` (combinational).
    mem_wr : Out(stream.Signature(MemWrite, always_ready=True))
        Line writes to the local data memory, which takes one every cycle (a valid-only event).
    arrived : Out(stream.Signature(10, always_ready=True))
        A valid-only event, in the cycle the last line of a range is written (its ``mem_wr``
        transfer): the range, to the RDMA detector.
    dropped : Out(1)
        One-cycle pulse: an unexpected data packet was dropped.

    Notes
    -----
    Combinational (no latency); the memory must make a write visible to reads issued two
    cycles later. Throughput: one packet per cycle.
    """

    PARAMS = (
        BLOCK_PARAM,
    )

    def __init__(self, *, block=20):
        super().__init__({
            "config": In(ConfigSignature()),
            "i": In(stream.Signature(Packet)),
            "query": Out(RANGE_BITS),
            "outstanding": In(1),
            "mem_wr": Out(stream.Signature(MemWrite, always_ready=True)),
            "arrived": Out(stream.Signature(RANGE_BITS, always_ready=True)),
            "dropped": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        header = self.i.payload.header
        reply = self.i.payload.data_reply()
        first, lines = range_lines(m, header.range, self._block, self.config.rows, "data")
        final = Signal()
        good = Signal()
        m.d.comb += [
            self.query.eq(header.range),
            final.eq(reply.line == first + lines - 1),
            good.eq(self.outstanding & (header.range < self.config.ranges) & (reply.line >= first)
                    & (reply.line < first + lines) & (reply.last == final)),
            self.mem_wr.valid.eq(self.i.valid & good),
            self.mem_wr.payload.line.eq(reply.line),
            self.mem_wr.payload.data.eq(reply.data),
            # Every packet is taken at once: written (the memory always accepts) or dropped.
            self.i.ready.eq(1),
            self.arrived.valid.eq(self.mem_wr.valid & final),
            self.arrived.payload.eq(header.range),
        ]
        dropped = Signal()
        m.d.comb += dropped.eq(self.i.valid & ~good)
        m.d.sync += self.dropped.eq(dropped)
        return m


register_block(
    "runtime_data_handler", DataHandler, family="runtime",
    summary="FCsN data handler: stores expected RDMA data lines, reports a range complete, drops the rest.",
    golden="golden.runtime.protocol:serve",
    drops={"dropped": "data packets nobody asked for (range not outstanding, line outside it, wrong last)"},
)
