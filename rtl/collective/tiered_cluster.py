"""A simulated two-level all-reduce network: region switches with their control units under a root switch."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..net.packet import VC
from ..net.switch import SWITCH_DEPTH_PARAM, SWITCH_NODES, Switch
from ..registration import Param, Parameterized, register_block
from .gcu import NETWORK_PARAMS, GlobalControlUnit, unit_counters, unit_drops
from .gcu_cluster import attach, count_switch_drops, expose_leaves, expose_port, leaf_members
from .reduction_table import COLLECTIVE_COUNTER_BITS
from .region_unit import REGION_COUNTERS, REGION_DROPS, RegionalControlUnit

__all__ = ["TieredCluster", "switch_size", "DAMAGED_BIT"]

# The packet bit a ``damage`` pulse flips: a data bit, so the header still routes the packet.
DAMAGED_BIT = 100


def switch_size(ports):
    """The smallest runtime switch (:data:`~rtl.runtime.switch.SWITCH_NODES`) with ``ports`` ports."""
    return min(nodes for nodes in SWITCH_NODES if nodes >= ports)


class TieredCluster(Parameterized, wiring.Component):
    """``regions`` region switches of ``region_leaves`` leaves each, their control units on a root switch.

    Each switch is its own 4-bit id space (:data:`rtl.runtime.packet.NODE_BITS`), so two levels
    hold up to 15 x 15 leaves. Region *r*'s switch has its leaves on ports ``0 .. region_leaves - 1``
    and its :class:`~rtl.collective.region_unit.RegionalControlUnit` on its last port; the unit is
    port *r* of the root switch, whose last port is the
    :class:`~rtl.collective.gcu.GlobalControlUnit` (``leaves = regions``). Switch sizes are the
    smallest that fit.

    Parameters
    ----------
    regions : int
        Region switches, 2 to 15.
    region_leaves : int
        Leaves per region, 2 to 15.
    partitions, chunks, slots, mode, queue_depth
        As :class:`~rtl.collective.gcu.GlobalControlUnit` (the GCU and every regional unit).
    switch_depth : int
        Input buffer entries per port and channel of every switch.

    Attributes
    ----------
    p<i>_in, p<i>_in_credit, p<i>_out, p<i>_out_credit
        Leaf *i*'s switch port, as :class:`~rtl.collective.gcu_cluster.GcuCluster` names them; leaf
        ``i`` is leaf ``i mod region_leaves`` of region ``i // region_leaves`` (its node id there).
    p<n>_in, p<n>_in_credit, p<n>_out, p<n>_out_credit
        With ``n = regions * region_leaves``, where the root switch has a port to spare (``regions``
        not 3, 7 or 15): root port ``regions``, for a test to send what the GCU never would to a
        regional unit (its id on the root switch is ``regions``).
    damage : In(regions)
        Fault injection for tests (tie to 0): bit *r* flips packet bit :data:`DAMAGED_BIT` of a
        data packet the root switch delivers to region *r*'s unit in that cycle (its check byte
        then fails). Data replies only: the barrier's acknowledgements are not asked for again.
    <counter> : Out(16)
        The GCU's counters under its names, and region *r*'s as ``r<r>_<name>``.
    overflow, r<r>_overflow : Out(1)
        The units' sticky overflow flags.
    switch_dropped : Out(16)
        Flits every switch dropped together (on channel 3, or unroutable), saturating.
    """

    PARAMS = (
        Param("regions", int, 2, "region switches", minimum=2, maximum=15),
        Param("region_leaves", int, 2, "leaves per region", minimum=2, maximum=15),
        *NETWORK_PARAMS,
        SWITCH_DEPTH_PARAM,
    )

    def __init__(self, *, regions=2, region_leaves=2, partitions=8, chunks=4, slots=2, mode="deterministic",
                 queue_depth=8, switch_depth=4):
        self._queue_depth = queue_depth
        self._root_nodes, self._region_nodes = switch_size(regions + 1), switch_size(region_leaves + 1)
        shared = dict(partitions=partitions, chunks=chunks, slots=slots, mode=mode, queue_depth=queue_depth)
        self._gcu = GlobalControlUnit(leaves=regions, node=self._root_nodes - 1, tx_credits=switch_depth,
                                      **shared)
        self._units = [RegionalControlUnit(leaves=region_leaves, node=self._region_nodes - 1, region=region,
                                           gcu=self._root_nodes - 1, down_credits=switch_depth,
                                           up_credits=switch_depth, **shared)
                       for region in range(regions)]
        self._gcu_counters = unit_counters()
        self._spare = regions + 1 < self._root_nodes
        members = leaf_members(regions * region_leaves + int(self._spare))
        members.update({name: Out(COLLECTIVE_COUNTER_BITS) for name in self._gcu_counters})
        members.update({f"r{region}_{name}": Out(COLLECTIVE_COUNTER_BITS)
                        for region in range(regions) for name in REGION_COUNTERS})
        members.update({"damage": In(regions), "overflow": Out(1),
                        "switch_dropped": Out(COLLECTIVE_COUNTER_BITS)})
        members.update({f"r{region}_overflow": Out(1) for region in range(regions)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.root = root = Switch(nodes=self._root_nodes, depth=self._switch_depth,
                                          rx_credits=self._queue_depth)
        m.submodules.gcu = gcu = self._gcu
        attach(m, root, self._root_nodes - 1, gcu)
        for name in (*self._gcu_counters, "overflow"):
            m.d.comb += getattr(self, name).eq(getattr(gcu, name))
        switches = [root]
        for region, unit in enumerate(self._units):
            switch = Switch(nodes=self._region_nodes, depth=self._switch_depth, rx_credits=self._queue_depth)
            switches.append(switch)
            m.submodules[f"region{region}_switch"] = switch
            m.submodules[f"region{region}_unit"] = unit
            attach(m, switch, self._region_nodes - 1, unit, "down")
            wiring.connect(m, unit.up_out, root.port(region, "in"))
            delivered = root.port(region, "out")
            flip = self.damage[region] & (delivered.payload.vc == VC.DATA)
            m.d.comb += [unit.up_in.valid.eq(delivered.valid), delivered.ready.eq(unit.up_in.ready),
                         unit.up_in.payload.eq(delivered.payload.as_value() ^ (flip << DAMAGED_BIT)),
                         root.port(region, "out_credit").eq(unit.up_in_credit),
                         unit.up_out_credit.eq(root.port(region, "in_credit"))]
            expose_leaves(m, self, switch, self._region_leaves, first=region * self._region_leaves)
            for name in (*REGION_COUNTERS, "overflow"):
                m.d.comb += getattr(self, f"r{region}_{name}").eq(getattr(unit, name))
        count_switch_drops(m, self.switch_dropped, switches)
        if self._spare:  # the spare root port as the leaf port after the regions' leaves
            expose_port(m, self, root, self._regions, self._regions * self._region_leaves)
        return m


register_block(
    "tiered_cluster", TieredCluster, family="collective",
    # Region r's as r<r>_<name>; listed for the default build's two regions.
    drops={**unit_drops(),
           **{f"r{region}_{port}": what for region in range(2) for port, what in REGION_DROPS.items()},
           "switch_dropped": "flits any switch dropped (channel 3, unroutable)"},
    summary="Simulated two-level all-reduce network: region switches with regional control units on a "
            "root switch with the GCU, leaves on the region switches.",
    golden="golden.collective:TieredTable",
)
