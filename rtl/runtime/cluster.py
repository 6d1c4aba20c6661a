"""The simulated FCsN cluster: N runtime nodes, their memories and kernels, and the switch."""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4LiteSignature
from ..bus.axi_lite_control import AXILiteControl
from ..lib.counters import COUNTER_BITS, count_saturating, saturating_counter
from ..net.packet import LINE_BITS, NODE_BITS, PACKET_BITS, ROW_BITS
from ..net.switch import SWITCH_DEPTH_PARAM, SWITCH_NODES, Switch
from ..registration import Param, Parameterized, register_block
from .axi_lite_decoder import AXILiteDecoder
from .common import BLOCK_PARAM, RANGES_PARAM
from .node_kernels import (
    KERNEL_COUNTERS,
    NodeKernels,
    kernel_mask,
    read_answer_layout,
)
from .node_memory import NodeMemory
from .runtime_node import RuntimeNode

__all__ = ["Cluster", "CLUSTER_NODES", "HOST_SPAWN", "HOST_DATA", "HOST_OUT", "HOST_COUNTERS",
           "host_write_layout", "host_read_layout", "cluster_status"]

# A 1-node cluster is the baseline of the scaling figures: its node sits on a 2-port switch
# whose other port is tied off (nothing is ever addressed to it).
CLUSTER_NODES = (1,) + SWITCH_NODES

# Targets of a host write.
HOST_SPAWN, HOST_DATA, HOST_OUT = 0, 1, 2
# The host port's error counters (32 bits, saturating), in port order.
HOST_COUNTERS = ("host_load_errors", "host_read_errors")


def host_write_layout():
    """A host write: ``node``, ``target`` (0 Spawn_MEM, 1 data, 2 output memory), ``address``, ``data``."""
    return data.StructLayout({"node": NODE_BITS, "target": 2, "address": ROW_BITS, "data": PACKET_BITS})


def host_read_layout():
    """A host read of a node's output memory: ``node`` and ``address`` (row)."""
    return data.StructLayout({"node": NODE_BITS, "address": ROW_BITS})


def cluster_status(nodes):
    """The cluster's own status registers (after CTRL..ISR, at ``nodes * 0x1000``): ``cycles``, the
    cycles from the broadcast start to the last cycle any node was busy (all done), then
    ``node<i>_cycles``, the same for node *i* alone."""
    return (("cycles", 32),) + tuple((f"node{index}_cycles", 32) for index in range(nodes))


def _cycle_counters(m, start, quiet, registers):
    """On-chip timing: ``registers[0]`` (all done) and ``registers[1 + i]`` (node *i*).

    ``elapsed`` counts the cycles since the last ``start`` pulse (1 in the cycle after it,
    saturating); every cycle that node *i* is not ``quiet`` its register takes ``elapsed``, so
    after the run it holds the cycle of the node's last busy cycle, and the all-done register
    that of the last cycle any node was busy (the largest of the nodes'). A start zeroes them.
    Returns ``elapsed``.
    """
    elapsed = Signal(32)
    limit = (1 << 32) - 1
    with m.If(start):
        m.d.sync += elapsed.eq(1)
    with m.Elif((elapsed != 0) & (elapsed != limit)):
        m.d.sync += elapsed.eq(elapsed + 1)
    busy = [~bit for bit in quiet]
    any_busy = busy[0]
    for bit in busy[1:]:
        any_busy = any_busy | bit
    for index, (register, active) in enumerate(zip(registers, [any_busy] + busy, strict=True)):
        latched = Signal(32, name=f"cycles_latched{index}")
        m.d.comb += register.eq(latched)
        with m.If(start):
            m.d.sync += latched.eq(0)
        with m.Elif(active & (elapsed != 0)):
            m.d.sync += latched.eq(elapsed)
    return elapsed


