"""One FCsN hardware runtime node (Figure 4-5): handlers, queues, spawner, control and counters."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4LiteSignature
from ..bus.axi_lite_control import AXILiteControl
from ..lib.counters import COUNTER_BITS, pulse_count, saturating_counter
from ..lib.streams import merge
from ..net.net_interface import NetInterface
from ..net.packet import LINE_BITS, ROW_BITS, Flit, MemWrite, Packet, SpawnWrite, TaskId
from ..registration import Param, Parameterized, register_block
from .classifier import CLASSIFIER_DROPS, DEFAULT_KERNELS, TaskClassifier, check_kernels
from .common import BLOCK_PARAM, RANGES_PARAM, ConfigSignature
from .data_handler import DataHandler
from .data_packager import DataPackager
from .rdma_detector import RDMADetector
from .rdma_responder import RDMAResponder
from .spawner import TaskSpawner
from .task_packager import TaskPackager
from .task_responder import RESPONDER_DROPS, TaskResponder
from .task_splitter import TaskSplitter

__all__ = ["RuntimeNode", "ARGUMENTS", "COUNTERS", "STATUS"]

# Control arguments (AXI4-Lite, 32 bits each), in register order.
ARGUMENTS = (
    ("node", "this node's id (the spawner takes it at ap_start; a change while busy is for the next run)"),
    ("nodes", "nodes in the cluster: 1, 2, 4, 8 or 16 (taken at ap_start, as node)"),
    ("home_shift", "row r belongs to node (r >> home_shift) mod nodes"),
    ("range_shift", "data range g belongs to node (g >> range_shift) mod nodes (taken at ap_start, as node)"),
    ("rows", "lines of the global data space"),
    ("ranges", "data ranges in use: ceil(rows / block)"),
    ("task_id", "Kernel_start: kernel id"),
    ("spawn_first", "Kernel_start argv: first Spawn_MEM entry"),
    ("spawn_count", "Kernel_start argv: number of entries"),
    ("flush", "bit 0 rising: forget fetched data ranges (when quiet)"),
    ("replicated", "bit 0: the host loaded every data range here (B replicated): no range is fetched"),
)
# Event counters (read-only status registers of 32 bits; each counter is `counter_bits` wide and
# saturates at its largest value), in register order after `quiet`.
COUNTERS = (("rx_task", "rx_rdma", "rx_data", "tx_task", "tx_rdma", "tx_data", "spawned", "issued",
             "completed", "served")
            + tuple(f"drop_{reason}" for reason in CLASSIFIER_DROPS + RESPONDER_DROPS)
            + ("drop_rdma_range", "drop_data_unsolicited", "overflow", "start_rejected"))
STATUS = (("quiet", 1),) + tuple((name, 32) for name in COUNTERS)


def _drive_config(m, config, target):
    for name in ("node", "node_mask", "home_shift", "range_shift", "rows", "ranges"):
        m.d.comb += getattr(target, name).eq(getattr(config, name))


class RuntimeNode(Parameterized, wiring.Component):
    """The hardware runtime of one node: from the network and the spawner to the kernel, and back.

    Data path (Figure 4-5 of the seed): ``net_in`` -> receive queues (one per virtual channel)
    -> :class:`TaskClassifier` -> per type:

    * task: :class:`TaskResponder` (also fed by the :class:`TaskSpawner`) -> :class:`TaskSplitter`
      -> local slots to the :class:`RDMADetector` (freeze / pending queues) -> ``kernel_task``;
      remote slots -> :class:`TaskPackager` -> task send queue;
    * RDMA: :class:`RDMAResponder` -> ``mem_rd_cmd`` + data read queue -> ``mem_rd_data`` ->
      :class:`DataPackager` -> data send queue;
    * data: :class:`DataHandler` -> ``mem_wr``, and the range's arrival to the RDMA detector;

    and the send queues -> ``net_out`` through the :class:`NetInterface` (credits, data before
    RDMA before tasks). The packet format is :mod:`rtl.runtime.packet`; the protocol's
    decisions are :mod:`golden.runtime.protocol`'s.

    Control: an :class:`~rtl.bus.axi_lite_control.AXILiteControl` register file. The
    arguments (:data:`ARGUMENTS`) configure the node; ``ap_start`` is ``Kernel_start``
    (``task_id``, ``spawn_first``, ``spawn_count``), ``ap_done`` rises when the spawner has
    handed over its last task, ``ap_idle`` is the spawner's. Status (:data:`STATUS`): ``quiet``
    (nothing queued, in flight, frozen or executing here) and the event counters.

    Parameters
    ----------
    kernels : int
        Bit mask of the attached kernel ids (Table 4.1).
    block : int
        Lines per data range.
    ranges : int
        Data ranges tracked, 2 to 1024.
    spawn_depth : int
        Spawn_MEM entries.
    queue_depth : int
        Entries of the freeze, pending, data-read, receive and send queues.
    tx_credits : int
        The switch's input buffer entries per channel.
    counter_bits : int
        Width of each event counter, 1 to 32 (they saturate; narrow ones let a test reach the limit).

    Attributes
    ----------
    net_in, net_out : In / Out(stream.Signature(Flit))
        The 512-bit network link (plus a 2-bit channel), credit flow controlled.
    net_in_credit : Out(3)
    net_out_credit : In(3)
    kernel_task : Out(stream.Signature(Packet))
        Tasks for the kernels (the pending queue).
    kernel_done : In(stream.Signature(TaskId, always_ready=True))
        A valid-only event per completed task.
    mem_rd_cmd : Out(stream.Signature(24))
    mem_rd_data : In(stream.Signature(448))
    mem_wr : Out(stream.Signature(MemWrite, always_ready=True))
        The local data memory: line reads for RDMA requests, line writes of fetched data (the
        memory takes a write every cycle: ``mem_wr`` is valid-only).
    spawn_load : In(stream.Signature(SpawnWrite))
        Host writes into Spawn_MEM.
    s_axi_control : In(AXI4LiteSignature(12, 32))
    irq : Out(1)
    start : In(1)
        A ``Kernel_start`` pulse from outside (the cluster's broadcast start), taken as
        ``ap_start`` is when the spawner is idle, with the same arguments.
    quiet : Out(1)
        The ``quiet`` status bit (for the cluster's on-chip cycle counters).

    Notes
    -----
    Throughput: one packet per cycle through the classifier and through every handler; a task
    whose remote slots belong to *k* owners takes *k* cycles in the splitter. Latency from
    ``net_in`` to ``kernel_task`` for a ready task: see ``docs/runtime.md``.
    """

    PARAMS = (
        Param("kernels", int, DEFAULT_KERNELS, "bit mask of attached kernel ids", minimum=0, maximum=127),
        BLOCK_PARAM,
        RANGES_PARAM,
        Param("spawn_depth", int, 64, "Spawn_MEM entries", minimum=2, maximum=65536),
        Param("queue_depth", int, 8, "entries of every queue", minimum=2, maximum=1024),
        Param("tx_credits", int, 8, "switch input buffer entries per channel", minimum=1, maximum=1024),
        Param("counter_bits", int, COUNTER_BITS, "width of each event counter (they saturate)",
              minimum=1, maximum=COUNTER_BITS),
    )

    def __init__(self, *, kernels=DEFAULT_KERNELS, block=20, ranges=64, spawn_depth=64, queue_depth=8,
                 tx_credits=8, counter_bits=COUNTER_BITS):
        self._kernels = check_kernels(kernels)
        self._tx_credits = tx_credits
        self._spawn_bits = max(1, (spawn_depth - 1).bit_length())
        super().__init__({
            "net_in": In(stream.Signature(Flit)),
            "net_in_credit": Out(3),
            "net_out": Out(stream.Signature(Flit)),
            "net_out_credit": In(3),
            "kernel_task": Out(stream.Signature(Packet)),
            "kernel_done": In(stream.Signature(TaskId, always_ready=True)),
            "mem_rd_cmd": Out(stream.Signature(ROW_BITS)),
            "mem_rd_data": In(stream.Signature(LINE_BITS)),
            "mem_wr": Out(stream.Signature(MemWrite, always_ready=True)),
            "spawn_load": In(stream.Signature(SpawnWrite(self._spawn_bits))),
            "s_axi_control": In(AXI4LiteSignature(address_width=12, data_width=32)),
            "irq": Out(1),
            "start": In(1),
            "quiet": Out(1),
        })

    @property
    def spawn_bits(self):
        return self._spawn_bits

    def register_map(self):
        """The AXI4-Lite register map (see :meth:`AXILiteControl.register_map`)."""
        control = self._control()
        control._MustUse__silence = True
        return control.register_map()

    def _control(self):
        return AXILiteControl(arguments=[(name, 32, text) for name, text in ARGUMENTS],
                              status=[(name, width) for name, width in STATUS], address_width=12)

    def elaborate(self, platform):
        m = Module()
        depth = self._queue_depth
        m.submodules.control = control = self._control()
        m.submodules.net = net = NetInterface(rx_depth=depth, tx_depth=depth, tx_credits=self._tx_credits)
        m.submodules.classifier = classifier = TaskClassifier(kernels=self._kernels)
        m.submodules.spawner = spawner = TaskSpawner(depth=self._spawn_depth, kernels=self._kernels)
        m.submodules.responder = responder = TaskResponder(block=self._block)
        m.submodules.splitter = splitter = TaskSplitter()
        # Tasks from the network are wholly local: their own splitter only rewrites the header.
        m.submodules.network_splitter = network_splitter = TaskSplitter()
        m.submodules.packager = packager = TaskPackager()
        m.submodules.detector = detector = RDMADetector(ranges=self._ranges, block=self._block,
                                                        freeze_depth=depth, pending_depth=depth)
        m.submodules.rdma_responder = rdma_responder = RDMAResponder(block=self._block, read_depth=depth)
        m.submodules.data_packager = data_packager = DataPackager()
        m.submodules.data_handler = data_handler = DataHandler(block=self._block)

        wiring.connect(m, wiring.flipped(self.s_axi_control), control.s_axi_control)
        m.d.comb += self.irq.eq(control.irq)
        args = control.args
        config = ConfigSignature().create()
        m.d.comb += [
            config.node.eq(args.node),
            config.node_mask.eq(args.nodes - 1),
            config.home_shift.eq(args.home_shift),
            config.range_shift.eq(args.range_shift),
            config.rows.eq(args.rows),
            config.ranges.eq(args.ranges),
        ]
        for unit in (classifier, spawner, responder, splitter, network_splitter, rdma_responder,
                     data_packager, data_handler):
            _drive_config(m, config, unit.config)
        _drive_config(m, config, detector.config)
        # B replicated: the detector sees a 1-node cluster (node 0 owns every range), so every
        # task is ready at once and nothing is fetched; the other units keep the real ownership.
        with m.If(args.replicated[0]):
            m.d.comb += [detector.config.node.eq(0), detector.config.node_mask.eq(0)]

        # Network <-> handlers.
        wiring.connect(m, wiring.flipped(self.net_in), net.net_in)
        wiring.connect(m, net.net_out, wiring.flipped(self.net_out))
        m.d.comb += [self.net_in_credit.eq(net.net_in_credit), net.net_out_credit.eq(self.net_out_credit)]
        for name in ("task", "rdma", "data"):
            wiring.connect(m, getattr(net, f"rx_{name}"), getattr(classifier, f"rx_{name}"))

        # Tasks.
        wiring.connect(m, wiring.flipped(self.spawn_load), spawner.load)
        wiring.connect(m, spawner.o, responder.spawned)
        wiring.connect(m, classifier.task, responder.network)
        wiring.connect(m, responder.o, splitter.i)
        wiring.connect(m, responder.o_network, network_splitter.i)
        m.d.comb += network_splitter.remote.ready.eq(1)  # never valid: the responder passed only local tasks
        merge(m, "to_detector", [network_splitter.local, splitter.local], detector.i)
        wiring.connect(m, splitter.remote, packager.i)
        wiring.connect(m, packager.o, net.tx_task)
        wiring.connect(m, detector.request, net.tx_rdma)
        wiring.connect(m, detector.pending, wiring.flipped(self.kernel_task))

        # RDMA requests and data replies.
        wiring.connect(m, classifier.rdma, rdma_responder.i)
        wiring.connect(m, rdma_responder.mem_rd_cmd, wiring.flipped(self.mem_rd_cmd))
        wiring.connect(m, rdma_responder.o, data_packager.info)
        wiring.connect(m, wiring.flipped(self.mem_rd_data), data_packager.mem_rd_data)
        wiring.connect(m, data_packager.o, net.tx_data)
        wiring.connect(m, classifier.data, data_handler.i)
        wiring.connect(m, data_handler.mem_wr, wiring.flipped(self.mem_wr))
        wiring.connect(m, data_handler.arrived, detector.arrived)
        m.d.comb += [detector.query.eq(data_handler.query), data_handler.outstanding.eq(detector.outstanding)]

        # Kernel_start and the flush edge.
        start = spawner.start.payload
        m.d.comb += [
            spawner.start.valid.eq(control.start | self.start),
            start.task_id.eq(args.task_id),
            start.first.eq(args.spawn_first),
            start.count.eq(args.spawn_count),
            control.idle.eq(~spawner.busy),
            control.ready.eq(control.start),
            control.done.eq(spawner.done),
        ]
        flush_before = Signal()
        m.d.sync += flush_before.eq(args.flush[0])
        m.d.comb += detector.invalidate.eq(args.flush[0] & ~flush_before)

        # Counters.
        def transferred(port):
            return port.valid & port.ready

        events = {
            "rx_task": classifier.accepted[0], "rx_rdma": classifier.accepted[1],
            "rx_data": classifier.accepted[2],
            "tx_task": net.sent[0], "tx_rdma": net.sent[1], "tx_data": net.sent[2],
            "spawned": transferred(spawner.o), "issued": transferred(self.kernel_task),
            "completed": self.kernel_done.valid, "served": rdma_responder.served,
            "drop_rdma_range": rdma_responder.dropped, "drop_data_unsolicited": data_handler.dropped,
            "overflow": net.overflow, "start_rejected": spawner.error,
        }
        for bit, reason in enumerate(CLASSIFIER_DROPS):
            events[f"drop_{reason}"] = classifier.dropped[bit]
        for bit, reason in enumerate(RESPONDER_DROPS):
            events[f"drop_{reason}"] = pulse_count(responder.dropped[bit], responder.dropped_network[bit])
        for name in COUNTERS:
            counter = saturating_counter(m, f"count_{name}", self._counter_bits, pulse_count(events[name]))
            m.d.comb += getattr(control.status, name).eq(counter)
        # Tasks issued to the kernels and not completed, for `quiet` (bounded by what the kernels hold;
        # the saturating counters could not tell once at their limit).
        executing = Signal(32)
        issued, completed = transferred(self.kernel_task), self.kernel_done.valid
        with m.If(issued & ~completed):
            m.d.sync += executing.eq(executing + 1)
        with m.Elif(completed & ~issued):
            m.d.sync += executing.eq(executing - 1)

        quiet = Signal()
        m.d.comb += quiet.eq(
            ~spawner.busy & net.idle & ~classifier.task.valid & ~classifier.rdma.valid
            & ~classifier.data.valid & ~responder.o.valid & ~responder.o_network.valid
            & ~splitter.local.valid & ~splitter.remote.valid & ~splitter.busy & ~network_splitter.local.valid
            & ~packager.o.valid & detector.idle & ~rdma_responder.busy & ~data_packager.o.valid
            & (executing == 0))
        m.d.comb += [control.status.quiet.eq(quiet), self.quiet.eq(quiet)]
        return m


register_block(
    "runtime_node", RuntimeNode, family="runtime",
    summary="FCsN hardware runtime node: classifier, task/RDMA/data handlers, spawner, queues, "
            "AXI4-Lite control.",
    golden="golden.runtime.protocol:Cluster",
    drops={"s_axi_control": "status counters drop_check, drop_type, drop_node, drop_task_id, "
                             "drop_task_mask, drop_task_range, drop_task_row, drop_task_col, drop_misrouted, "
                             "drop_rdma_range, drop_data_unsolicited, overflow, start_rejected"},
)
