"""The global control unit on a switch port: gradient reduction, broadcast on request, and the barrier."""

from typing import NamedTuple

from amaranth.hdl import Array, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..registration import Param, check_choice, check_int, register_block
from ..runtime.common import pulse_count, sealed
from ..runtime.net_interface import NetInterface
from ..runtime.packet import NODE_BITS, Flit, Packet, PacketType, checksum
from .barrier_table import BarrierTable
from .parameter_update import UPDATE_LANES, ParameterUpdate, load_layout, scalars_signature
from .reduction_engine import LINE_BITS
from .reduction_table import COUNTER_BITS, saturating_count
from .reduction_unit import MODES, SLOT_CHOICES, ReductionUnit

__all__ = ["GlobalControlUnit", "GCU_COUNTERS", "GCU_PARAMS", "UPDATES", "update_members"]

VERSION_BITS = 8
UPDATES = ("none", "adam")


def update_members(update, partitions, chunks):
    """The ports of the parameter update (``update="adam"``): the state load, Adam's scalars, the status."""
    if update == "none":
        return {}
    return {"load": In(stream.Signature(load_layout(partitions * chunks))),
            "scalars": In(scalars_signature()), "update_nonfinite": Out(1), "update_clear": In(1)}


GCU_COUNTERS = ("malformed", "bad_requests", "early_requests", "stale_requests", "duplicate_requests")


def _lookup(signals, index):
    """``signals[index]`` for an index known to be in range (a full case: Verilator's lint wants one)."""
    bits = max(1, (len(signals) - 1).bit_length())
    padded = list(signals) + [Const(0, len(signals[0]))] * ((1 << bits) - len(signals))
    return Array(padded)[index[:bits]]


class _ReadPort(NamedTuple):
    addr: object
    en: object
    data: object
    stored: object


