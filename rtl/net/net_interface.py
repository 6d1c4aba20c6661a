"""The node's network interface: receive queues per virtual channel, send queues, credit flow control."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.streams import Queue
from ..registration import NO_GOLDEN, Param, Parameterized, register_block
from .packet import VC, Flit, Packet

__all__ = ["NetInterface", "CHANNELS"]

CHANNELS = ("task", "rdma", "data")


class NetInterface(Parameterized, wiring.Component):
    """Three virtual channels (task, RDMA, data) over one 512-bit link each way, with credits.

    Receive: a flit on ``net_in`` goes to the receive queue of its channel (``rx_depth``
    entries each). The link never stalls: the switch sends a flit only with a credit, and
    the interface returns one credit on ``net_in_credit`` (bit per channel) each time it pops
    an entry, so the queues cannot overflow (each has one spare entry beyond its credits, see
    :class:`~rtl.runtime.common.Queue`). A flit that arrives for a full queue (a sender that
    ignored its credits) or on channel 3 is dropped and counted (``overflow``).

    Send: the handlers push packets into three send queues (``tx_depth`` each). Each cycle the
    interface sends the head of the highest-priority queue (data, then RDMA, then task) that
    holds a credit for the switch's input buffer of its channel (``tx_credits`` to start
    with, one back per ``net_out_credit`` pulse). So a channel blocked downstream never holds
    up another: RDMA requests and data replies pass tasks waiting for them.

    Parameters
    ----------
    rx_depth : int
        Receive queue entries per channel (the credits this node grants), 2 to 1024.
    tx_depth : int
        Send queue entries per channel, 2 to 1024.
    tx_credits : int
        The switch's input buffer entries per channel, 1 to 1024.

    Attributes
    ----------
    net_in : In(stream.Signature(Flit))
        From the switch; ``ready`` is always high.
    net_in_credit : Out(3)
        One-cycle pulses, a receive-queue entry of channel task / RDMA / data was freed.
    net_out : Out(stream.Signature(Flit))
        To the switch (registered; sent only with a credit).
    net_out_credit : In(3)
        Credits returned by the switch, bit per channel.
    rx_task, rx_rdma, rx_data : Out(stream.Signature(Packet))
        Receive queue heads, to the classifier.
    tx_task, tx_rdma, tx_data : In(stream.Signature(Packet))
        Send queues, from the task packager, the RDMA detector and the data packager.
    sent : Out(3)
        One-cycle pulses: a task / RDMA / data packet left on ``net_out``.
    overflow : Out(1)
        One-cycle pulse: a flit was dropped (no room on its channel, or channel 3).
    idle : Out(1)
        Every queue is empty and every credit is back.

    Notes
    -----
    Latency: 2 cycles from ``net_in`` to a receive queue head (the FIFO's); 1 cycle from a send
    queue head to ``net_out``. Throughput: one flit per cycle each way.
    """

    PARAMS = (
        Param("rx_depth", int, 8, "receive queue entries per channel (credits granted)",
              minimum=2, maximum=1024),
        Param("tx_depth", int, 8, "send queue entries per channel", minimum=2, maximum=1024),
        Param("tx_credits", int, 8, "switch input buffer entries per channel", minimum=1, maximum=1024),
    )

    def __init__(self, *, rx_depth=8, tx_depth=8, tx_credits=8):
        members = {
            "net_in": In(stream.Signature(Flit)),
            "net_in_credit": Out(3),
            "net_out": Out(stream.Signature(Flit)),
            "net_out_credit": In(3),
        }
        members.update({f"rx_{name}": Out(stream.Signature(Packet)) for name in CHANNELS})
        members.update({f"tx_{name}": In(stream.Signature(Packet)) for name in CHANNELS})
        members.update({"sent": Out(3), "overflow": Out(1), "idle": Out(1)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        flit = self.net_in.payload
        m.d.comb += self.net_in.ready.eq(1)
        overflow = Signal()
        idle_terms = []
        for index, name in enumerate(CHANNELS):
            rx = Queue(m, f"rx_{name}", Packet, self._rx_depth, credited=True)
            here = self.net_in.valid & (flit.vc == VC(index))
            m.d.comb += [rx.w.valid.eq(here), rx.w.payload.eq(flit.packet)]
            with m.If(here & ~rx.w.ready):
                m.d.comb += overflow.eq(1)
            out = getattr(self, f"rx_{name}")
            wiring.connect(m, rx.r, wiring.flipped(out))
            m.d.sync += self.net_in_credit[index].eq(out.valid & out.ready)
            idle_terms.append(rx.level == 0)
        with m.If(self.net_in.valid & (flit.vc.as_value() == 3)):
            m.d.comb += overflow.eq(1)
        m.d.sync += self.overflow.eq(overflow)

        # Send: one flit per cycle, data before RDMA before tasks, only with a credit. Each channel
        # keeps a registered "credit available" flag beside its count, and the send decisions are
        # written flat (a channel goes when the link is free, it can send and no higher channel
        # can), so that a decision is few LUTs from registers before it fans out to the 512
        # enables of its queue's output register. The flit register loads whenever it is free, from
        # the highest channel that can send: only its valid waits for a decision.
        with m.If(self.net_out.ready):
            m.d.sync += self.net_out.valid.eq(0)
        free = Signal()
        m.d.comb += free.eq(~self.net_out.valid | self.net_out.ready)
        sent = Signal(3)
        higher = None  # a higher-priority channel can send
        chosen = None  # the flit of the highest channel that can send, as (packet, vc)
        for index in (2, 1, 0):
            name = CHANNELS[index]
            tx = Queue(m, f"tx_{name}", Packet, self._tx_depth)
            wiring.connect(m, wiring.flipped(getattr(self, f"tx_{name}")), tx.w)
            credits = Signal(range(self._tx_credits + 1), init=self._tx_credits, name=f"credits_{name}")
            credited = Signal(init=1, name=f"credited_{name}")  # credits != 0, registered
            can = Signal(name=f"can_{name}")
            m.d.comb += can.eq(tx.r.valid & credited)
            go = Signal(name=f"send_{name}")
            m.d.comb += go.eq(free & can & (~higher if higher is not None else 1))
            m.d.comb += tx.r.ready.eq(go)
            flit_packet, flit_vc = tx.r.payload, VC(index)
            if chosen is not None:  # a lower channel only where no higher one is picked
                flit_packet, flit_vc = Mux(higher, chosen[0], flit_packet), Mux(higher, chosen[1], flit_vc)
            chosen = (flit_packet, flit_vc)
            with m.If(go):
                m.d.sync += self.net_out.valid.eq(1)
            m.d.comb += sent[index].eq(go)
            returned = self.net_out_credit[index]
            with m.If(go & ~returned):
                m.d.sync += [credits.eq(credits - 1), credited.eq(credits != 1)]
            with m.Elif(returned & ~go):
                m.d.sync += [credits.eq(credits + 1), credited.eq((credits + 1)[:len(credits)] != 0)]
            idle_terms += [tx.level == 0, credits == self._tx_credits]
            higher = can if higher is None else (higher | can)
        with m.If(free):
            m.d.sync += [self.net_out.payload.packet.eq(chosen[0]), self.net_out.payload.vc.eq(chosen[1])]
        m.d.sync += self.sent.eq(sent)
        idle = ~self.net_out.valid
        for term in idle_terms:
            idle = idle & term
        m.d.comb += self.idle.eq(idle)
        return m


register_block(
    "runtime_net_interface", NetInterface, family="net",
    summary="FCsN network interface: per-channel receive/send queues and credit flow control on one link.",
    golden=NO_GOLDEN("plumbing: queues between a node and its switch port"),
    drops={"overflow": "flits dropped: a full receive queue (a sender ignoring its credits) or channel 3"},
)
