"""The regional control unit: one sub-region's reduction, fetches and barrier below the GCU."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.counters import saturating_count
from ..lib.streams import Queue
from ..net.net_interface import NetInterface
from ..net.packet import NODE_BITS, Flit, Packet, PacketType, sealed
from ..registration import Param, Parameterized, check_int, register_block
from .fetch_retry import FetchRetry
from .fetch_slots import (
    CHUNK_FIELD_BITS,
    FETCH_COUNTERS,
    VERSION_BITS,
    Intact,
    feed_reduction,
    line_store,
    lookup,
    serve_fetches,
)
from .gcu import NETWORK_PARAMS, sticky, unit_counters, unit_drops
from .reduction_table import COLLECTIVE_COUNTER_BITS
from .reduction_unit import ReductionUnit

__all__ = ["RegionalControlUnit", "REGION_COUNTERS", "REGION_DROPS"]

# The GCU's counters (what the unit counts towards its leaves), then those of its side of the GCU.
REGION_COUNTERS = (*unit_counters(), "retries", "lost_fetches", "bad_replies", "unexpected_replies",
                   "up_requests", "unexpected_acks")
_SIDES = ("down", "up")
REGION_DROPS = {
    **unit_drops(),
    "lost_fetches": "fetches given up after retry_limit re-asks (their version never comes)",
    "bad_replies": "intact replies from the GCU side whose partition or line is out of range",
    "unexpected_replies": "intact reply lines to no fetch the unit has open",
    "up_requests": "fetch requests from the GCU side",
    "unexpected_acks": "barrier acknowledgements while no barrier waits for one",
}


def net_members(prefix):
    """The four members of a switch port named ``<prefix>_in``, ``<prefix>_in_credit``, ... (unit side)."""
    return {f"{prefix}_in": In(stream.Signature(Flit)), f"{prefix}_in_credit": Out(3),
            f"{prefix}_out": Out(stream.Signature(Flit)), f"{prefix}_out_credit": In(3)}


class RegionalControlUnit(Parameterized, wiring.Component):
    """A sub-region's control unit between its region switch (``down``) and the root switch (``up``).

    The dissertation's sub-region switches (Section 7.3.2, Figure 7-9) reduce first per region,
    then globally. To its region's leaves (ids ``0 .. leaves - 1`` on the region switch) the unit
    answers as the :class:`~rtl.collective.gcu.GlobalControlUnit` does, with the same packets; to
    the GCU on the root switch it is leaf ``region``.

    * **Gradients**: the leaves' data packets go through a :class:`ReductionUnit` (``mode`` as the
      GCU's; deterministic = leaf order within the region); each reduced line goes up to the GCU
      as a data packet, so the GCU reduces the regions' sums in region order.
    * **Fetches**: the unit keeps a copy of every partition with a version, filled by the GCU's
      replies. Once the last reduced line of a partition has gone up, the unit fetches that
      partition from the GCU at its copy's version + 1. The GCU holds one request slot per leaf and
      reduction slot (``p mod slots``) and drops a second fetch in a waiting slot, so a fetch waits
      (in a queue of ``2 * slots``) until the previous one of its slot has been answered in full. The
      leaves' fetches are served from the copy by :func:`~rtl.collective.fetch_slots.serve_fetches`,
      under the GCU's version, slot, stale and early rules.
    * **Barriers**: a leaf's barrier is held until every leaf of the region has sent one; then one
      barrier goes up, and the GCU's acknowledgement (the region's completed iterations) is passed
      to every leaf of the region, in leaf order. The GCU's barrier table keeps each region within
      one iteration of the slowest, hence every leaf too.

    * **Retries**: a fetch holds its slot until its reply is complete (:class:`FetchRetry`): a
      reply with a lost or damaged line, or none for ``retry_cycles`` cycles, is asked for again
      (``retries``), at most ``retry_limit`` times per fetch, then given up (``lost_fetches``).
      Only a complete reply to a fetch the unit has open advances a version.
    * **Iterations**: the leaves' gradient lines carry their iteration tag (as at the GCU, whose
      ``late_gradients`` the unit counts too); each reduced line goes up tagged with the
      partition's reductions at the unit.

    Counted and dropped (16-bit saturating), as the GCU's names say: broken check bytes on either
    side (``malformed``), the fetch counters, ``late_gradients``, ``reduction_<name>`` of the
    reduction unit, and a barrier from a leaf id not below ``leaves`` (``barrier_bad_leaf``) or
    from a leaf already waiting at the barrier (``barrier_duplicates``). From the GCU's side: a
    reply whose partition or line is out of range (``bad_replies``), an intact reply to no fetch
    the unit has open (``unexpected_replies``), a fetch request (``up_requests``: the GCU never
    sends one), and an acknowledgement while no barrier is waiting for one (``unexpected_acks``).
    ``overflow`` is sticky, as the GCU's.

    Parameters
    ----------
    leaves : int
        Leaves of the region (ids ``0 .. leaves - 1`` on the region switch), 2 to 15.
    node : int
        The unit's id on the region switch, ``leaves`` to 15.
    region : int
        The unit's id on the root switch, 0 to 14.
    gcu : int
        The GCU's id on the root switch, ``region + 1`` to 15.
    partitions, chunks, slots, mode, queue_depth
        As the GCU's (``slots`` must equal the GCU's).
    down_credits, up_credits : int
        The region and root switches' input buffer entries per channel at the unit's ports.
    retry_cycles : int
        Cycles without a line of an open fetch's reply before it is asked again, 16 to 65536.
    retry_limit : int
        Re-asks of one fetch before it is given up, 1 to 255.

    Attributes
    ----------
    down_in, down_out, down_in_credit, down_out_credit
        The region switch port.
    up_in, up_out, up_in_credit, up_out_credit
        The root switch port (as :class:`rtl.runtime.net_interface.NetInterface` documents them).
    <counter> : Out(16)
        The counters above (:data:`REGION_COUNTERS`).
    overflow : Out(1)
        Sticky: a queue refused a write that credits should have made room for.
    """

    PARAMS = (
        Param("leaves", int, 2, "leaves of the region", minimum=2, maximum=15),
        Param("node", int, 2, "the unit's id on the region switch", minimum=2, maximum=15),
        Param("region", int, 0, "the unit's id on the root switch", minimum=0, maximum=14),
        Param("gcu", int, 2, "the GCU's id on the root switch", minimum=1, maximum=15),
        *NETWORK_PARAMS,
        Param("down_credits", int, 4, "the region switch's input buffer entries per channel", minimum=2,
              maximum=1024),
        Param("up_credits", int, 4, "the root switch's input buffer entries per channel", minimum=2,
              maximum=1024),
        Param("retry_cycles", int, 1024, "cycles without a reply line before a fetch is asked again",
              minimum=16, maximum=65536),
        Param("retry_limit", int, 15, "re-asks of one fetch before it is given up", minimum=1, maximum=255),
    )

    @classmethod
    def check_params(cls, values):
        """The unit's node id comes after its leaves', and the GCU's after the regions'."""
        check_int("node", values["node"], values["leaves"], (1 << NODE_BITS) - 1)
        check_int("gcu", values["gcu"], values["region"] + 1, (1 << NODE_BITS) - 1)

    def __init__(self, *, leaves=2, node=2, region=0, gcu=2, partitions=8, chunks=4, slots=2,
                 mode="deterministic", queue_depth=8, down_credits=4, up_credits=4, retry_cycles=1024,
                 retry_limit=15):
        self._mode = mode
        self._credits = {"down": down_credits,
                         "up": up_credits}
        self._retry = dict(cycles=retry_cycles,
                           limit=retry_limit)
        members = {**net_members("down"), **net_members("up")}
        members.update({name: Out(COLLECTIVE_COUNTER_BITS) for name in REGION_COUNTERS})
        members["overflow"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        leaves, chunks, partitions, slots = self._leaves, self._chunks, self._partitions, self._slots
        nets = {}
        for side in _SIDES:
            nets[side] = net = NetInterface(rx_depth=self._queue_depth, tx_depth=self._queue_depth,
                                            tx_credits=self._credits[side])
            m.submodules[f"{side}_net"] = net
            wiring.connect(m, wiring.flipped(getattr(self, f"{side}_in")), net.net_in)
            wiring.connect(m, net.net_out, wiring.flipped(getattr(self, f"{side}_out")))
            m.d.comb += [getattr(self, f"{side}_in_credit").eq(net.net_in_credit),
                         net.net_out_credit.eq(getattr(self, f"{side}_out_credit"))]
        down, up = nets["down"], nets["up"]
        unit = ReductionUnit(leaves=leaves, partitions=partitions, slots=slots, chunks=chunks,
                             mode=self._mode)
        m.submodules.unit = unit
        for name in ReductionUnit.counter_names():
            m.d.comb += getattr(self, f"reduction_{name}").eq(getattr(unit, name))
        intact = Intact(m)
        rounds = feed_reduction(m, unit, down.rx_data, intact, partitions=partitions,
                                late=self.late_gradients)
        net_overflow = sticky(m, down.overflow | up.overflow, "net_overflow")
        m.d.comb += self.overflow.eq(unit.overflow | net_overflow)

        # Each reduced line goes up, tagged with its partition's reductions; a partition's last one
        # queues its fetch.
        fetches = Queue(m, "fetches", range(max(2, partitions)), 2 * slots)
        reduced = unit.o.payload
        up_line = Signal(Packet)
        tag = lookup(rounds, reduced.partition)
        m.d.comb += [up_line.header.ptype.eq(PacketType.DATA), up_line.header.dst.eq(self._gcu),
                     up_line.header.src.eq(self._region), up_line.header.range.eq(reduced.partition),
                     up_line.data_reply().line.eq(reduced.chunk | (tag << CHUNK_FIELD_BITS)),
                     up_line.data_reply().last.eq(reduced.last), up_line.data_reply().data.eq(reduced.data)]
        m.d.comb += [up.tx_data.payload.eq(sealed(up_line)),
                     up.tx_data.valid.eq(unit.o.valid & fetches.w.ready),
                     unit.o.ready.eq(up.tx_data.ready & fetches.w.ready),
                     fetches.w.payload.eq(reduced.partition),
                     fetches.w.valid.eq(unit.o.valid & unit.o.ready & reduced.last)]

        # The copy of every partition, filled by the replies to the unit's own fetches; a complete
        # reply advances its version.
        version = [Signal(VERSION_BITS, name=f"version{p}") for p in range(partitions)]
        answer = up.rx_data.payload
        fits = (answer.header.range < partitions) & (answer.data_reply().line < chunks)
        arrived = up.rx_data.valid & intact.check(up.rx_data)
        m.d.comb += up.rx_data.ready.eq(1)
        retry = FetchRetry(m, slots=slots, partitions=partitions, chunks=chunks, **self._retry,
                           retries=self.retries, lost=self.lost_fetches)
        retry.replies(valid=arrived & fits, partition=answer.header.range, line=answer.data_reply().line)
        saturating_count(m, self.bad_replies, arrived & ~fits)
        saturating_count(m, self.unexpected_replies, arrived & fits & ~retry.accept)
        copy = line_store(m, partitions=partitions, chunks=chunks, valid=arrived & fits & retry.accept,
                          partition=answer.header.range, chunk=answer.data_reply().line,
                          data=answer.data_reply().data, last=retry.complete)
        for p in range(partitions):
            with m.If(copy.stored.valid & (copy.stored.payload == p)):
                m.d.sync += version[p].eq(version[p] + 1)

        # Fetches at the GCU: a re-ask first, else the queue's next once its slot is free.
        partition, valid, take = retry.requests(head=fetches.r.payload, head_valid=fetches.r.valid,
                                                ready=up.tx_rdma.ready)
        ask = Signal(Packet)
        m.d.comb += [ask.header.ptype.eq(PacketType.RDMA), ask.header.dst.eq(self._gcu),
                     ask.header.src.eq(self._region), ask.header.range.eq(partition),
                     ask.rdma().first.eq((lookup(version, partition) + 1)[:VERSION_BITS]),
                     ask.rdma().lines.eq(chunks & 0xFF)]
        m.d.comb += [up.tx_rdma.payload.eq(sealed(ask)), up.tx_rdma.valid.eq(valid), fetches.r.ready.eq(take)]

        serve_fetches(m, requests=down.rx_rdma, ok=intact.check(down.rx_rdma), version=version, read=copy,
                      tx=down.tx_data, leaves=leaves, partitions=partitions, chunks=chunks, slots=slots,
                      node=self._node, counters={name: getattr(self, name) for name in FETCH_COUNTERS})
        self._barrier(m, down, up, intact)
        # The GCU sends no fetches: one from its side is dropped and counted.
        saturating_count(m, self.up_requests, up.rx_rdma.valid & intact.check(up.rx_rdma))
        m.d.comb += up.rx_rdma.ready.eq(1)
        intact.count(self.malformed)
        return m

    def _barrier(self, m, down, up, intact):
        """Leaves' barriers held until the region's is complete; the GCU's acknowledgement goes to each."""
        leaves = self._leaves
        arrived = Signal(leaves)
        barrier = down.rx_task
        leaf = barrier.payload.header.src
        ok = intact.check(barrier)
        m.d.comb += barrier.ready.eq(1)
        took = barrier.valid & ok
        bad = took & (leaf >= leaves)
        duplicate = took & ~bad & arrived.bit_select(leaf, 1)
        saturating_count(m, self.barrier_bad_leaf, bad)
        saturating_count(m, self.barrier_duplicates, duplicate)
        joined = Signal(leaves)
        with m.If(took & ~bad & ~duplicate):
            m.d.comb += joined.eq(1 << leaf[:max(1, (leaves - 1).bit_length())])

        # up: the region's barrier is due, or sent and waiting; releasing: acknowledging the leaves.
        due, waiting, releasing = Signal(), Signal(), Signal()
        iteration = Signal(VERSION_BITS)
        next_leaf = Signal(range(leaves))
        up_barrier = Signal(Packet)
        m.d.comb += [up_barrier.header.ptype.eq(PacketType.TASK), up_barrier.header.dst.eq(self._gcu),
                     up_barrier.header.src.eq(self._region), up_barrier.task().mask.eq(1),
                     up.tx_task.payload.eq(sealed(up_barrier)), up.tx_task.valid.eq(due)]
        complete = (arrived | joined).all() & ~waiting & ~releasing & ~due
        with m.If(complete):
            m.d.sync += due.eq(1)
        with m.If(due & up.tx_task.ready):
            m.d.sync += [due.eq(0), waiting.eq(1)]
        ack_in = up.rx_task
        ok = intact.check(ack_in)
        m.d.comb += ack_in.ready.eq(1)
        release = ack_in.valid & ok & waiting
        saturating_count(m, self.unexpected_acks, ack_in.valid & ok & ~waiting)
        with m.If(release):
            m.d.sync += [waiting.eq(0), releasing.eq(1), next_leaf.eq(0),
                         iteration.eq(ack_in.payload.header.range[:VERSION_BITS])]
        ack = Signal(Packet)
        m.d.comb += [ack.header.ptype.eq(PacketType.TASK), ack.header.dst.eq(next_leaf),
                     ack.header.src.eq(self._node), ack.header.range.eq(iteration), ack.task().mask.eq(1),
                     down.tx_task.payload.eq(sealed(ack)), down.tx_task.valid.eq(releasing)]
        with m.If(releasing & down.tx_task.ready):
            m.d.sync += next_leaf.eq(next_leaf + 1)
            with m.If(next_leaf == leaves - 1):
                m.d.sync += releasing.eq(0)
        m.d.sync += arrived.eq(arrived | joined)
        with m.If(release):
            m.d.sync += arrived.eq(joined)


register_block(
    "region_unit", RegionalControlUnit, family="collective",
    drops=REGION_DROPS,
    summary="Regional control unit between a region switch and the root: per-region reduction sent up to "
            "the GCU, a versioned copy of the sums served to the region's leaves, hierarchical barrier.",
    golden="golden.collective:TieredTable",
)
