"""A simulated all-reduce network: the global control unit on the last port of a runtime switch."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..net.packet import Flit
from ..net.switch import SWITCH_DEPTH_PARAM, SWITCH_NODES, Switch
from ..registration import Param, Parameterized, check_int, register_block
from .gcu import GCU_PARAMS, GlobalControlUnit, unit_counters, unit_drops, update_members
from .reduction_table import COLLECTIVE_COUNTER_BITS

__all__ = ["GcuCluster", "leaf_members", "attach", "expose_port", "expose_leaves", "count_switch_drops"]


def leaf_members(leaves, first=0):
    """The cluster's members of leaf ports ``p<first> .. p<first + leaves - 1>`` (the switch's names)."""
    members = {}
    for leaf in range(first, first + leaves):
        members.update({f"p{leaf}_in": In(stream.Signature(Flit)), f"p{leaf}_in_credit": Out(3),
                        f"p{leaf}_out": Out(stream.Signature(Flit)), f"p{leaf}_out_credit": In(3)})
    return members


def attach(m, switch, port, unit, prefix="net"):
    """Wire ``unit``'s ``<prefix>_in/out`` and credits to ``switch``'s port ``port``."""
    wiring.connect(m, getattr(unit, f"{prefix}_out"), switch.port(port, "in"))
    wiring.connect(m, switch.port(port, "out"), getattr(unit, f"{prefix}_in"))
    m.d.comb += [switch.port(port, "out_credit").eq(getattr(unit, f"{prefix}_in_credit")),
                 getattr(unit, f"{prefix}_out_credit").eq(switch.port(port, "in_credit"))]


def count_switch_drops(m, counter, switches):
    """Add the flits ``switches`` dropped (each switch's ``dropped``: last cycle's count) to
    ``counter``, saturating: the switches' own count is per cycle, not one the host can read."""
    total = Signal(len(counter) + 1, name="switch_dropped_total")
    drops = switches[0].dropped
    for switch in switches[1:]:
        drops = drops + switch.dropped
    m.d.comb += total.eq(counter + drops)
    m.d.sync += counter.eq(Mux(total > (1 << len(counter)) - 1, (1 << len(counter)) - 1, total))


def expose_port(m, cluster, switch, port, ours):
    """Switch port ``port`` as the cluster's leaf port ``p<ours>`` (see :func:`leaf_members`)."""
    wiring.connect(m, wiring.flipped(getattr(cluster, f"p{ours}_in")), switch.port(port, "in"))
    wiring.connect(m, switch.port(port, "out"), wiring.flipped(getattr(cluster, f"p{ours}_out")))
    m.d.comb += [getattr(cluster, f"p{ours}_in_credit").eq(switch.port(port, "in_credit")),
                 switch.port(port, "out_credit").eq(getattr(cluster, f"p{ours}_out_credit"))]


def expose_leaves(m, cluster, switch, leaves, first=0):
    """Switch ports ``0 .. leaves - 1`` as the cluster's leaf ports from ``p<first>`` on."""
    for leaf in range(leaves):
        expose_port(m, cluster, switch, leaf, first + leaf)


class GcuCluster(Parameterized, wiring.Component):
    """A :class:`~rtl.runtime.switch.Switch` of ``nodes`` ports with the GCU on port ``nodes - 1``.

    Ports ``0 .. leaves - 1`` are the leaves' (their SmartNICs are outside, in the testbench or
    the host), each with the switch's credit protocol.

    Parameters
    ----------
    nodes : int
        Switch ports: 4, 8 or 16.
    leaves : int
        Leaves, 2 to ``nodes - 1``.
    partitions, chunks, slots, mode, queue_depth, update, update_lanes
        As :class:`~rtl.collective.gcu.GlobalControlUnit`.
    switch_depth : int
        Switch input buffer entries per port and channel.

    Attributes
    ----------
    p<i>_in : In(stream.Signature(Flit))
        From leaf *i* into the switch (send only with a credit).
    p<i>_in_credit : Out(3)
        Credits back to leaf *i*, a pulse per channel.
    p<i>_out : Out(stream.Signature(Flit))
        From the switch to leaf *i* (registered; the switch holds the leaf's receive credits).
    p<i>_out_credit : In(3)
        Leaf *i* freed a receive entry of that channel.

    The names are the switch's own (:class:`~rtl.runtime.switch.Switch`).
    <counter> : Out(16)
        The GCU's counters, under their names there.
    overflow : Out(1)
        The GCU's sticky overflow flag.
    switch_dropped : Out(16)
        Flits the switch dropped (on channel 3, or unroutable), saturating.
    load, scalars, update_nonfinite, update_clear
        The GCU's, with ``update="adam"``.
    """

    PARAMS = (
        Param("nodes", int, 4, "switch ports", choices=SWITCH_NODES[1:]),
        Param("leaves", int, 3, "leaves", minimum=2, maximum=15),
        *GCU_PARAMS,
        SWITCH_DEPTH_PARAM,
    )

    @classmethod
    def check_params(cls, values):
        """The leaves and the GCU are the switch's nodes."""
        check_int("leaves", values["leaves"], 2, values["nodes"] - 1)

    def __init__(self, *, nodes=4, leaves=3, partitions=8, chunks=4, slots=2, mode="deterministic",
                 queue_depth=8, switch_depth=4, update="none", update_lanes=1):
        # The GCU's send credits are the switch's input buffer at its port (it has no backpressure).
        self._gcu = dict(leaves=leaves, node=nodes - 1, partitions=partitions, chunks=chunks, slots=slots,
                         mode=mode, queue_depth=queue_depth, tx_credits=switch_depth, update=update,
                         update_lanes=update_lanes)
        self._unit = GlobalControlUnit(**self._gcu)  # validates the rest of the parameters now
        members = leaf_members(leaves)
        counters = unit_counters()
        members.update({name: Out(COLLECTIVE_COUNTER_BITS) for name in counters})
        members.update({"overflow": Out(1), "switch_dropped": Out(COLLECTIVE_COUNTER_BITS)})
        self._update_ports = update_members(update, partitions, chunks)
        members.update(self._update_ports)
        self._counters = counters
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        gcu_port = self._nodes - 1
        m.submodules.switch = switch = Switch(nodes=self._nodes, depth=self._switch_depth,
                                              rx_credits=self._gcu["queue_depth"])
        m.submodules.gcu = gcu = self._unit
        attach(m, switch, gcu_port, gcu)
        count_switch_drops(m, self.switch_dropped, [switch])
        expose_leaves(m, self, switch, self._leaves)
        for name in (*self._counters, "overflow"):
            m.d.comb += getattr(self, name).eq(getattr(gcu, name))
        for name, member in self._update_ports.items():
            if member.is_port:
                inward = member.flow == wiring.In
                ours, theirs = getattr(self, name), getattr(gcu, name)
                m.d.comb += theirs.eq(ours) if inward else ours.eq(theirs)
            else:
                wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(gcu, name))
        return m


register_block(
    "gcu_cluster", GcuCluster, family="collective",
    drops={**unit_drops(), "switch_dropped": "flits the switch dropped (channel 3, unroutable)"},
    summary="Simulated all-reduce network: the global control unit on the last port of a runtime switch, "
            "leaves on the others.",
    golden="golden.collective.delayed_update:delayed_update_step",
)
