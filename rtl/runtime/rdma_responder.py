"""The RDMA responder: checks a request and queues one local-memory read per line of its range."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.streams import Queue
from ..net.packet import NODE_BITS, RANGE_BITS, ROW_BITS, Packet, TaskId, range_owner
from ..registration import Param, Parameterized, register_block
from .common import BLOCK_PARAM, ConfigSignature, range_lines

__all__ = ["RDMAResponder", "read_layout"]


def read_layout():
    """An entry of the data read queue: where the line goes and which line it is."""
    return data.StructLayout({"dst": NODE_BITS, "range": RANGE_BITS, "line": ROW_BITS, "last": 1,
                              "task_id": TaskId})


class RDMAResponder(Parameterized, wiring.Component):
    """Serves an RDMA request from local memory: one read command and one read-queue entry per line.

    A request is served when its range is below ``config.ranges``, owned by this node, and its
    ``lines`` lines from ``first`` (at least one) lie inside the range; otherwise it is dropped
    and counted (``rdma_range``, as :func:`golden.runtime.protocol.serve`). Lines are read in
    order, one per cycle; each read command goes to the memory controller (``mem_rd_cmd``)
    together with an entry of the data read queue (``o``) naming the requester, so that the
    :class:`~rtl.runtime.data_packager.DataPackager` pairs every returned line with its entry.

    Parameters
    ----------
    block : int
        Lines per data range, 1 to 255.
    read_depth : int
        Entries of the data read queue (reads in flight plus lines waiting to be sent), 2 to 4096.

    Attributes
    ----------
    config : In(ConfigSignature())
    i : In(stream.Signature(Packet))
        RDMA requests from the classifier.
    mem_rd_cmd : Out(stream.Signature(24))
        Line addresses to read from the local data memory (answered in order).
    o : Out(stream.Signature(read_layout()))
        The data read queue's head.
    dropped : Out(1)
        One-cycle pulse: a request was out of range.
    served : Out(1)
        One-cycle pulse: a request was accepted for service.
    busy : Out(1)
        A request is being read or entries wait in the data read queue.

    Notes
    -----
    Latency: the first read command leaves the cycle after the request is taken. Throughput:
    one line per cycle, back to back across requests.
    """

    PARAMS = (
        BLOCK_PARAM,
        Param("read_depth", int, 16, "data read queue entries", minimum=2, maximum=4096),
    )

    def __init__(self, *, block=20, read_depth=16):
        super().__init__({
            "config": In(ConfigSignature()),
            "i": In(stream.Signature(Packet)),
            "mem_rd_cmd": Out(stream.Signature(ROW_BITS)),
            "o": Out(stream.Signature(read_layout())),
            "dropped": Out(1),
            "served": Out(1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        config = self.config
        queue = Queue(m, "read_queue", read_layout(), self._read_depth)
        wiring.connect(m, queue.r, wiring.flipped(self.o))

        active = Signal()
        line = Signal(ROW_BITS)
        end = Signal(ROW_BITS + 1)
        target = Signal(NODE_BITS)
        served_range = Signal(RANGE_BITS)
        task_id = Signal(TaskId)
        last = Signal()
        m.d.comb += last.eq(line + 1 == end)
        m.d.comb += [
            self.mem_rd_cmd.valid.eq(active & queue.w.ready),
            self.mem_rd_cmd.payload.eq(line),
            queue.w.valid.eq(active & self.mem_rd_cmd.ready),
            queue.w.payload.dst.eq(target),
            queue.w.payload.range.eq(served_range),
            queue.w.payload.line.eq(line),
            queue.w.payload.last.eq(last),
            queue.w.payload.task_id.eq(task_id),
            self.busy.eq(active | queue.r.valid | (queue.level != 0)),
        ]
        step = Signal()
        m.d.comb += step.eq(active & self.mem_rd_cmd.ready & queue.w.ready)
        with m.If(step):
            m.d.sync += line.eq(line + 1)
            with m.If(last):
                m.d.sync += active.eq(0)

        request = self.i.payload
        header = request.header
        rdma = request.rdma()
        first, lines = range_lines(m, header.range, self._block, config.rows, "served")
        good = Signal()
        m.d.comb += good.eq(
            (header.range < config.ranges)
            & (range_owner(header.range, config.range_shift, config.node_mask) == config.node)
            & (rdma.lines != 0) & (rdma.first >= first) & (rdma.first + rdma.lines <= first + lines))
        m.d.comb += self.i.ready.eq(~active | (step & last))
        dropped = Signal()
        served = Signal()
        with m.If(self.i.valid & self.i.ready):
            with m.If(good):
                m.d.comb += served.eq(1)
                m.d.sync += [active.eq(1), line.eq(rdma.first), end.eq(rdma.first + rdma.lines),
                             target.eq(header.src), served_range.eq(header.range), task_id.eq(header.task_id)]
            with m.Else():
                m.d.comb += dropped.eq(1)
        m.d.sync += [self.dropped.eq(dropped), self.served.eq(served)]
        return m


register_block(
    "runtime_rdma_responder", RDMAResponder, family="runtime",
    summary="FCsN RDMA responder: range check, one local-memory read and data-read-queue entry per line.",
    golden="golden.runtime.protocol:serve",
    drops={"dropped": "RDMA requests for a range not here, past ranges, or lines outside it"},
)
