"""A simulated ring all-reduce network: ring nodes on the ports of one runtime switch."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..net.packet import LINE_BITS, NODE_BITS, Flit
from ..net.switch import SWITCH_NODES, Switch
from ..registration import Param, Parameterized, check_int, register_block
from .gcu_cluster import count_switch_drops, expose_port
from .reduction_table import COLLECTIVE_COUNTER_BITS
from .ring_node import RING_DROPS, RING_PARAMS, SENT_BITS, RingNode, load_layout

__all__ = ["RingCluster"]


class RingCluster(Parameterized, wiring.Component):
    """A :class:`~rtl.runtime.switch.Switch` of ``ports`` ports with a :class:`RingNode` on ports
    ``0 .. nodes - 1``.

    Node *i* has rank and node id *i*. The ring's ``size`` and ``lines`` per segment are inputs, so
    one build runs rings of 2 to ``nodes`` nodes; nodes from ``size`` on stay idle. Ports from
    ``nodes`` on are left to the outside (the testbench), with the switch's credit protocol.

    Parameters
    ----------
    ports : int
        Switch ports: 4, 8 or 16.
    nodes : int
        Ring nodes, 2 to ``ports``.
    depth, queue_depth, switch_depth
        As :class:`~rtl.collective.ring_node.RingNode` (``switch_depth`` is also the switch's
        input buffer entries per channel).

    Attributes
    ----------
    size : In(5)
    lines : In(range(depth + 1))
        The ring's size and lines per segment, for every node.
    n<i>_load, n<i>_start, n<i>_busy, n<i>_done, n<i>_config_ok, n<i>_read_addr, n<i>_read_data, \
n<i>_sent, n<i>_malformed, n<i>_unexpected, n<i>_overflow
        Node *i*'s ports of those names.
    n<i>_up, n<i>_down : Out(1)
        A flit left node *i* for the switch / reached node *i* from the switch this cycle: a
        monitor counts packets and packet-hops from these.
    p<j>_in, p<j>_in_credit, p<j>_out, p<j>_out_credit
        Switch port *j* for ``j >= nodes``, as :class:`~rtl.runtime.switch.Switch` names them.
    dropped : Out(range(4 * ports + 1))
        The switch's unroutable flits of the previous cycle (a count per cycle, for a monitor).
    switch_dropped : Out(16)
        The same, added up (saturating): the count the host reads.
    """

    PARAMS = (
        Param("ports", int, 4, "switch ports", choices=SWITCH_NODES[1:]),
        Param("nodes", int, 4, "ring nodes (ports 0 .. nodes - 1)", minimum=2, maximum=16),
        *RING_PARAMS,
    )

    @classmethod
    def check_params(cls, values):
        """Every ring node has a switch port."""
        check_int("nodes", values["nodes"], 2, values["ports"])

    def __init__(self, *, ports=4, nodes=4, depth=64, queue_depth=16, switch_depth=4):
        self._node = dict(depth=depth, queue_depth=queue_depth, switch_depth=switch_depth)
        self._first = RingNode(**self._node)  # validates the rest of the parameters now
        members = {"size": In(NODE_BITS + 1), "lines": In(range(depth + 1)),
                   "dropped": Out(range(4 * ports + 1)), "switch_dropped": Out(COLLECTIVE_COUNTER_BITS)}
        for node in range(nodes):
            members.update({
                f"n{node}_load": In(stream.Signature(load_layout(depth))), f"n{node}_start": In(1),
                f"n{node}_busy": Out(1), f"n{node}_done": Out(1), f"n{node}_config_ok": Out(1),
                f"n{node}_read_addr": In(range(depth)), f"n{node}_read_data": Out(LINE_BITS),
                f"n{node}_sent": Out(SENT_BITS), f"n{node}_malformed": Out(COLLECTIVE_COUNTER_BITS),
                f"n{node}_unexpected": Out(COLLECTIVE_COUNTER_BITS),
                f"n{node}_up": Out(1), f"n{node}_down": Out(1),
                f"n{node}_overflow": Out(1)})
        for port in range(nodes, ports):
            members.update({f"p{port}_in": In(stream.Signature(Flit)), f"p{port}_in_credit": Out(3),
                            f"p{port}_out": Out(stream.Signature(Flit)), f"p{port}_out_credit": In(3)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.switch = switch = Switch(nodes=self._ports, depth=self._node["switch_depth"],
                                              rx_credits=self._node["queue_depth"])
        m.d.comb += self.dropped.eq(switch.dropped)
        count_switch_drops(m, self.switch_dropped, [switch])
        for index in range(self._nodes):
            node = self._first if index == 0 else RingNode(**self._node)
            m.submodules[f"node{index}"] = node
            wiring.connect(m, node.net_out, switch.port(index, "in"))
            wiring.connect(m, switch.port(index, "out"), node.net_in)
            m.d.comb += [switch.port(index, "out_credit").eq(node.net_in_credit),
                         node.net_out_credit.eq(switch.port(index, "in_credit")),
                         node.rank.eq(index), node.size.eq(self.size), node.lines.eq(self.lines)]
            wiring.connect(m, wiring.flipped(getattr(self, f"n{index}_load")), node.load)
            for name in ("start", "read_addr"):
                m.d.comb += getattr(node, name).eq(getattr(self, f"n{index}_{name}"))
            for name in ("busy", "done", "config_ok", "read_data", "sent", "malformed", "unexpected",
                         "overflow"):
                m.d.comb += getattr(self, f"n{index}_{name}").eq(getattr(node, name))
            m.d.comb += [getattr(self, f"n{index}_up").eq(node.net_out.valid & node.net_out.ready),
                         getattr(self, f"n{index}_down").eq(node.net_in.valid & node.net_in.ready)]
        for port in range(self._nodes, self._ports):
            expose_port(m, self, switch, port, port)
        return m


register_block(
    "ring_cluster", RingCluster, family="collective",
    # Node i's as n<i>_<name>; listed for the default build's four nodes.
    drops={**{f"n{node}_{port}": what for node in range(4) for port, what in RING_DROPS.items()},
           "switch_dropped": "flits the switch dropped (channel 3, unroutable)"},
    summary="Simulated ring all-reduce network: ring nodes on the ports of a runtime switch, the ring's size "
            "and segment length set at run time.",
    golden="golden.collective.ring:ring_all_reduce",
)
