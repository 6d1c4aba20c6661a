"""A sliced all-reduce network: one global control unit slice per leaf, each on a switch port of its own."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..net.switch import SWITCH_DEPTH_PARAM, SWITCH_NODES, Switch
from ..registration import Param, Parameterized, check_int, register_block
from .gcu import NETWORK_PARAMS, GlobalControlUnit, unit_counters, unit_drops
from .gcu_cluster import attach, count_switch_drops, expose_leaves, leaf_members
from .reduction_table import COLLECTIVE_COUNTER_BITS

__all__ = ["SlicedGcuCluster"]


def _sum_saturating(m, name, terms, width):
    """The sum of ``terms`` (saturating counters) as a ``width``-bit count that stops at its largest
    value: one slice at its limit, or several adding past it, read "at least this many"."""
    total = Signal(width + (len(terms) - 1).bit_length(), name=f"{name}_sum")
    m.d.comb += total.eq(sum(terms))
    limit = (1 << width) - 1
    return Mux(total > limit, limit, total)


class SlicedGcuCluster(Parameterized, wiring.Component):
    """An all-reduce with the reduction spread over the switch: a GCU slice on a port per leaf.

    A :class:`~rtl.net.switch.Switch` of ``nodes`` ports holds the ``leaves`` leaves on ports
    ``0 .. leaves - 1`` (their SmartNICs are outside, as in
    :class:`~rtl.collective.gcu_cluster.GcuCluster`) and ``leaves`` slices on ports
    ``leaves .. 2 * leaves - 1``. Slice ``s`` (node id ``leaves + s``) is an unchanged
    :class:`~rtl.collective.gcu.GlobalControlUnit` with ``partitions`` partitions: it owns the
    global partitions ``p`` with ``p mod leaves == s``, global ``p`` being its local partition
    ``p // leaves`` (the ``range`` field of the packets to and from it). So the gradient has
    ``leaves * partitions`` partitions of ``chunks`` lines. A reduce-scatter inside the switch:

    * each leaf sends every partition's lines to the slice that owns it, and a fetch of it (a
      broadcast on request, as to the GCU; nothing is pushed);
    * each slice reduces its partitions (in leaf-id order in the deterministic mode: bit-identical
      under any arrival order, as the GCU) and answers every leaf's fetch with the sums.

    Each link then carries ``partitions * chunks`` lines per slice, ``Z/P`` lines in all, each
    way: a leaf sends ``Z/P`` and receives ``Z/P``, a slice receives ``Z/P`` (``Z/(P N)`` from
    each leaf) and sends ``Z/P`` (its ``Z/(P N)`` to each leaf), and the two directions overlap (a
    slice answers fetches of reduced partitions while taking lines of the next ones). The time
    stays near ``Z/P`` cycles whatever ``leaves`` is, where the single-port GCU takes
    ``leaves * Z/P``. The leaves stagger their sends (the testbench's driver,
    :class:`scripts.sim.devices.collective.SlicedTB`): in round ``r`` (the global partitions
    ``r * leaves .. r * leaves + leaves - 1``, local partition ``r`` of every slice) leaf ``i``
    sends to slices ``i, i + 1, ...`` (mod ``leaves``), so that no two leaves in step target one
    slice at once, and a leaf opens a partition only once it holds the sums of the one ``slots``
    rounds before (the same slice's reduction slot).

    The barrier is slice 0's (the leaves send it there once they hold every partition's sums);
    the other slices' barrier tables see no traffic. The counters are the slices' summed
    (saturating at 65535), under the GCU's names; ``overflow`` is any slice's. There is no
    parameter update here (the GCU's ``update="adam"`` is not offered).

    Latency: a partition's sums leave its slice ``leaves * chunks + ~20`` cycles after its last
    line arrives (the deterministic reducer's passes) and reach a leaf 3 cycles later (the
    switch). Throughput: one line per cycle per link and direction at best (the switch's port
    rate); the leaves' and slices' credits (``switch_depth``, ``queue_depth``) against the credit
    round trip set how close it gets (``docs/collective.md``, the sliced all-reduce's table).

    Parameters
    ----------
    nodes : int
        Switch ports: 4, 8 or 16 (``2 * leaves`` at least).
    leaves : int
        Leaves, and slices: 2 to ``nodes // 2``.
    partitions : int
        Partitions per slice (the gradient has ``leaves * partitions``), 1 to 64.
    chunks, slots, mode, queue_depth
        Each slice's, as :class:`~rtl.collective.gcu.GlobalControlUnit`.
    switch_depth : int
        Switch input buffer entries per port and channel.

    Attributes
    ----------
    p<i>_in, p<i>_in_credit, p<i>_out, p<i>_out_credit
        Leaf *i*'s switch port, as :class:`~rtl.collective.gcu_cluster.GcuCluster` names them.
    <counter> : Out(16)
        The slices' counters summed, under the GCU's names (saturating).
    overflow : Out(1)
        Any slice's sticky overflow flag.
    switch_dropped : Out(16)
        Flits the switch dropped (on channel 3, or unroutable), saturating.
    """

    PARAMS = (
        # The defaults are the smallest network (2 leaves, 2 slices): each slice is a whole GCU.
        Param("nodes", int, 4, "switch ports", choices=SWITCH_NODES[1:]),
        Param("leaves", int, 2, "leaves, and GCU slices", minimum=2, maximum=8),
        *NETWORK_PARAMS,
        SWITCH_DEPTH_PARAM,
    )

    @classmethod
    def check_params(cls, values):
        """A port for each leaf and each slice."""
        check_int("leaves", values["leaves"], 2, values["nodes"] // 2)

    def __init__(self, *, nodes=4, leaves=2, partitions=8, chunks=4, slots=2, mode="deterministic",
                 queue_depth=8, switch_depth=4):
        # Each slice sends only with a credit for the switch's input buffer at its port.
        self._slices = [GlobalControlUnit(leaves=leaves, node=leaves + s, partitions=partitions,
                                          chunks=chunks, slots=slots, mode=mode, queue_depth=queue_depth,
                                          tx_credits=switch_depth)
                        for s in range(leaves)]
        members = leaf_members(leaves)
        self._counters = unit_counters()
        members.update({name: Out(COLLECTIVE_COUNTER_BITS) for name in self._counters})
        members.update({"overflow": Out(1), "switch_dropped": Out(COLLECTIVE_COUNTER_BITS)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        leaves = self._leaves
        m.submodules.switch = switch = Switch(nodes=self._nodes, depth=self._switch_depth,
                                              rx_credits=self._queue_depth)
        for s, unit in enumerate(self._slices):
            m.submodules[f"slice{s}"] = unit
            attach(m, switch, leaves + s, unit)
        count_switch_drops(m, self.switch_dropped, [switch])
        expose_leaves(m, self, switch, leaves)
        for name in self._counters:
            terms = [getattr(unit, name) for unit in self._slices]
            m.d.comb += getattr(self, name).eq(_sum_saturating(m, name, terms, COLLECTIVE_COUNTER_BITS))
        overflow = self._slices[0].overflow
        for unit in self._slices[1:]:
            overflow = overflow | unit.overflow
        m.d.comb += self.overflow.eq(overflow)
        return m


register_block(
    "sliced_gcu_cluster", SlicedGcuCluster, family="collective",
    drops={**unit_drops(), "switch_dropped": "flits the switch dropped (channel 3, unroutable)"},
    summary="Sliced all-reduce network: a global control unit slice per leaf on a runtime switch, "
            "partition p reduced at slice p mod N, so every link carries Z/P lines each way.",
    golden="golden.collective.reduction:reduce_leaf_order",
)
