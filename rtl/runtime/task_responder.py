"""The task responder: checks a task and finds which of its slots this node can execute."""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.streams import any_of_chain
from ..net.packet import ITEMS, NODE_BITS, Packet, home_owner
from ..registration import Parameterized, register_block
from .common import BLOCK_PARAM, ConfigSignature, range_lines

__all__ = ["TaskResponder", "RESPONDER_DROPS", "responded_layout"]

RESPONDER_DROPS = ("task_mask", "task_range", "task_row", "task_col", "misrouted")


def responded_layout():
    """A checked task: the packet, its local slot mask and every slot's owner node."""
    return data.StructLayout({
        "packet": Packet,
        "local": ITEMS,
        "owners": data.ArrayLayout(NODE_BITS, ITEMS),
    })


class TaskResponder(Parameterized, wiring.Component):
    """Checks a task's integrity and decides which of its slots are local, remote or both.

    Tasks come from the spawner of this node and from the network (the classifier), in two
    independent lanes: a network task never waits behind a spawned one, whose remote slots may
    be waiting for the network (that wait would close a cycle between two nodes' task traffic;
    see the deadlock argument in ``docs/runtime.md``). Checks in each lane, in order (the
    first failure is counted, as in :func:`golden.runtime.protocol.respond`): the slot mask
    is 0 (``task_mask``); the range is not below ``config.ranges`` (``task_range``); an
    occupied slot's row is not below ``config.rows`` (``task_row``); an occupied slot's column
    is outside the range's lines (``task_col``); a task from the network is not wholly local
    (``misrouted``: forwarding is one hop, so a forwarded task must be wholly local where it
    lands).

    Parameters
    ----------
    block : int
        Lines per data range, 1 to 255.

    Attributes
    ----------
    config : In(ConfigSignature())
    spawned, network : In(stream.Signature(Packet))
        Tasks from the spawner and from the classifier.
    o, o_network : Out(stream.Signature(responded_layout()))
        Good spawned / network tasks, with ``local`` (slots whose row this node owns) and
        ``owners`` (registered).
    dropped, dropped_network : Out(5)
        One-cycle pulses per lane, bit per reason in ``RESPONDER_DROPS`` order.

    Notes
    -----
    Latency: 1 cycle. Throughput: one task per cycle in each lane.
    """

    PARAMS = (
        BLOCK_PARAM,
    )

    def __init__(self, *, block=20):
        super().__init__({
            "config": In(ConfigSignature()),
            "spawned": In(stream.Signature(Packet)),
            "network": In(stream.Signature(Packet)),
            "o": Out(stream.Signature(responded_layout())),
            "o_network": Out(stream.Signature(responded_layout())),
            "dropped": Out(len(RESPONDER_DROPS)),
            "dropped_network": Out(len(RESPONDER_DROPS)),
        })

    def elaborate(self, platform):
        m = Module()
        self._lane(m, self.spawned, self.o, self.dropped, from_network=False)
        self._lane(m, self.network, self.o_network, self.dropped_network, from_network=True)
        return m

    def _lane(self, m, source, out, dropped_port, *, from_network):
        config = self.config
        name = "network" if from_network else "spawned"
        packet = source.payload
        header = packet.header
        task = packet.task()
        first, lines = range_lines(m, header.range, self._block, config.rows, name)
        owners = [Signal(NODE_BITS, name=f"{name}_owner{slot}") for slot in range(ITEMS)]
        local = Signal(ITEMS, name=f"{name}_local")
        row_flags, col_flags = [], []
        for slot in range(ITEMS):
            item = task.items[slot]
            occupied = task.mask[slot]
            m.d.comb += owners[slot].eq(home_owner(item.row, config.home_shift, config.node_mask))
            m.d.comb += local[slot].eq(occupied & (owners[slot] == config.node))
            row_flags.append(occupied & (item.row >= config.rows))
            col_flags.append(occupied & ((item.col < first) | (item.col >= first + lines)))
        reasons = [Signal(name=f"{name}_bad_{reason}") for reason in RESPONDER_DROPS]
        m.d.comb += [
            reasons[0].eq(task.mask == 0),
            reasons[1].eq(header.range >= config.ranges),
            reasons[2].eq(any_of_chain(row_flags)),
            reasons[3].eq(any_of_chain(col_flags)),
            reasons[4].eq((local != task.mask) if from_network else 0),
        ]
        bad = Signal(name=f"{name}_bad")
        m.d.comb += bad.eq(any_of_chain(reasons))

        with m.If(out.ready):
            m.d.sync += out.valid.eq(0)
        m.d.comb += source.ready.eq(bad | ~out.valid | out.ready)
        dropped = Signal(len(RESPONDER_DROPS), name=f"{name}_dropped")
        with m.If(source.valid & source.ready):
            with m.If(bad):
                earlier = Const(0, 1)
                for bit, reason in enumerate(reasons):
                    m.d.comb += dropped[bit].eq(reason & ~earlier)
                    earlier = earlier | reason
            with m.Else():
                m.d.sync += [out.valid.eq(1), out.payload.packet.eq(packet), out.payload.local.eq(local)]
                for slot in range(ITEMS):
                    m.d.sync += out.payload.owners[slot].eq(owners[slot])
        m.d.sync += dropped_port.eq(dropped)


register_block(
    "runtime_task_responder", TaskResponder, family="runtime",
    summary="FCsN task responder: task integrity and range checks, local/remote slot decision.",
    golden="golden.runtime.protocol:respond",
    drops={"dropped": "spawned tasks dropped, bit per reason (RESPONDER_DROPS)",
           "dropped_network": "network tasks dropped, bit per reason (RESPONDER_DROPS)"},
)
