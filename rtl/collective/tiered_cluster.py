"""A simulated two-level all-reduce network: region switches with their control units under a root switch."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..registration import Param, check_choice, check_int, register_block
from ..runtime.packet import NODE_BITS
from ..runtime.switch import SWITCH_NODES, Switch
from .gcu import GCU_COUNTERS, NETWORK_PARAMS, GlobalControlUnit
from .gcu_cluster import attach, expose_leaves, leaf_members
from .reduction_table import COUNTER_BITS
from .reduction_unit import MODES, SLOT_CHOICES, ReductionUnit
from .region_unit import REGION_COUNTERS, RegionalControlUnit

__all__ = ["TieredCluster", "switch_size"]


def switch_size(ports):
    """The smallest runtime switch (:data:`~rtl.runtime.switch.SWITCH_NODES`) with ``ports`` ports."""
    return min(nodes for nodes in SWITCH_NODES if nodes >= ports)


class TieredCluster(wiring.Component):
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
    <counter> : Out(16)
        The GCU's counters under its names, and region *r*'s as ``r<r>_<name>``.
    """

    def __init__(self, *, regions=2, region_leaves=2, partitions=8, chunks=4, slots=2, mode="deterministic",
                 queue_depth=8, switch_depth=4):
        self._regions = check_int("regions", regions, 2, (1 << NODE_BITS) - 1)
        self._region_leaves = check_int("region_leaves", region_leaves, 2, (1 << NODE_BITS) - 1)
        check_choice("slots", slots, SLOT_CHOICES)
        check_choice("mode", mode, MODES)
        self._switch_depth = check_int("switch_depth", switch_depth, 2, 1024)
        self._queue_depth = queue_depth
        self._root_nodes, self._region_nodes = switch_size(regions + 1), switch_size(region_leaves + 1)
        shared = dict(partitions=partitions, chunks=chunks, slots=slots, mode=mode, queue_depth=queue_depth)
        self._gcu = GlobalControlUnit(leaves=regions, node=self._root_nodes - 1, tx_credits=switch_depth,
                                      **shared)
        self._units = [RegionalControlUnit(leaves=region_leaves, node=self._region_nodes - 1, region=region,
                                           gcu=self._root_nodes - 1, down_credits=switch_depth,
                                           up_credits=switch_depth, **shared)
                       for region in range(regions)]
        self._gcu_counters = (*GCU_COUNTERS, *(f"reduction_{name}" for name in ReductionUnit.counter_names()),
                              "barrier_bad_leaf", "barrier_duplicates")
        members = leaf_members(regions * region_leaves)
        members.update({name: Out(COUNTER_BITS) for name in self._gcu_counters})
        members.update({f"r{region}_{name}": Out(COUNTER_BITS)
                        for region in range(regions) for name in REGION_COUNTERS})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.root = root = Switch(nodes=self._root_nodes, depth=self._switch_depth,
                                          rx_credits=self._queue_depth)
        m.submodules.gcu = gcu = self._gcu
        attach(m, root, self._root_nodes - 1, gcu)
        for name in self._gcu_counters:
            m.d.comb += getattr(self, name).eq(getattr(gcu, name))
        for region, unit in enumerate(self._units):
            switch = Switch(nodes=self._region_nodes, depth=self._switch_depth, rx_credits=self._queue_depth)
            m.submodules[f"region{region}_switch"] = switch
            m.submodules[f"region{region}_unit"] = unit
            attach(m, switch, self._region_nodes - 1, unit, "down")
            attach(m, root, region, unit, "up")
            expose_leaves(m, self, switch, self._region_leaves, first=region * self._region_leaves)
            for name in REGION_COUNTERS:
                m.d.comb += getattr(self, f"r{region}_{name}").eq(getattr(unit, name))
        return m


register_block(
    "tiered_cluster", TieredCluster, family="collective",
    summary="Simulated two-level all-reduce network: region switches with regional control units on a "
            "root switch with the GCU, leaves on the region switches.",
    params=[
        Param("regions", int, 2, "region switches", minimum=2, maximum=15),
        Param("region_leaves", int, 2, "leaves per region", minimum=2, maximum=15),
        *NETWORK_PARAMS,
        Param("switch_depth", int, 4, "switch input buffer entries per channel", minimum=2, maximum=1024),
    ],
)
