"""The RDMA detector: ready tasks to the pending queue, tasks waiting for remote data to the freeze queue."""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.streams import Queue
from ..net.packet import RANGE_BITS, Packet, PacketType, range_owner, sealed
from ..registration import NO_DROPS, Param, Parameterized, register_block
from .common import BLOCK_PARAM, RANGES_PARAM, ConfigSignature, range_lines

__all__ = ["RDMADetector"]


class RDMADetector(Parameterized, wiring.Component):
    """Issues tasks whose data range is here, freezes the others and requests their range once.

    A task's range is *ready* when this node owns it or has fetched it (``present``). A ready
    task goes straight to the pending queue when the freeze queue is empty; every other task
    enters the freeze queue. The first task of a range that is neither ready nor already
    requested emits one RDMA request for the whole range (``first = range * block``,
    ``lines = min(block, rows - first)``) to the range's owner, and marks it requested. The
    data handler reports a range complete on ``arrived``; the freeze queue's head moves to the
    pending queue once its range is ready. Tasks therefore reach the kernel in the order they
    arrived here (the freeze queue is in order and is bypassed only when empty), which fixes
    each output row's update order.

    Fetched ranges stay present (the data memory spans every line) until ``invalidate``, which
    forgets them when nothing is frozen or outstanding.

    Parameters
    ----------
    ranges : int
        Data ranges tracked (2 to 1024); the configured ``ranges`` must not exceed it.
    block : int
        Lines per data range, 1 to 255.
    freeze_depth, pending_depth : int
        Entries of the freeze and pending queues, 2 to 4096.

    Attributes
    ----------
    config : In(ConfigSignature())
    i : In(stream.Signature(Packet))
        Kernel-bound tasks from the splitter.
    pending : Out(stream.Signature(Packet))
        The pending queue's head: tasks for the kernel.
    request : Out(stream.Signature(Packet))
        Sealed RDMA requests, to the RDMA send queue (registered).
    arrived : In(stream.Signature(10, always_ready=True))
        A valid-only event: a range's last line was stored (from the data handler).
    query : In(10)
    outstanding : Out(1)
        Range ``query`` has been requested and has not arrived (for the data handler).
    invalidate : In(1)
        Forget every fetched range (honoured only when ``idle``).
    idle : Out(1)
        Nothing frozen, pending or requested-and-not-arrived.
    frozen : Out(range(freeze_depth + 1))
        Entries in the freeze queue.

    Notes
    -----
    Latency: 2 cycles from ``i`` to ``pending`` for a ready task with an empty freeze queue; a
    frozen task leaves the freeze queue 1 cycle after its range arrives, once it is the head.
    Throughput: one task per cycle.
    """

    PARAMS = (
        RANGES_PARAM,
        BLOCK_PARAM,
        Param("freeze_depth", int, 16, "freeze queue entries", minimum=2, maximum=4096),
        Param("pending_depth", int, 16, "pending queue entries", minimum=2, maximum=4096),
    )

    def __init__(self, *, ranges=64, block=20, freeze_depth=16, pending_depth=16):
        super().__init__({
            "config": In(ConfigSignature()),
            "i": In(stream.Signature(Packet)),
            "pending": Out(stream.Signature(Packet)),
            "request": Out(stream.Signature(Packet)),
            "arrived": In(stream.Signature(RANGE_BITS, always_ready=True)),
            "query": In(RANGE_BITS),
            "outstanding": Out(1),
            "invalidate": In(1),
            "idle": Out(1),
            "frozen": Out(range(freeze_depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        config = self.config
        freeze = Queue(m, "freeze", Packet, self._freeze_depth)
        pending = Queue(m, "pending_queue", Packet, self._pending_depth)
        wiring.connect(m, pending.r, wiring.flipped(self.pending))

        requested = Signal(self._ranges)
        present = Signal(self._ranges)
        waiting = Signal(range(self._ranges + 1))  # requested ranges that have not arrived

        def ready(index):
            owned = range_owner(index, config.range_shift, config.node_mask) == config.node
            return owned | present.bit_select(index, 1)

        header = self.i.payload.header
        ready_now = Signal()
        need_request = Signal()
        direct = Signal()
        m.d.comb += [
            ready_now.eq(ready(header.range)),
            need_request.eq(~ready_now & ~requested.bit_select(header.range, 1)),
            direct.eq(ready_now & (freeze.level == 0)),
            self.outstanding.eq(requested.bit_select(self.query, 1) & ~present.bit_select(self.query, 1)),
            self.frozen.eq(freeze.level),
            self.idle.eq((freeze.level == 0) & (pending.level == 0) & (waiting == 0) & ~self.request.valid),
        ]

        request_free = ~self.request.valid | self.request.ready
        with m.If(self.request.ready):
            m.d.sync += self.request.valid.eq(0)

        # The freeze queue's head moves on once its range is ready; a ready arrival bypasses an empty queue.
        release = Signal()
        m.d.comb += release.eq(freeze.r.valid & ready(freeze.r.payload.header.range))
        with m.If(release):
            m.d.comb += [pending.w.valid.eq(1), pending.w.payload.eq(freeze.r.payload),
                         freeze.r.ready.eq(pending.w.ready)]
        with m.Elif(direct):
            m.d.comb += [pending.w.valid.eq(self.i.valid), pending.w.payload.eq(self.i.payload),
                         self.i.ready.eq(pending.w.ready)]
        with m.If(~direct):
            m.d.comb += [
                freeze.w.payload.eq(self.i.payload),
                freeze.w.valid.eq(self.i.valid & (~need_request | request_free)),
                self.i.ready.eq(freeze.w.ready & (~need_request | request_free)),
            ]

        first, lines = range_lines(m, header.range, self._block, config.rows, "request")
        request = Packet(Signal(Packet.as_shape().size, name="request_packet"))
        m.d.comb += [
            request.header.ptype.eq(PacketType.RDMA),
            request.header.task_id.eq(header.task_id),
            request.header.dst.eq(range_owner(header.range, config.range_shift, config.node_mask)),
            request.header.src.eq(config.node),
            request.header.range.eq(header.range),
            request.rdma().first.eq(first),
            request.rdma().lines.eq(lines),
        ]
        sent = Signal()
        m.d.comb += sent.eq(self.i.valid & self.i.ready & ~direct & need_request)
        with m.If(sent):
            m.d.sync += [self.request.valid.eq(1), self.request.payload.eq(sealed(request))]

        # Range bookkeeping: a request marks its range, an arrival makes it present.
        arrived = self.arrived.valid
        def one_hot(index, enable):
            return Mux(enable, (Const(1, self._ranges) << index)[:self._ranges], 0)

        next_requested = Signal(self._ranges)
        next_present = Signal(self._ranges)
        m.d.comb += [
            next_requested.eq(requested | one_hot(header.range, sent)),
            next_present.eq(present | one_hot(self.arrived.payload, arrived)),
        ]
        with m.If(self.invalidate & self.idle):
            m.d.sync += [requested.eq(0), present.eq(0)]
        with m.Else():
            m.d.sync += [requested.eq(next_requested), present.eq(next_present)]
        with m.If(sent & ~arrived):
            m.d.sync += waiting.eq(waiting + 1)
        with m.Elif(arrived & ~sent):
            m.d.sync += waiting.eq(waiting - 1)
        return m


register_block(
    "runtime_rdma_detector", RDMADetector, family="runtime",
    summary="FCsN RDMA detector: freeze and pending queues, one RDMA request per missing data range.",
    golden="golden.runtime.protocol:detect_request",
    drops=NO_DROPS,
)