class GlobalControlUnit(wiring.Component):
    """An all-reduce through one switch port: leaves send gradient lines, then fetch the sums.

    Packets (the runtime's 512-bit format, :mod:`rtl.runtime.packet`; ``src`` is the leaf):

    * **data** packet to the GCU: one gradient line, ``range`` = partition, ``line`` = chunk;
    * **RDMA** packet to the GCU: a fetch of partition ``range``, reduced for the ``first``-th
      time (the leaf's iteration + 1, mod 256);
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
    first still waits (``duplicate_requests``).
    ``early_requests`` counts fetches that had to wait. The reduction unit's and the barrier
    table's counters are ports too (``reduction_<name>``, ``barrier_<name>``).

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
    net_in, net_out : In / Out(stream.Signature(Flit))
    net_in_credit : Out(3)
    net_out_credit : In(3)
        The switch port, as :class:`rtl.runtime.net_interface.NetInterface` documents it.
    load, scalars, update_nonfinite, update_clear
        With ``update="adam"``: the parameter update's ``load``, ``scalars``, ``nonfinite`` and
        ``clear`` (see :class:`~rtl.collective.parameter_update.ParameterUpdate`).
    """

    def __init__(self, *, leaves=3, node=3, partitions=8, chunks=4, slots=2, mode="deterministic",
                 queue_depth=8, tx_credits=4, update="none", update_lanes=1):
        self._leaves = check_int("leaves", leaves, 2, (1 << NODE_BITS) - 1)
        self._node = check_int("node", node, leaves, (1 << NODE_BITS) - 1)
        self._partitions = check_int("partitions", partitions, 1, 64)
        self._chunks = check_int("chunks", chunks, 1, 256)
        self._slots = check_choice("slots", slots, SLOT_CHOICES)
        self._mode = check_choice("mode", mode, MODES)
        self._queue_depth = check_int("queue_depth", queue_depth, 2, 1024)
        self._tx_credits = check_int("tx_credits", tx_credits, 2, 1024)
        self._update = check_choice("update", update, UPDATES)
        self._update_lanes = check_choice("update_lanes", update_lanes, UPDATE_LANES)
        self._unit = dict(leaves=leaves, partitions=partitions, slots=slots, chunks=chunks, mode=mode)
        members = {"net_in": In(stream.Signature(Flit)), "net_in_credit": Out(3),
                   "net_out": Out(stream.Signature(Flit)), "net_out_credit": In(3)}
        members.update({name: Out(COUNTER_BITS) for name in GCU_COUNTERS})
        members.update({f"reduction_{name}": Out(COUNTER_BITS) for name in ReductionUnit.counter_names()})
        members.update({"barrier_bad_leaf": Out(COUNTER_BITS), "barrier_duplicates": Out(COUNTER_BITS)})
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

        malformed = []

        def intact(rx):
            broken = rx.valid & (checksum(rx.payload) != 0)
            malformed.append(broken & rx.ready)
            return ~broken

        # Gradient lines.
        data = net.rx_data.payload
        line = data.data_reply()
        m.d.comb += [unit.i.payload.leaf.eq(data.header.src), unit.i.payload.partition.eq(data.header.range),
                     unit.i.payload.chunk.eq(line.line), unit.i.payload.data.eq(line.data)]
        ok = intact(net.rx_data)
        m.d.comb += [unit.i.valid.eq(net.rx_data.valid & ok), net.rx_data.ready.eq(unit.i.ready | ~ok)]

        # Barriers and their acknowledgements.
        ok = intact(net.rx_task)
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
        request = net.rx_rdma.payload
        wanted_of = request.rdma().first[:VERSION_BITS]
        ok = intact(net.rx_rdma)
        m.d.comb += net.rx_rdma.ready.eq(1)
        # One entry per leaf and reduction slot: a leaf has at most ``slots`` partitions open.
        slots = self._slots
        slot_bits = (slots - 1).bit_length()
        entries = leaves * slots
        waiting = Signal(entries)
        slot_partition = [Signal(range(partitions), name=f"wants_partition{e}") for e in range(entries)]
        slot_version = [Signal(VERSION_BITS, name=f"wants_version{e}") for e in range(entries)]
        leaf = request.header.src
        entry = Signal(range(1 << (NODE_BITS + slot_bits)))
        m.d.comb += entry.eq(leaf if slots == 1 else (leaf << slot_bits) | request.header.range[:slot_bits])
        arrived = net.rx_rdma.valid & ok
        bad = arrived & ((leaf >= leaves) | (request.header.range >= partitions))
        duplicate = arrived & ~bad & waiting.bit_select(entry, 1)
        behind = (_lookup(version, request.header.range) - wanted_of)[:VERSION_BITS]
        stale = arrived & ~bad & ~duplicate & (behind != 0) & ~behind[-1]
        early = arrived & ~bad & ~duplicate & behind[-1]
        take = arrived & ~bad & ~duplicate & ~stale
        events = {"bad_requests": bad, "duplicate_requests": duplicate, "stale_requests": stale,
                  "early_requests": early}
        for name, event in events.items():
            saturating_count(m, getattr(self, name), event)
        # Up to one malformed packet per channel and cycle.
        with m.If(self.malformed < (1 << COUNTER_BITS) - len(malformed)):
            m.d.sync += self.malformed.eq(self.malformed + pulse_count(*malformed))

        # Serve the lowest waiting entry whose partition has reached its version: one read per
        # cycle; the read port's data register is the output register (its enable stalls it).
        active = Signal()
        serving = Signal(range(entries))
        chunk = Signal(range(chunks))
        servable = Signal(entries)
        for e in range(entries):
            m.d.comb += servable[e].eq(waiting[e] & (_lookup(version, slot_partition[e]) == slot_version[e]))
        chosen = Signal(range(entries))
        for e in reversed(range(entries)):
            with m.If(servable[e]):
                m.d.comb += chosen.eq(e)
        served = Signal(entries)
        partition = _lookup(slot_partition, serving)
        out_valid, out_leaf = Signal(), Signal(NODE_BITS)
        out_partition, out_chunk = Signal(range(partitions)), Signal(range(chunks))
        advance = ~out_valid | net.tx_data.ready
        m.d.comb += [fetch.addr.eq(partition * chunks + chunk), fetch.en.eq(advance)]
        with m.If(advance):
            m.d.sync += [out_valid.eq(active), out_leaf.eq(serving >> slot_bits), out_partition.eq(partition),
                         out_chunk.eq(chunk)]
            with m.If(active):
                m.d.sync += chunk.eq(chunk + 1)
                with m.If(chunk == chunks - 1):
                    m.d.sync += active.eq(0)
                    m.d.comb += served.eq(Const(1, entries) << serving)
        with m.If(~active & servable.any()):
            m.d.sync += [serving.eq(chosen), chunk.eq(0), active.eq(1)]
        reply = Signal(Packet)
        line = reply.data_reply()
        m.d.comb += [reply.header.ptype.eq(PacketType.DATA), reply.header.dst.eq(out_leaf),
                     reply.header.src.eq(self._node), reply.header.range.eq(out_partition),
                     line.line.eq(out_chunk), line.last.eq(out_chunk == chunks - 1), line.data.eq(fetch.data),
                     net.tx_data.payload.eq(sealed(reply)), net.tx_data.valid.eq(out_valid)]
        taken = Signal(entries)
        with m.If(take):
            m.d.comb += taken.eq(Const(1, entries) << entry)
            for e in range(entries):
                with m.If(entry == e):
                    m.d.sync += [slot_partition[e].eq(request.header.range), slot_version[e].eq(wanted_of)]
        m.d.sync += waiting.eq((waiting & ~served) | taken)
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
            m.d.comb += [self.update_nonfinite.eq(update.nonfinite), update.clear.eq(self.update_clear)]
            return _ReadPort(update.read_addr, update.read_en, update.read_data, update.updated)
        m.submodules.results = results = Memory(shape=LINE_BITS, depth=self._partitions * chunks, init=[])
        store, fetch = results.write_port(), results.read_port()
        line = reduced.payload
        m.d.comb += [reduced.ready.eq(1), store.addr.eq(line.partition * chunks + line.chunk),
                     store.data.eq(line.data), store.en.eq(reduced.valid)]
        stored = wiring.Signature({"valid": Out(1), "payload": Out(len(line.partition))}).create()
        m.d.comb += [stored.valid.eq(reduced.valid & line.last), stored.payload.eq(line.partition)]
        return _ReadPort(fetch.addr, fetch.en, fetch.data, stored)


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

register_block(
    "gcu", GlobalControlUnit, family="collective",
    summary="Global control unit on a switch port: reduction table, broadcast of reduced partitions on "
            "request, barrier table.",
    params=[
        Param("leaves", int, 3, "leaves (node ids 0 .. leaves - 1)", minimum=2, maximum=15),
        Param("node", int, 3, "the GCU's node id", minimum=2, maximum=15),
        *GCU_PARAMS,
        Param("tx_credits", int, 4, "the switch's input buffer entries per channel", minimum=2, maximum=1024),
    ],
)
