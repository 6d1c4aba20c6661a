"""A ring all-reduce node on a switch port: reduce-scatter then all-gather, one line per packet."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..lib.counters import add_saturating, pulse_count, saturating_count
from ..net.net_interface import NetInterface
from ..net.packet import LINE_BITS, MAX_NODES, NODE_BITS, Flit, Packet, PacketType, checksum, sealed
from ..net.switch import SWITCH_DEPTH_PARAM
from ..registration import Param, Parameterized, register_block
from .reduction_engine import LINE_WORDS, ReductionEngine
from .reduction_table import COLLECTIVE_COUNTER_BITS

__all__ = ["RingNode", "RING_PARAMS", "SENT_BITS", "REDUCE_SCATTER", "ALL_GATHER"]

SENT_BITS = 32
REDUCE_SCATTER, ALL_GATHER = 0, 1  # the header's ``remote`` bit on a ring packet
# x + (-0.0) is x bit for bit for every value but a NaN, which it makes the canonical NaN.
_NEG_ZERO_LINE = Const(int("80000000" * LINE_WORDS, 16), LINE_BITS)


def load_layout(depth):
    """A load of one line into a node's vector: ``{"addr": range(depth), "data": 448}``."""
    return data.StructLayout({"addr": range(depth), "data": LINE_BITS})


class _Kind(enum.Enum, shape=2):
    INJECT = 0  # a line of the node's own segment, read from memory and sent raw
    ADD = 1  # a reduce-scatter line: received + own
    GATHER = 2  # an all-gather line: stored, and passed on unless this is its last hop


# The parameters a ring node and the cluster of them share.
RING_PARAMS = (
    Param("depth", int, 64, "lines of each node's vector memory", minimum=2, maximum=1 << 20),
    Param("queue_depth", int, 16, "network queue entries per channel", minimum=2, maximum=1024),
    SWITCH_DEPTH_PARAM,
)


