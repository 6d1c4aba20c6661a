"""The task responder: checks a task and finds which of its slots this node can execute."""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import Param, check_int, register_block
from .common import ConfigSignature, range_lines
from .packet import ITEMS, NODE_BITS, Packet, home_owner

__all__ = ["TaskResponder", "RESPONDER_DROPS", "responded_layout"]

RESPONDER_DROPS = ("task_mask", "task_range", "task_row", "task_col", "misrouted")


def responded_layout():
    """A checked task: the packet, its local slot mask and every slot's owner node."""
    return data.StructLayout({
        "packet": Packet,
        "local": ITEMS,
        "owners": data.ArrayLayout(NODE_BITS, ITEMS),
    })


class TaskResponder(wiring.Component):
    """Checks a task's integrity and decides which of its slots are local, remote or both.

    Tasks come from the spawner of this node and from the network (the classifier), taken
    in turn when both wait. Checks, in order (the first failure is counted, as in
    :func:`golden.runtime.protocol.respond`): the slot mask is 0 (``task_mask``); the range
    is not below ``config.ranges`` (``task_range``); an occupied slot's row is not below
    ``config.rows`` (``task_row``); an occupied slot's column is outside the range's lines
    (``task_col``); a task from the network is not wholly local (``misrouted``: forwarding is
    one hop, so a forwarded task must be wholly local where it lands).

    Parameters
    ----------
    block : int
        Lines per data range, 1 to 255.

    Attributes
    ----------
    config : In(ConfigSignature())
    spawned, network : In(stream.Signature(Packet))
        Tasks from the spawner and from the classifier.
    o : Out(stream.Signature(responded_layout()))
        Good tasks, with ``local`` (slots whose row this node owns) and ``owners``.
    dropped : Out(5)
        One-cycle pulses, bit per reason in ``RESPONDER_DROPS`` order.

    Notes
    -----
    Latency: 1 cycle. Throughput: one task per cycle.
    """

    def __init__(self, *, block=20):
        self._block = check_int("block", block, 1, 255)
        super().__init__({
            "config": In(ConfigSignature()),
            "spawned": In(stream.Signature(Packet)),
            "network": In(stream.Signature(Packet)),
            "o": Out(stream.Signature(responded_layout())),
            "dropped": Out(len(RESPONDER_DROPS)),
        })

    def elaborate(self, platform):
        m = Module()
        config = self.config

        # Take the two inputs in turn when both wait.
        prefer_network = Signal()
        use_network = Signal()
        m.d.comb += use_network.eq(self.network.valid & (prefer_network | ~self.spawned.valid))
        packet = Packet(Signal(Packet.as_shape().size, name="candidate"))
        valid = Signal()
        m.d.comb += valid.eq(self.network.valid | self.spawned.valid)
        with m.If(use_network):
            m.d.comb += packet.eq(self.network.payload)
        with m.Else():
            m.d.comb += packet.eq(self.spawned.payload)

        header = packet.header
        task = packet.task()
        first, lines = range_lines(m, header.range, self._block, config.rows, "task")
        owners = [Signal(NODE_BITS, name=f"owner{slot}") for slot in range(ITEMS)]
        local = Signal(ITEMS)
        bad_row = Signal()
        bad_col = Signal()
        row_flags, col_flags = [], []
        for slot in range(ITEMS):
            item = task.items[slot]
            occupied = task.mask[slot]
            m.d.comb += owners[slot].eq(home_owner(item.row, config.home_shift, config.node_mask))
            m.d.comb += local[slot].eq(occupied & (owners[slot] == config.node))
            row_flags.append(occupied & (item.row >= config.rows))
            col_flags.append(occupied & ((item.col < first) | (item.col >= first + lines)))
        m.d.comb += [bad_row.eq(_any(row_flags)), bad_col.eq(_any(col_flags))]
        reasons = [Signal(name=f"bad_{reason}") for reason in RESPONDER_DROPS]
        m.d.comb += [
            reasons[0].eq(task.mask == 0),
            reasons[1].eq(header.range >= config.ranges),
            reasons[2].eq(bad_row),
            reasons[3].eq(bad_col),
            reasons[4].eq(use_network & (local != task.mask)),
        ]
        bad = Signal()
        m.d.comb += bad.eq(_any(reasons))

        free = ~self.o.valid | self.o.ready
        go = Signal()
        m.d.comb += go.eq(valid & (bad | free))
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        dropped = Signal(len(RESPONDER_DROPS))
        with m.If(go):
            with m.If(use_network):
                m.d.comb += self.network.ready.eq(1)
            with m.Else():
                m.d.comb += self.spawned.ready.eq(1)
            m.d.sync += prefer_network.eq(~use_network)
            with m.If(bad):
                earlier = Const(0, 1)
                for bit, reason in enumerate(reasons):
                    m.d.comb += dropped[bit].eq(reason & ~earlier)
                    earlier = earlier | reason
            with m.Else():
                m.d.sync += [
                    self.o.valid.eq(1),
                    self.o.payload.packet.eq(packet),
                    self.o.payload.local.eq(local),
                ]
                for slot in range(ITEMS):
                    m.d.sync += self.o.payload.owners[slot].eq(owners[slot])
        m.d.sync += self.dropped.eq(dropped)
        return m


def _any(values):
    result = Const(0, 1)
    for value in values:
        result = result | value
    return result


register_block(
    "runtime_task_responder", TaskResponder, family="runtime",
    summary="FCsN task responder: task integrity and range checks, local/remote slot decision.",
    params=[Param("block", int, 20, "lines per data range", minimum=1, maximum=255)],
)
