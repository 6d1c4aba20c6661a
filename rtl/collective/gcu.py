"""The global control unit on a switch port: gradient reduction, broadcast on request, and the barrier."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..net.net_interface import NetInterface
from ..net.packet import NODE_BITS, Flit, Packet, PacketType, sealed
from ..registration import Param, Parameterized, check_int, register_block
from .barrier_table import BarrierTable
from .fetch_slots import (
    FETCH_COUNTERS,
    VERSION_BITS,
    Intact,
    ReadPort,
    feed_reduction,
    line_store,
    serve_fetches,
)
from .parameter_update import UPDATE_LANES, ParameterUpdate, load_layout, scalars_signature
from .reduction_table import COLLECTIVE_COUNTER_BITS
from .reduction_unit import MODES, SLOT_CHOICES, ReductionUnit

__all__ = ["GlobalControlUnit", "GCU_COUNTERS", "unit_counters", "unit_drops", "sticky", "GCU_PARAMS",
           "NETWORK_PARAMS", "UPDATES", "update_members"]

UPDATES = ("none", "adam")


def unit_drops(prefix=""):
    """The ``drops=`` of a GCU (and of what a regional unit shares with it), port names after ``prefix``."""
    drops = {
        "malformed": "received packets whose check byte fails",
        "bad_requests": "fetches of a partition or from a leaf id out of range",
        "stale_requests": "fetches of a version already replaced",
        "duplicate_requests": "a second, different fetch in a request slot that still waits",
        "late_gradients": "gradient lines whose iteration tag is not their partition's next reduction",
        "reduction_bad_leaf": "gradient lines from a leaf id out of range",
        "reduction_bad_partition": "gradient lines of a partition id out of range",
        "reduction_bad_chunk": "gradient lines of a chunk out of range",
        "reduction_conflicts": "gradient lines of a partition whose slot holds another",
        "reduction_duplicates": "gradient lines a leaf already sent for the open reduction",
        "barrier_bad_leaf": "barriers from a leaf id out of range",
        "barrier_duplicates": "barriers from a leaf already waiting",
        "overflow": "a write refused by a queue kept from filling by credits or invariants (sticky)",
    }
    return {prefix + port: what for port, what in drops.items()}


def update_members(update, partitions, chunks):
    """The ports of the parameter update (``update="adam"``): the state load, Adam's scalars, the status."""
    if update == "none":
        return {}
    return {"load": In(stream.Signature(load_layout(partitions * chunks))),
            "scalars": In(scalars_signature()), "update_nonfinite": Out(1), "update_clear": In(1),
            "update_bad_loads": Out(COLLECTIVE_COUNTER_BITS)}


GCU_COUNTERS = ("malformed", *FETCH_COUNTERS, "late_gradients")


def unit_counters():
    """Every counter port of a GCU, in order: its own, the reduction unit's, the barrier table's."""
    return (*GCU_COUNTERS, *(f"reduction_{name}" for name in ReductionUnit.counter_names()),
            "barrier_bad_leaf", "barrier_duplicates")


def sticky(m, event, name):
    """A flag that ``event`` sets and only a reset clears."""
    flag = Signal(name=name)
    with m.If(event):
        m.d.sync += flag.eq(1)
    return flag


# The parameters the GCU and the simulated network around it share.
GCU_PARAMS = (
    Param("partitions", int, 8, "partitions", minimum=1, maximum=64),
    Param("chunks", int, 4, "448-bit lines per partition", minimum=1, maximum=256),
    Param("slots", int, 2, "partitions in flight", choices=SLOT_CHOICES),
    Param("mode", str, "deterministic", "order of summation", choices=MODES),
    Param("queue_depth", int, 8, "network queue entries per channel", minimum=2, maximum=1024),
    Param("update", str, "none", "a fetch returns the sums, or the parameters after Adam", choices=UPDATES),
    Param("update_lanes", int, 1, "elements the Adam step updates per cycle", choices=UPDATE_LANES),
)
# Those without the parameter update: what the regional control units share with the GCU.
NETWORK_PARAMS = tuple(param for param in GCU_PARAMS if not param.name.startswith("update"))