class RingNode(Parameterized, wiring.Component):
    """One node of a ring all-reduce over the runtime switch (dissertation Section 7.2.2).

    The node holds its gradient vector, ``size`` segments of ``lines`` lines (segment ``s``, line
    ``j`` at address ``s * lines + j``), loaded through ``load`` while idle. On ``start`` it sends
    the lines of its own segment ``rank`` to its successor ``rank + 1`` (mod ``size``). Each
    reduce-scatter line it receives goes through a :class:`ReductionEngine` with its own line of
    the same address (``received + own``) and on to the successor at once, as the next step's
    message; the last one of a segment (segment ``rank + 1``, which has then been round the ring)
    is stored and sent on as an all-gather line. An all-gather line is stored and sent on, except
    at its last hop (segment ``rank + 2``). ``done`` rises when all ``size`` segments are stored;
    ``golden.collective.ring`` states the order of the additions.

    Packets: the runtime's data packets (:mod:`rtl.runtime.packet`), ``dst`` the successor, ``src``
    the sender, ``range`` the segment, ``line`` the line, ``last`` on a segment's last line, and
    the header's ``remote`` bit for the phase (0: reduce-scatter, 1: all-gather; data packets use
    no other meaning of it). Every packet the node sends, its raw lines and its all-gather lines
    too, goes through the engine, with ``-0.0`` as the other operand where nothing is added: that
    is exact for every value but a NaN, which becomes the canonical NaN the next addition would
    make of it anyway. One in-order pipeline serves every packet and the memory needs one write
    port.

    No loss and no hang: the node takes a line that will be sent only while fewer than
    ``queue_depth`` of its packets are in its pipeline and send queue, and starts one of its own
    only while two places are free, so the ring of buffers always has a free place (bubble flow
    control) and the send queue never fills. Received packets wait in the receive queue, holding
    their credits, until the node is started.

    Dropped and counted (16-bit saturating): ``malformed``, a packet whose check byte fails;
    ``unexpected``, a packet not from the ring predecessor, with a segment or line out of range,
    a reduce-scatter line of the node's own segment or an all-gather line of the segment it
    reduced (neither comes back in a correct ring), a non-data packet type, or a packet on the
    task or RDMA channel. Neither is ever merged; duplicates are not detected.

    Parameters
    ----------
    depth : int
        Lines of the vector memory, 2 to 2**20: ``size * lines`` must fit.
    queue_depth : int
        Receive and send queue entries (the credits the node grants the switch), 2 to 1024.
    switch_depth : int
        The switch's input buffer entries per channel (the node's send credits), 2 to 1024.

    Attributes
    ----------
    net_in, net_out, net_in_credit, net_out_credit
        The switch port, as :class:`rtl.runtime.net_interface.NetInterface` documents it.
    rank : In(4)
        This node's position in the ring, also its switch port and node id.
    size : In(5)
        Nodes in the ring, 2 to 16 (ids ``0 .. size - 1``).
    lines : In(range(depth + 1))
        Lines per segment.
    config_ok : Out(1)
        ``rank < size``, ``size`` in 2..16, ``lines >= 1`` and ``size * lines <= depth``;
        ``start`` is ignored otherwise.
    load : In(stream.Signature(load_layout(depth)))
        Writes of the vector; ready while idle.
    start : In(1)
        Starts an all-reduce (while idle).
    busy, done : Out(1)
        Running; all segments stored since the last ``start`` (held until the next).
    read_addr : In(range(depth))
    read_data : Out(448)
        A read of the vector, the cycle after the address.
    sent : Out(32)
        Packets sent since the last ``start``.
    malformed, unexpected : Out(16)
        Dropped packets, as above (saturating at 65535).
    overflow : Out(1)
        Sticky: the network interface dropped a flit that arrived beyond its credits or on
        channel 3.
    """

    PARAMS = RING_PARAMS

    def __init__(self, *, depth=64, queue_depth=16, switch_depth=4):
        super().__init__({
            "net_in": In(stream.Signature(Flit)),
            "net_in_credit": Out(3),
            "net_out": Out(stream.Signature(Flit)),
            "net_out_credit": In(3),
            "rank": In(NODE_BITS), "size": In(NODE_BITS + 1), "lines": In(range(depth + 1)),
            "config_ok": Out(1),
            "load": In(stream.Signature(load_layout(depth))),
            "start": In(1), "busy": Out(1), "done": Out(1),
            "read_addr": In(range(depth)), "read_data": Out(LINE_BITS),
            "sent": Out(SENT_BITS), "malformed": Out(COLLECTIVE_COUNTER_BITS),
            "unexpected": Out(COLLECTIVE_COUNTER_BITS),
            "overflow": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        depth, room = self._depth, self._queue_depth
        m.submodules.net = net = NetInterface(rx_depth=room, tx_depth=room, tx_credits=self._switch_depth)
        wiring.connect(m, wiring.flipped(self.net_in), net.net_in)
        wiring.connect(m, net.net_out, wiring.flipped(self.net_out))
        m.d.comb += [self.net_in_credit.eq(net.net_in_credit), net.net_out_credit.eq(self.net_out_credit)]

        rank, size, lines = self.rank, self.size, self.lines
        succ, pred, after_succ = (Signal(NODE_BITS, name=name) for name in ("succ", "pred", "after_succ"))
        m.d.comb += [succ.eq(Mux(rank + 1 < size, rank + 1, 0)), pred.eq(Mux(rank == 0, size - 1, rank - 1)),
                     after_succ.eq(Mux(succ + 1 < size, succ + 1, 0))]
        m.d.comb += self.config_ok.eq((size >= 2) & (size <= MAX_NODES) & (rank < size) & (lines != 0)
                                      & (size * lines <= depth))

        m.submodules.vector = vector = Memory(shape=LINE_BITS, depth=depth, init=[])
        own, store, result = vector.read_port(), vector.write_port(), vector.read_port()
        m.d.comb += [result.addr.eq(self.read_addr), self.read_data.eq(result.data)]

        running = self.busy
        stored = Signal(range(depth + 1))
        inject_line = Signal(range(depth + 1))
        # Packets of this node in its stage, engine or send queue (the send queue's ``sent`` pulse
        # comes a cycle late, which only makes the count cautious).
        held = Signal(range(room + 2))

        with m.If(self.start & ~running & self.config_ok):
            m.d.sync += [running.eq(1), self.done.eq(0), stored.eq(0), inject_line.eq(0), self.sent.eq(0)]
        m.d.comb += self.load.ready.eq(~running)

        # Received packets: checked, then taken into the stage (or dropped).
        rx = net.rx_data
        packet = rx.payload
        line = packet.data_reply()
        phase, segment = packet.header.remote, packet.header.range
        intact = checksum(packet) == 0
        in_range = (packet.header.src == pred) & (packet.header.ptype == PacketType.DATA) & \
            (segment < size) & (line.line < lines)
        expected = Mux(phase == ALL_GATHER, segment != succ, segment != rank)
        good = intact & in_range & expected
        final = (phase == REDUCE_SCATTER) & (segment == succ)
        forward = (phase == REDUCE_SCATTER) | (segment != after_succ)

        stage_valid = Signal()
        stage = Signal(data.StructLayout({"kind": _Kind, "store": 1, "send": 1, "phase": 1,
                                          "segment": NODE_BITS, "line": range(depth), "data": LINE_BITS}))
        m.submodules.engine = engine = ReductionEngine(tag_width=3 + NODE_BITS + len(stage.line))
        free = ~stage_valid | engine.i.ready
        take_rx = Signal()
        take_own = Signal()
        m.d.comb += [take_rx.eq(rx.valid & good & running & free & (~forward | (held < room))),
                     take_own.eq(~take_rx & running & (inject_line < lines) & free & (held < room - 1))]
        m.d.comb += rx.ready.eq(take_rx | (rx.valid & ~good))
        with m.If(take_rx):
            m.d.sync += [stage.kind.eq(Mux(phase == ALL_GATHER, _Kind.GATHER, _Kind.ADD)),
                         stage.store.eq((phase == ALL_GATHER) | final), stage.send.eq(forward),
                         stage.phase.eq((phase == ALL_GATHER) | final), stage.segment.eq(segment),
                         stage.line.eq(line.line), stage.data.eq(line.data)]
        with m.Elif(take_own):
            m.d.sync += [stage.kind.eq(_Kind.INJECT), stage.store.eq(0), stage.send.eq(1),
                         stage.phase.eq(REDUCE_SCATTER), stage.segment.eq(rank), stage.line.eq(inject_line),
                         inject_line.eq(inject_line + 1)]
        with m.If(take_rx | take_own):
            m.d.sync += stage_valid.eq(1)
        with m.Elif(engine.i.ready):
            m.d.sync += stage_valid.eq(0)
        m.d.comb += [own.en.eq(take_rx | take_own),
                     own.addr.eq(Mux(take_rx, segment, rank) * lines + Mux(take_rx, line.line, inject_line))]
        sends = (take_rx & forward) | take_own
        m.d.sync += held.eq(held + sends - net.sent[2])

        m.d.comb += [engine.i.valid.eq(stage_valid),
                     engine.i.payload.a.eq(Mux(stage.kind == _Kind.INJECT, own.data, stage.data)),
                     engine.i.payload.b.eq(Mux(stage.kind == _Kind.ADD, own.data, _NEG_ZERO_LINE)),
                     engine.i.payload.tag.eq(Cat(stage.store, stage.send, stage.phase, stage.segment,
                                                 stage.line))]

        # Engine results: stored, sent, or both.
        out = engine.o.payload
        out_store, out_send, out_phase = out.tag[0], out.tag[1], out.tag[2]
        out_segment = out.tag[3:3 + NODE_BITS]
        out_line = out.tag[3 + NODE_BITS:]
        m.d.comb += engine.o.ready.eq(~out_send | net.tx_data.ready)
        leaving = engine.o.valid & engine.o.ready
        reply = Signal(Packet)
        m.d.comb += [reply.header.ptype.eq(PacketType.DATA), reply.header.dst.eq(succ),
                     reply.header.src.eq(rank), reply.header.range.eq(out_segment),
                     reply.header.remote.eq(out_phase), reply.data_reply().line.eq(out_line),
                     reply.data_reply().last.eq(out_line == lines - 1), reply.data_reply().data.eq(out.sum),
                     net.tx_data.payload.eq(sealed(reply)), net.tx_data.valid.eq(engine.o.valid & out_send)]
        loading = self.load.valid & ~running
        m.d.comb += [store.en.eq(loading | (leaving & out_store)),
                     store.addr.eq(Mux(loading, self.load.payload.addr, out_segment * lines + out_line)),
                     store.data.eq(Mux(loading, self.load.payload.data, out.sum))]
        with m.If(leaving & out_send):
            m.d.sync += self.sent.eq(self.sent + 1)
        with m.If(leaving & out_store):
            m.d.sync += stored.eq(stored + 1)
            with m.If(stored + 1 == size * lines):
                m.d.sync += [running.eq(0), self.done.eq(1)]

        # Nothing of the ring travels on the task or RDMA channels.
        m.d.comb += [net.rx_task.ready.eq(1), net.rx_rdma.ready.eq(1),
                     net.tx_task.valid.eq(0), net.tx_rdma.valid.eq(0)]
        saturating_count(m, self.malformed, rx.valid & ~intact)
        stray = rx.valid & intact & ~(in_range & expected)
        dropped = pulse_count(stray, net.rx_task.valid, net.rx_rdma.valid)
        add_saturating(m, self.unexpected, dropped)  # up to three drops a cycle: saturate, never wrap
        with m.If(net.overflow):
            m.d.sync += self.overflow.eq(1)
        return m


RING_DROPS = {
    "malformed": "received packets whose check byte fails",
    "unexpected": "intact packets not from the predecessor, out of range, of a segment not expected in their "
                  "phase, or on the task or RDMA channel",
    "overflow": "flits the network interface dropped: beyond its credits or on channel 3 (sticky)",
}

register_block(
    "ring_node", RingNode, family="collective",
    drops=RING_DROPS,
    summary="Ring all-reduce node on a switch port: reduce-scatter through the reduction engine, then "
            "all-gather, one 448-bit line per packet.",
    golden="golden.collective.ring:ring_all_reduce",
)