class Cluster(Parameterized, wiring.Component):
    """``nodes`` runtime nodes on one switch, each with its data memory and kernels, in one design.

    Node *i* is a :class:`~rtl.runtime.runtime_node.RuntimeNode` whose network link is port *i*
    of the :class:`~rtl.runtime.switch.Switch` (the node's send credits are the switch's input
    buffers, the switch's are the node's receive queues), whose memory port is a
    :class:`~rtl.runtime.node_memory.NodeMemory` and whose kernel port is a
    :class:`~rtl.runtime.node_kernels.NodeKernels`. The host reaches every node through one
    AXI4-Lite port (node *i*'s control registers at ``i * 0x1000``) and one load/read port pair.

    **Broadcast start and on-chip timing.** The cluster's own register file sits at
    ``nodes * 0x1000`` (an :class:`~rtl.bus.axi_lite_control.AXILiteControl`): one write of
    ``ap_start`` there starts every node's spawner in the same cycle (with the arguments each node
    holds), when every node is quiet. Its status registers (:func:`cluster_status`) count cycles
    from that start to the last cycle each node was busy (not ``quiet``) and to the last cycle any
    node was (all done), so the host reads the run's time after it, outside the timed window.
    ``ap_done`` rises when every node is quiet again after the start, a hint only (a flit may
    still be in the switch): the host's ``Check_Kernel`` decides when the run is over.

    **Every host request is answered or counted.** A host write to a node that is not in the
    cluster, to an unknown target (3), or past its memory (an output row or data line not below
    ``lines``, a Spawn_MEM entry not below ``spawn_depth``) is taken, writes nothing and counts in
    ``host_load_errors``. A host read of a node that is not in the cluster, or of a row not below
    ``lines``, is answered with ``error`` set and data 0 and counts in ``host_read_errors``; every
    other read is answered with the row. A task slot whose row or column a node's kernels cannot
    hold (the ``rows`` register set above ``lines``) is refused and counted by those kernels
    (``kernel_range_errors``), and so is an aggregation slot outside its bank
    (``kernel_bank_errors``); a line a node's data memory cannot hold, written by its data handler
    or read by its RDMA responder, is counted by that memory (``memory_range_errors``).

    Parameters
    ----------
    nodes : int
        1, 2, 4, 8 or 16.
    lines : int
        Lines of each data memory and rows of each output memory (global addresses).
    features : int
        32-bit words per row used by the kernels, 1 to 14.
    spawn_depth : int
        Spawn_MEM entries per node.
    ranges : int
        Data ranges tracked per node (at least ``ceil(lines / block)``).
    block : int
        Lines per data range.
    queue_depth : int
        Entries of each runtime queue (and the credits each node grants the switch).
    switch_depth : int
        Switch input buffer entries per port and channel.
    aggregation : bool
        Attach the aggregation pipeline (kernel 6) to every node.
    gemm : bool
        Attach the dense GEMM unit (kernel 1) to every node.

    Attributes
    ----------
    s_axi_control : In(AXI4LiteSignature(12 + select bits, 32))
        Node *i*'s registers at ``i * 0x1000``, the cluster's at ``nodes * 0x1000``.
    host_load : In(stream.Signature(host_write_layout()))
        Host writes (``Board_MEM_init``): Spawn_MEM entries, data lines, output rows.
    host_read : In(stream.Signature(host_read_layout()))
    host_read_data : Out(stream.Signature(StructLayout(data: 448, error: 1)))
        Host reads of output rows (``Sync_to_Host``), one at a time, each answered.
    host_load_errors, host_read_errors : Out(32)
        Refused host writes and reads (above); saturating, zeroed by reset.
    kernel_range_errors, kernel_bank_errors : Out(ArrayLayout(32, nodes))
        Each node's :class:`~rtl.runtime.node_kernels.NodeKernels` counters of the same names.
    memory_range_errors : Out(ArrayLayout(32, nodes))
        Each node's :class:`~rtl.runtime.node_memory.NodeMemory` ``range_errors``.
    switch_dropped : Out(32)
        Flits the switch dropped as unroutable (saturating count).
    switch_overflow : Out(nodes)
        The switch's sticky per-port overflow flags (a node ignored its send credits).
    """

    PARAMS = (
        Param("nodes", int, 2, "nodes", choices=CLUSTER_NODES),
        Param("lines", int, 256, "data memory lines and output rows per node", minimum=4, maximum=1 << 24),
        Param("features", int, 4, "32-bit words per row", minimum=1, maximum=14),
        Param("spawn_depth", int, 64, "Spawn_MEM entries per node", minimum=2, maximum=65536),
        RANGES_PARAM,
        BLOCK_PARAM,
        Param("queue_depth", int, 8, "runtime queue entries", minimum=2, maximum=1024),
        SWITCH_DEPTH_PARAM,
        Param("aggregation", bool, True, "attach the aggregation pipeline (kernel 6) to every node"),
        Param("gemm", bool, False, "attach the dense GEMM unit (kernel 1) to every node"),
    )

    def __init__(self, *, nodes=2, lines=256, features=4, spawn_depth=64, ranges=64, block=20, queue_depth=8,
                 switch_depth=4, aggregation=True, gemm=False):
        self._lines = lines  # the kernels' minimum
        self._switch_depth = switch_depth
        if -(-lines // block) > ranges:
            raise ValueError(f"ranges must cover lines / block = {-(-lines // block)}, not {ranges}")
        self._select_bits = nodes.bit_length()  # nodes + 1 register files: the nodes' and the cluster's
        super().__init__({
            "s_axi_control": In(AXI4LiteSignature(address_width=12 + self._select_bits, data_width=32)),
            "host_load": In(stream.Signature(host_write_layout())),
            "host_read": In(stream.Signature(host_read_layout())),
            "host_read_data": Out(stream.Signature(read_answer_layout())),
            **{name: Out(COUNTER_BITS) for name in HOST_COUNTERS},
            **{f"kernel_{name}": Out(data.ArrayLayout(COUNTER_BITS, nodes)) for name in KERNEL_COUNTERS},
            "memory_range_errors": Out(data.ArrayLayout(COUNTER_BITS, nodes)),
            "switch_dropped": Out(32),
            "switch_overflow": Out(nodes),
        })

    @property
    def nodes(self):
        return self._nodes

    def elaborate(self, platform):
        m = Module()
        nodes = self._nodes
        switch = Switch(nodes=max(2, nodes), depth=self._switch_depth, rx_credits=self._queue_depth)
        m.submodules.switch = switch
        for port in range(nodes, 2):  # the 1-node cluster's unused port: sends nothing, takes anything
            unused = switch.port(port, "out")
            m.d.comb += [switch.port(port, "in").valid.eq(0), unused.ready.eq(1),
                         switch.port(port, "out_credit").eq(
                             Mux(unused.valid, (Const(1, 3) << unused.payload.vc.as_value())[:3], 0))]
        m.d.comb += [self.switch_dropped.eq(saturating_counter(m, "switch_dropped", 32, switch.dropped)),
                     self.switch_overflow.eq(switch.overflow)]
        m.submodules.decoder = decoder = AXILiteDecoder(ports=nodes + 1, address_width=12)
        wiring.connect(m, wiring.flipped(self.s_axi_control), decoder.s_axi)
        m.submodules.control = control = AXILiteControl(status=cluster_status(nodes), address_width=12)
        wiring.connect(m, getattr(decoder, f"m{nodes}_axi"), control.s_axi_control)
        quiet = []

        load = self.host_load.payload
        load_ready = Signal()
        m.d.comb += self.host_load.ready.eq(load_ready)
        # A host write is refused (taken, counted, nothing written) unless its node is here and
        # its address is inside its target's memory; narrower address ports would alias it.
        # (If-chains and expressions, not m.Switch: Verilator's -Wall rejects an incomplete case.)
        load_ok = Signal()
        m.d.comb += load_ok.eq(((load.target == HOST_SPAWN) & (load.address < self._spawn_depth))
                               | (((load.target == HOST_DATA) | (load.target == HOST_OUT))
                                  & (load.address < self._lines)))
        if nodes < 1 << NODE_BITS:
            load_ok_here = load_ok & (load.node < nodes)
        else:
            load_ok_here = load_ok
        with m.If(~load_ok_here):
            m.d.comb += load_ready.eq(1)
        count_saturating(m, self.host_load_errors, [self.host_load.valid & ~load_ok_here])

        read = self.host_read.payload
        reading = Signal()  # a host read is held until it is answered
        sent = Signal()  # ... and its command has been taken by its node's kernels
        refused = Signal()  # ... or it is answered here, with the error flag (no such node or row)
        read_node = Signal(NODE_BITS)
        read_address = Signal(ROW_BITS)
        read_ok = read.address < self._lines
        if nodes < 1 << NODE_BITS:
            read_ok &= read.node < nodes
        m.d.comb += self.host_read.ready.eq(~reading)
        with m.If(self.host_read.valid & ~reading):
            m.d.sync += [reading.eq(1), sent.eq(0), refused.eq(~read_ok), read_node.eq(read.node),
                         read_address.eq(read.address)]
        count_saturating(m, self.host_read_errors, [self.host_read.valid & ~reading & ~read_ok])

        for index in range(nodes):
            node = RuntimeNode(kernels=kernel_mask(self._aggregation, self._gemm), block=self._block,
                               ranges=self._ranges, spawn_depth=self._spawn_depth,
                               queue_depth=self._queue_depth, tx_credits=self._switch_depth)
            memory = NodeMemory(lines=self._lines)
            kernels = NodeKernels(features=self._features, rows=self._lines, aggregation=self._aggregation,
                                  gemm=self._gemm)
            m.submodules[f"node{index}"] = node
            m.submodules[f"memory{index}"] = memory
            m.submodules[f"kernels{index}"] = kernels

            wiring.connect(m, getattr(decoder, f"m{index}_axi"), node.s_axi_control)
            m.d.comb += node.start.eq(control.start)
            quiet.append(node.quiet)
            wiring.connect(m, node.net_out, switch.port(index, "in"))
            wiring.connect(m, switch.port(index, "out"), node.net_in)
            m.d.comb += [switch.port(index, "out_credit").eq(node.net_in_credit),
                         node.net_out_credit.eq(switch.port(index, "in_credit"))]

            wiring.connect(m, node.mem_rd_cmd, memory.rd_cmd)
            wiring.connect(m, memory.rd_data, node.mem_rd_data)
            wiring.connect(m, node.mem_wr, memory.wr)
            wiring.connect(m, node.kernel_task, kernels.task)
            wiring.connect(m, kernels.done, node.kernel_done)
            m.d.comb += [memory.kernel_addr.eq(kernels.b_addr), kernels.b_data.eq(memory.kernel_data)]
            wiring.connect(m, memory.written, kernels.b_load)

            # Host writes, by node and target.
            here = self.host_load.valid & (load.node == index) & load_ok
            m.d.comb += [
                node.spawn_load.payload.address.eq(load.address),
                node.spawn_load.payload.packet.eq(load.data),
                node.spawn_load.valid.eq(here & (load.target == HOST_SPAWN)),
                memory.load.payload.line.eq(load.address),
                memory.load.payload.data.eq(load.data[:LINE_BITS]),
                memory.load.valid.eq(here & (load.target == HOST_DATA)),
                kernels.load.payload.row.eq(load.address),
                kernels.load.payload.data.eq(load.data[:LINE_BITS]),
                kernels.load.valid.eq(here & (load.target == HOST_OUT)),
            ]
            with m.If((load.node == index) & load_ok):
                with m.If(load.target == HOST_SPAWN):
                    m.d.comb += load_ready.eq(node.spawn_load.ready)
                with m.Elif(load.target == HOST_DATA):
                    m.d.comb += load_ready.eq(memory.load.ready)
                with m.Else():  # HOST_OUT (load_ok refuses target 3)
                    m.d.comb += load_ready.eq(kernels.load.ready)

            # Host reads of the output memory, one at a time.
            m.d.comb += [
                kernels.read_cmd.payload.eq(read_address),
                kernels.read_cmd.valid.eq(reading & ~refused & ~sent & (read_node == index)),
                kernels.read_data.ready.eq(reading & ~refused & (read_node == index)
                                           & self.host_read_data.ready),
            ]
            with m.If(kernels.read_cmd.valid & kernels.read_cmd.ready):
                m.d.sync += sent.eq(1)
            with m.If(reading & ~refused & (read_node == index)):
                m.d.comb += [self.host_read_data.valid.eq(kernels.read_data.valid),
                             self.host_read_data.payload.eq(kernels.read_data.payload)]
            for name in KERNEL_COUNTERS:
                m.d.comb += getattr(self, f"kernel_{name}")[index].eq(getattr(kernels, name))
            m.d.comb += self.memory_range_errors[index].eq(memory.range_errors)
        all_quiet = quiet[0]
        for bit in quiet[1:]:
            all_quiet = all_quiet & bit
        m.d.comb += [control.idle.eq(all_quiet), control.ready.eq(control.start)]
        elapsed = _cycle_counters(m, control.start, quiet,
                                  [getattr(control.status, name) for name, _ in cluster_status(nodes)])
        # ap_done: every node quiet again after the start (from its second cycle on: the spawners
        # are busy from the cycle after it). A hint only; a flit may still be in the switch.
        running = Signal()
        with m.If(control.start):
            m.d.sync += running.eq(1)
        with m.Elif(running & all_quiet & (elapsed > 1)):
            m.d.sync += running.eq(0)
            m.d.comb += control.done.eq(1)
        with m.If(reading & refused):
            m.d.comb += [self.host_read_data.valid.eq(1), self.host_read_data.payload.error.eq(1)]
        with m.If(self.host_read_data.valid & self.host_read_data.ready):
            m.d.sync += reading.eq(0)
        return m


register_block(
    "runtime_cluster", Cluster, family="runtime",
    summary="Simulated FCsN cluster: N runtime nodes with data memories and kernels on one RTL switch.",
    golden="golden.runtime.protocol:Cluster",
    drops={"s_axi_control": "every node's drop counters (runtime_node's), over AXI4-Lite",
           "switch_dropped": "flits the switch dropped as unroutable",
           "switch_overflow": "per port, sticky: a flit lost to a full switch input buffer",
           "host_load_errors": "host writes to an absent node, an unknown target or past the memory",
           "host_read_errors": "host reads of an absent node or past the lines (answered with error)",
           "kernel_range_errors": "per node: task slots, host writes and B lines past rows",
           "kernel_bank_errors": "per node: aggregation slots outside their bank",
           "memory_range_errors": "per node: data-memory writes and RDMA reads past its lines"},
)