class GlobalControlUnit(Parameterized, wiring.Component):
    """An all-reduce through one switch port: leaves send gradient lines, then fetch the sums.

    Packets (the runtime's 512-bit format, :mod:`rtl.runtime.packet`; ``src`` is the leaf):

    * **data** packet to the GCU: one gradient line, ``range`` = partition, ``line`` = chunk;
    * **RDMA** packet to the GCU: a fetch of partition ``range``, reduced for the ``first``-th
      time (the leaf's iteration + 1, mod 256); a gradient line's ``line`` field carries the same
      number as its iteration tag in bits 16 to 23 (the chunk is in bits 0 to 15);
    * **task** packet to the GCU: a barrier (the leaf finished an iteration);
    * replies: a **data** packet per reduced line (``range``, ``line`` = chunk, ``last``), and a
      **task** packet per barrier acknowledgement (``range`` = the leaf's completed iterations).

    With ``update="none"`` a fetch returns the gradient sums. With ``update="adam"`` the GCU runs
    one step of delayed-update training: each reduced line goes through a
    :class:`~rtl.collective.parameter_update.ParameterUpdate` (Adam on the mean gradient, the
    parameters and moments held beside the GCU and loaded by the host through ``load``), and a
    fetch returns the partition's new parameters, bit-exact with
    :func:`golden.collective.delayed_update_step`.

    Gradient lines go to a :class:`ReductionUnit`; each reduced partition is stored and its
    version (reductions so far, mod 256) counts up. A fetch waits in its leaf's request slot until
    the partition reaches the version asked for (one request slot per leaf and reduction slot, as a
    leaf has at most ``slots`` partitions open), then the partition's lines are sent to the leaf,
    one line per cycle. Barriers go to a :class:`BarrierTable`.

    Dropped and counted (16-bit saturating): a packet whose check byte fails (``malformed``); a
    fetch of a partition id out of range or from a leaf id out of range (``bad_requests``); a
    fetch of a partition already reduced past the version asked for (``stale_requests``: its lines
    are gone); a second fetch from a leaf for a partition in the same slot (``p mod slots``) while the
    first still waits (``duplicate_requests``); a gradient line whose iteration tag is not its
    partition's reductions + 1 (``late_gradients``: a late duplicate after the reduction closed
    must not open the partition again). ``early_requests`` counts fetches that had to wait, and
    ``repeated_requests`` fetches equal to one still waiting (a requester asking again: answered
    once). The reduction unit's and the barrier table's counters are ports too
    (``reduction_<name>``, ``barrier_<name>``). Every counter saturates at 65535.
    ``overflow`` is sticky: a queue refused a write that credits should have made room for (the
    network interface's receive queues, the reduction unit's queues); it stays 0 while every
    sender keeps to its credits.

    Parameters
    ----------
    leaves : int
        Leaves (node ids ``0 .. leaves - 1``), 2 to 15.
    node : int
        The GCU's own node id, ``leaves`` to 15.
    partitions : int
        Partitions, 1 to 64.
    chunks : int
        Lines per partition, 1 to 256.
    slots : int
        Partitions in flight in the reduction unit.
    mode : {"deterministic", "arrival"}
        Order of summation.
    queue_depth : int
        Network receive and send queue entries per channel (the credits the switch holds for them).
    tx_credits : int
        The switch's input buffer entries per channel at the GCU's port: the GCU sends only with a
        credit for them (the switch has no backpressure).
    update : {"none", "adam"}
        What a fetch returns: the sums, or the parameters after an Adam step on them.
    update_lanes : {1, 2, 7, 14}
        Elements the Adam step updates per cycle (``update="adam"``).

    Attributes
    ----------
    <counter> : Out(16)
        The counters above (:func:`unit_counters` lists them).
    overflow : Out(1)
        The sticky overflow flag above.
    net_in, net_out : In / Out(stream.Signature(Flit))
    net_in_credit : Out(3)
    net_out_credit : In(3)
        The switch port, as :class:`rtl.runtime.net_interface.NetInterface` documents it.
    load, scalars, update_nonfinite, update_clear, update_bad_loads
        With ``update="adam"``: the parameter update's ``load``, ``scalars``, ``nonfinite``,
        ``clear`` and ``bad_loads`` (see :class:`~rtl.collective.parameter_update.ParameterUpdate`).
    """

    PARAMS = (
        Param("leaves", int, 3, "leaves (node ids 0 .. leaves - 1)", minimum=2, maximum=15),
        Param("node", int, 3, "the GCU's node id", minimum=2, maximum=15),
        *GCU_PARAMS,
        Param("tx_credits", int, 4, "the switch's input buffer entries per channel", minimum=2, maximum=1024),
    )

    @classmethod
    def check_params(cls, values):
        """The GCU's node id comes after the leaves' (``0 .. leaves - 1``)."""
        check_int("node", values["node"], values["leaves"], (1 << NODE_BITS) - 1)

    def __init__(self, *, leaves=3, node=3, partitions=8, chunks=4, slots=2, mode="deterministic",
                 queue_depth=8, tx_credits=4, update="none", update_lanes=1):
        self._queue_depth = queue_depth
        self._unit = dict(leaves=leaves, partitions=partitions, slots=slots, chunks=chunks, mode=mode)
        members = {"net_in": In(stream.Signature(Flit)), "net_in_credit": Out(3),
                   "net_out": Out(stream.Signature(Flit)), "net_out_credit": In(3)}
        members.update({name: Out(COLLECTIVE_COUNTER_BITS) for name in GCU_COUNTERS})
        members.update({f"reduction_{name}": Out(COLLECTIVE_COUNTER_BITS)
                        for name in ReductionUnit.counter_names()})
        members.update({"barrier_bad_leaf": Out(COLLECTIVE_COUNTER_BITS),
                        "barrier_duplicates": Out(COLLECTIVE_COUNTER_BITS)})
        members["overflow"] = Out(1)
        members.update(update_members(update, partitions, chunks))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        leaves, chunks, partitions = self._leaves, self._chunks, self._partitions
        m.submodules.net = net = NetInterface(rx_depth=self._queue_depth, tx_depth=self._queue_depth,
                                              tx_credits=self._tx_credits)
        wiring.connect(m, wiring.flipped(self.net_in), net.net_in)
        wiring.connect(m, net.net_out, wiring.flipped(self.net_out))
        m.d.comb += [self.net_in_credit.eq(net.net_in_credit), net.net_out_credit.eq(self.net_out_credit)]
        m.submodules.unit = unit = ReductionUnit(**self._unit)
        m.submodules.barrier = barrier = BarrierTable(leaves=leaves)
        for name in ReductionUnit.counter_names():
            m.d.comb += getattr(self, f"reduction_{name}").eq(getattr(unit, name))
        m.d.comb += [self.barrier_bad_leaf.eq(barrier.bad_leaf),
                     self.barrier_duplicates.eq(barrier.duplicates)]

        intact = Intact(m)
        feed_reduction(m, unit, net.rx_data, intact, partitions=partitions, late=self.late_gradients)
        m.d.comb += self.overflow.eq(unit.overflow | sticky(m, net.overflow, "net_overflow"))

        # Barriers and their acknowledgements.
        ok = intact.check(net.rx_task)
        m.d.comb += [barrier.barrier.valid.eq(net.rx_task.valid & ok),
                     barrier.barrier.payload.eq(net.rx_task.payload.header.src), net.rx_task.ready.eq(1)]
        ack = Signal(Packet)
        m.d.comb += [ack.header.ptype.eq(PacketType.TASK), ack.header.dst.eq(barrier.ack.payload.leaf),
                     ack.header.src.eq(self._node), ack.header.range.eq(barrier.ack.payload.iteration),
                     ack.task().mask.eq(1)]
        m.d.comb += [net.tx_task.valid.eq(barrier.ack.valid), net.tx_task.payload.eq(sealed(ack)),
                     barrier.ack.ready.eq(net.tx_task.ready)]

        # Reduced partitions (or, with an update, the new parameters): stored, and their version
        # counts up once every line is.
        version = [Signal(VERSION_BITS, name=f"version{p}") for p in range(partitions)]
        fetch = self._results(m, unit.o)
        for p in range(partitions):
            with m.If(fetch.stored.valid & (fetch.stored.payload == p)):
                m.d.sync += version[p].eq(version[p] + 1)

        # Fetches wait in one slot per leaf.
        serve_fetches(m, requests=net.rx_rdma, ok=intact.check(net.rx_rdma), version=version, read=fetch,
                      tx=net.tx_data, leaves=leaves, partitions=partitions, chunks=chunks, slots=self._slots,
                      node=self._node, counters={name: getattr(self, name) for name in FETCH_COUNTERS})
        intact.count(self.malformed)
        return m

    def _results(self, m, reduced):
        """Where reduced lines go; returns a read port with ``stored`` (a partition is complete)."""
        chunks = self._chunks
        if self._update == "adam":
            m.submodules.update = update = ParameterUpdate(partitions=self._partitions, chunks=chunks,
                                                           lanes=self._update_lanes)
            wiring.connect(m, reduced, update.i)
            wiring.connect(m, wiring.flipped(self.load), update.load)
            wiring.connect(m, wiring.flipped(self.scalars), update.scalars)
            m.d.comb += [self.update_nonfinite.eq(update.nonfinite), update.clear.eq(self.update_clear),
                         self.update_bad_loads.eq(update.bad_loads)]
            return ReadPort(update.read_addr, update.read_en, update.read_data, update.updated)
        line = reduced.payload
        m.d.comb += reduced.ready.eq(1)
        return line_store(m, partitions=self._partitions, chunks=chunks, valid=reduced.valid,
                          partition=line.partition, chunk=line.chunk, data=line.data, last=line.last)


register_block(
    "gcu", GlobalControlUnit, family="collective",
    drops=unit_drops(),  # with update="adam" also update_bad_loads (the default build has no update)
    summary="Global control unit on a switch port: reduction table, broadcast of reduced partitions on "
            "request, barrier table.",
    golden="golden.collective.delayed_update:delayed_update_step",
)
