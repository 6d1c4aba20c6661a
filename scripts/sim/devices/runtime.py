"""Host device of the runtime family: the FCsN host API (the seed's Table 4.1) driving the simulated cluster.

:class:`FCsNHost` is the host side of ``rtl.runtime.cluster.Cluster`` in a cocotb simulation. Its
methods are Table 4.1's verbs, with the table's arguments and handles:

=========================================================  ======================================
``overlay = await System_init(node_num)``                  reset the cluster, check its size
``await Board_init(overlay, bit_file)``                    node ids and count, check every node idle
``status = await Check_Kernel(overlay)``                   per-node quiet bit and counters; ``done``
                                                           once every node is quiet and every packet
                                                           sent has been received
``handler = Host_data_preprocess(data)``                   cut ``A @ B`` into tasks and data lines
``await Board_MEM_init(overlay, handler)``                  data lines to their owners, ownership map
``await Board_MEM_init(overlay, handler.tasks)``           task-carrying data into each Spawn_MEM
``await Kernel_Start(overlay, task_id, argv)``             arguments on every node, then one
                                                           broadcast ``ap_start`` (all at once)
``out = await Sync_to_Host(overlay, handler)``             output rows from their home nodes
``await System_Finalize(overlay)``                         reset the cluster, close the overlay
=========================================================  ======================================

The control path is cocotbext-axi's ``AxiLiteMaster`` on the cluster's AXI4-Lite port (node *i*
at ``i * 0x1000``, registers as ``rtl.runtime.runtime_node.RuntimeNode.register_map``); the
memory path is the cluster's host load and read streams. After a run, :meth:`FCsNHost.read_cycles`
reads the cluster's on-chip cycle counters (from the broadcast start to each node's last busy
cycle, and to the last of all): the run's time without the host's register traffic in it.

:class:`CreditLink` is the far side of a node's credit-flow link (a credit-limited sender and a
receiver that returns credits late); :class:`SwitchPort`, one on a switch port, is the network side
the switch, ring and GCU tests drive.

:func:`run_cluster` runs one job through it in a simulation (session ``runtime.cluster``), for
``neartrain demo cluster`` and the runtime bench; the cluster tests drive :class:`FCsNHost`
directly. This module never imports ``testbenches``.
"""

import logging
from dataclasses import dataclass, field

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Event, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from golden.runtime.kernels import AGGREGATION, line_words, words_line
from golden.runtime.workload import Workload, sparse_dense_workload
from rtl.bus.axi_lite_control import AXILiteControl
from rtl.runtime.cluster import HOST_COUNTERS, HOST_DATA, HOST_OUT, HOST_SPAWN, cluster_status
from rtl.runtime.node_kernels import KERNEL_COUNTERS
from rtl.runtime.runtime_node import COUNTERS, RuntimeNode
from scripts.sim import channel

__all__ = ["FCsNHost", "HostReadError", "prepare", "run_job", "Overlay", "DataHandler", "TaskData",
           "KernelStatus", "RunCycles", "NODE_STRIDE", "CreditLink", "SwitchPort", "SESSIONS",
           "cluster_params", "run_cluster"]

NODE_STRIDE = 0x1000
CLOCK_NS = 10
_TRAFFIC = ("tx_task", "tx_rdma", "tx_data", "rx_task", "rx_rdma", "rx_data")
_CLASSIFIER_DROPS = ("drop_check", "drop_type", "drop_node", "drop_task_id")
_LINE_MASK = (1 << 448) - 1
_ERROR_BIT = 448  # a read answer: 448 data bits, then ``error``


class HostReadError(RuntimeError):
    """The cluster answered a host read with its error flag: no such node, or no such row."""


@dataclass
class Overlay:
    """``Overlay_handler``: the initialised cluster."""

    nodes: int
    bit_file: str = None
    open: bool = True
    config: object = None


@dataclass
class TaskData:
    """Task-carrying data: each node's Spawn_MEM entries."""

    spawn: list


@dataclass
class DataHandler:
    """``Data_handler``: the workload as the host cut it (data lines, tasks, configuration)."""

    workload: Workload
    tasks: TaskData = field(init=False)

    def __post_init__(self):
        self.tasks = TaskData(self.workload.spawn)

    @property
    def config(self):
        return self.workload.config


@dataclass
class KernelStatus:
    """What ``Check_Kernel`` reads: per node the ``quiet`` bit and every counter."""

    quiet: list
    counters: list
    done: bool
    cycle: int


class CreditLink:
    """The far side of a node's credit-flow link, on the ports ``<prefix>in``, ``<prefix>out``,
    ``<prefix>in_credit`` and ``<prefix>out_credit``: a credit-limited sender and a receiver.

    Flits queued in ``outbound`` as ``(vc, word)`` go into ``<prefix>in`` only with a credit for
    the node's receive buffer of their channel (``depth`` to start with, one back per
    ``<prefix>in_credit`` pulse); channel 3 needs none, and with ``ignore_credits`` none does (a
    misbehaving sender). Every flit on ``<prefix>out`` is handed to :meth:`take`, no channel may
    hold more than ``held_limit`` of them, and each one's credit goes back on ``<prefix>out_credit``
    after a random delay in ``credit_delay`` (cycles, ``[low, high)``). ``gaps`` idles the sender
    on 30 % of the cycles.

    Subclasses say what a received flit is for (:meth:`take`), and may choose which queued flit
    goes next (:meth:`pick`; the head by default) and note the one that went (:meth:`sent`).
    """

    credit_delay = (1, 12)

    def __init__(self, tb, prefix, rng, gaps, *, depth, held_limit):
        self.tb, self.dut, self.prefix, self.rng, self.gaps = tb, tb.dut, prefix, rng, gaps
        self.depth, self.held_limit = depth, held_limit
        self.ignore_credits = False
        self.clear()
        self._port("in__valid").value = 0
        self._port("out__ready").value = 1
        self._port("out_credit").value = 0
        cocotb.start_soon(self._run())

    def _port(self, name):
        return getattr(self.dut, f"{self.prefix}{name}")

    def clear(self):
        """Forget the link's state (it is reset with the node): every credit is here, nothing held."""
        self.credits = [self.depth] * 3
        self.outbound = []  # (vc, word)
        self.held = [0] * 3
        self.returns = []  # (cycle, vc)

    def take(self, vc, word):
        """A flit the node sent on channel ``vc``."""
        raise NotImplementedError

    def pick(self):
        """The index in ``outbound`` of the flit to send now, or None to wait: the head, once its
        channel has a credit."""
        return 0 if self.may_send(self.outbound[0][0]) else None

    def sent(self, word):
        """``word`` has just gone into the node."""

    def may_send(self, vc):
        return self.ignore_credits or vc == 3 or self.credits[vc]

    def add_credits(self, credit):
        """The ``<prefix>in_credit`` pulses of this cycle (one bit per channel)."""
        for vc in range(3):
            self.credits[vc] += credit >> vc & 1

    async def _run(self):
        signals = ("__valid", "__payload", "_credit")
        in_valid, in_payload, in_credit = (self._port(f"in{name}") for name in signals)
        out_valid, out_payload, out_credit = (self._port(f"out{name}") for name in signals)
        while True:
            await RisingEdge(self.tb.clock)
            self.add_credits(int(in_credit.value))
            if int(out_valid.value):
                word = int(out_payload.value)
                vc = word >> 512
                self.held[vc] += 1
                assert self.held[vc] <= self.held_limit, f"{self.prefix}out channel {vc} overran its credits"
                self.returns.append((self.tb.cycle + int(self.rng.integers(*self.credit_delay)), vc))
                self.take(vc, word & ((1 << 512) - 1))
            pulses = 0
            for entry in [entry for entry in self.returns if entry[0] <= self.tb.cycle]:
                if not pulses >> entry[1] & 1:
                    pulses |= 1 << entry[1]
                    self.returns.remove(entry)
                    self.held[entry[1]] -= 1
            out_credit.value = pulses
            in_valid.value = 0
            if self.outbound and not (self.gaps and self.rng.random() < 0.3):
                index = self.pick()
                if index is not None:
                    vc, word = self.outbound.pop(index)
                    if vc < 3 and not self.ignore_credits:
                        self.credits[vc] -= 1
                    in_payload.value = word | vc << 512
                    in_valid.value = 1
                    self.sent(word)


class SwitchPort(CreditLink):
    """A node attached to switch port ``p<port>``: a credit-limited sender and a (slow) receiver.

    Flits queued in ``outbound`` as ``(vc, word)`` go out only with a credit for the switch's input
    buffer of their channel (``depth`` to start with); channel 3 needs none. Every flit the switch
    sends is appended to ``received`` as ``(vc, word)`` and its credit goes back after a random
    delay (up to 30 cycles when ``slow``), never more than ``rx_credits`` held at once. ``gaps``
    idles the sender on 30 % of the cycles. ``arrived`` is set on every received flit.
    """

    def __init__(self, tb, port, rng, gaps, slow, *, depth, rx_credits):
        self.port, self.slow = port, slow
        self.credit_delay = (1, 30 if slow else 3)
        self.arrived = Event()
        super().__init__(tb, f"p{port}_", rng, gaps, depth=depth, held_limit=rx_credits)

    def clear(self):
        """Forget everything (reset): the switch's buffers are empty, so every credit is here;
        credit pulses of the next two cycles were sent before the reset and are ignored."""
        super().clear()
        self.stale = 2
        self.received = []  # (vc, word)

    def add_credits(self, credit):
        if self.stale:
            self.stale -= 1
            credit = 0
        super().add_credits(credit)
        assert max(self.credits) <= self.depth, f"port {self.port} got too many credits"

    def take(self, vc, word):
        self.received.append((vc, word))
        self.arrived.set()


def _register_offsets():
    node = RuntimeNode()
    offsets = {entry["name"]: entry["offset"] for entry in node.register_map()}
    node._MustUse__silence = True
    return offsets


def _cluster_offsets(nodes):
    """The cluster's own registers (broadcast start, cycle counters): name -> byte offset."""
    control = AXILiteControl(status=cluster_status(nodes))
    control._MustUse__silence = True
    return {entry["name"]: entry["offset"] for entry in control.register_map()}


@dataclass
class RunCycles:
    """The cluster's on-chip cycle counters after a run (:meth:`FCsNHost.read_cycles`).

    Attributes
    ----------
    cycles : int
        From the broadcast start to the last cycle any node was busy (all done).
    nodes : list of int
        Per node, from the start to its last busy cycle.
    """

    cycles: int
    nodes: list

    def problems(self, window):
        """What makes these counters implausible for a run the host saw take ``window`` cycles
        (from its first start write to ``Check_Kernel`` done): a node at 0 (it never worked),
        a count past the window, or an all-done count other than the largest node's."""
        found = [f"node {node} counted 0 cycles" for node, cycles in enumerate(self.nodes) if not cycles]
        found += [f"node {node} counted {cycles} cycles, past the host's window of {window}"
                  for node, cycles in enumerate(self.nodes) if cycles > window]
        if self.cycles != max(self.nodes):
            found.append(f"all done at {self.cycles}, not the last node's {max(self.nodes)}")
        return found


class FCsNHost:
    """The host of a simulated cluster (``dut`` is the ``runtime_cluster`` top level).

    Parameters
    ----------
    dut : cocotb handle
    nodes : int
        The cluster's node count (its elaboration parameter).
    start_clock : bool
        Start the 100 MHz clock (False when a testbench already drives it).
    """

    def __init__(self, dut, nodes, *, start_clock=True):
        self.dut, self.nodes = dut, nodes
        self.clock = dut.clk
        if start_clock:
            Clock(dut.clk, CLOCK_NS, unit="ns").start()
        dut.rst.value = 1
        dut.host_load__valid.value = 0
        dut.host_read__valid.value = 0
        dut.host_read_data__ready.value = 0
        self.master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control_"), dut.clk, dut.rst)
        for interface in (self.master.write_if, self.master.read_if):  # they log every access at INFO
            interface.log.setLevel(logging.WARNING)
        self.offsets = _register_offsets()
        self.cluster_offsets = _cluster_offsets(nodes)
        self.b_load = None  # the last Board_MEM_init's data load: lines written, host-port cycles
        self.cycle = 0
        cocotb.start_soon(self._count())

    async def _count(self):
        while True:
            await RisingEdge(self.clock)
            self.cycle += 1

    # ------------------------------------------------------------------ registers
    async def write_register(self, node, name, value):
        await self.master.write_dword(node * NODE_STRIDE + self.offsets[name], int(value))

    async def read_register(self, node, name):
        return await self.master.read_dword(node * NODE_STRIDE + self.offsets[name])

    async def read_counters(self, node, names=COUNTERS):
        return {name: await self.read_register(node, name) for name in names}

    async def write_cluster(self, name, value):
        """A write to the cluster's own register file (after the nodes', at ``nodes * 0x1000``)."""
        await self.master.write_dword(self.nodes * NODE_STRIDE + self.cluster_offsets[name], int(value))

    async def read_cycles(self):
        """The on-chip cycle counters of the last run (:class:`RunCycles`); read after it."""
        base = self.nodes * NODE_STRIDE
        read = self.master.read_dword
        return RunCycles(await read(base + self.cluster_offsets["cycles"]),
                         [await read(base + self.cluster_offsets[f"node{node}_cycles"])
                          for node in range(self.nodes)])

    # ------------------------------------------------------------------ host memory port
    async def _edge_when(self, signal):
        """Wait for the first rising edge at which ``signal`` is high."""
        while True:
            await RisingEdge(self.clock)
            if int(signal.value):
                return

    async def _load(self, items):
        """Host writes ``(node, target, address, data)``, one per cycle while the cluster is ready."""
        dut = self.dut
        for node, target, address, value in items:
            dut.host_load__payload.value = node | target << 4 | address << 6 | value << 30
            dut.host_load__valid.value = 1
            await self._edge_when(dut.host_load__ready)
        dut.host_load__valid.value = 0

    async def _read_rows(self, requests):
        """Read output rows ``(node, row)`` one at a time; returns their 448-bit values.

        Raises :class:`HostReadError` when the cluster answers a read with its error flag (the
        node is not in the cluster, or the row is past its output memory)."""
        dut = self.dut
        values = []
        dut.host_read_data__ready.value = 1
        for node, row in requests:
            dut.host_read__payload.value = node | row << 4
            dut.host_read__valid.value = 1
            await self._edge_when(dut.host_read__ready)
            dut.host_read__valid.value = 0
            await self._edge_when(dut.host_read_data__valid)
            answer = int(dut.host_read_data__payload.value)
            if answer >> _ERROR_BIT & 1:
                dut.host_read_data__ready.value = 0
                raise HostReadError(f"the cluster refused the read of node {node} row {row}")
            values.append(answer & _LINE_MASK)
        dut.host_read_data__ready.value = 0
        return values

    def host_errors(self):
        """The cluster's host-port counters, and each node's kernel and data memory counters
        (``{name: value}``, ``kernel_<name>`` and ``memory_range_errors`` as a list per node)."""
        counts = {name: int(getattr(self.dut, name).value) for name in HOST_COUNTERS}
        for name in KERNEL_COUNTERS:
            word = int(getattr(self.dut, f"kernel_{name}").value)
            counts[f"kernel_{name}"] = [word >> (32 * node) & 0xFFFFFFFF for node in range(self.nodes)]
        word = int(self.dut.memory_range_errors.value)
        counts["memory_range_errors"] = [word >> (32 * node) & 0xFFFFFFFF for node in range(self.nodes)]
        return counts

    # ------------------------------------------------------------------ Table 4.1
    async def System_init(self, node_num):  # noqa: N802  (the seed's names)
        """FCsN multi-node environment set-up: reset the cluster; returns the ``Overlay_handler``."""
        if node_num != self.nodes:
            raise ValueError(f"the simulated cluster has {self.nodes} nodes, not {node_num}")
        self.dut.rst.value = 1
        await ClockCycles(self.clock, 4)
        self.dut.rst.value = 0
        await RisingEdge(self.clock)
        return Overlay(nodes=node_num)

    async def Board_init(self, overlay, bit_file="runtime_cluster"):  # noqa: N802
        """Configure the network function (node ids, node count) and check every board is idle."""
        self._check_open(overlay)
        overlay.bit_file = bit_file
        for node in range(overlay.nodes):
            await self.write_register(node, "node", node)
            await self.write_register(node, "nodes", overlay.nodes)
            control = await self.read_register(node, "CTRL")
            if not control >> 2 & 1:
                raise RuntimeError(f"node {node} is not idle after Board_init (CTRL {control:#x})")

    def Host_data_preprocess(self, data):  # noqa: N802
        """Cut ``data`` (a dict: ``adjacency``, ``dense`` and the options of
        :func:`golden.runtime.workload.sparse_dense_workload`) into a ``Data_handler``."""
        if isinstance(data, Workload):
            return DataHandler(data)
        options = dict(data)
        adjacency, dense = options.pop("adjacency"), options.pop("dense")
        return DataHandler(sparse_dense_workload(adjacency, dense, nodes=self.nodes, **options))

    async def Board_MEM_init(self, overlay, handler):  # noqa: N802
        """Sync data to the chips: a ``Data_handler`` loads the data lines and the ownership map;
        ``Task_carrying_data`` (``handler.tasks``) fills every Spawn_MEM. Returns the handle."""
        self._check_open(overlay)
        if isinstance(handler, TaskData):
            items = [(node, HOST_SPAWN, index, entry) for node, entries in enumerate(handler.spawn)
                     for index, entry in enumerate(entries)]
            await self._load(items)
            return handler
        config = handler.config
        if config.nodes != overlay.nodes:
            raise ValueError(f"the data was cut for {config.nodes} nodes, the overlay has {overlay.nodes}")
        overlay.config = config
        for node in range(overlay.nodes):
            for name, value in (("home_shift", config.home_shift), ("range_shift", config.range_shift),
                                ("rows", config.rows), ("ranges", config.ranges),
                                ("replicated", int(config.replicated))):
                await self.write_register(node, name, value)
        lines = [(node, HOST_DATA, line, value) for node in range(overlay.nodes)
                 for line, value in handler.workload.node_lines(node)]
        start = self.cycle
        await self._load(lines)
        self.b_load = {"lines": len(lines), "cycles": self.cycle - start, "replicated": config.replicated}
        return handler

    async def clear_outputs(self, overlay, rows, values=None):
        """Write every output row of every node (zeros, or ``values[row]`` words) at its home."""
        config = overlay.config
        items = []
        for row in range(rows):
            value = 0 if values is None else words_line(values[row])
            items.append((config.home(row), HOST_OUT, row, value))
        await self._load(items)

    async def Kernel_Start(self, overlay, task_id, argv=None):  # noqa: N802
        """Start kernel ``task_id`` on every node: ``argv`` maps a node to its Spawn_MEM window
        ``(first, count)`` (every node's whole list by default); a flush of fetched data first.
        The arguments go to each node; the start is one write to the cluster, which starts every
        node in the same cycle and its cycle counters with them (:meth:`read_cycles`)."""
        self._check_open(overlay)
        for node in range(overlay.nodes):
            first, count = argv[node] if argv is not None else (0, self._spawned[node])
            await self.write_register(node, "flush", 1)
            await self.write_register(node, "flush", 0)
            await self.write_register(node, "task_id", task_id)
            await self.write_register(node, "spawn_first", first)
            await self.write_register(node, "spawn_count", count)
        await self.write_cluster("CTRL", 1)

    async def Check_Kernel(self, overlay):  # noqa: N802
        """Read every node's ``quiet`` bit; when all are set, the traffic counters: done when every
        packet sent was received (or dropped by a classifier) and all are still quiet."""
        self._check_open(overlay)
        quiet = [await self.read_register(node, "quiet") for node in range(overlay.nodes)]
        counters = []
        done = False
        if all(quiet):
            counters = [await self.read_counters(node) for node in range(overlay.nodes)]
            sent = sum(c[name] for c in counters for name in ("tx_task", "tx_rdma", "tx_data"))
            received = sum(c[name] for c in counters for name in ("rx_task", "rx_rdma", "rx_data")
                           + _CLASSIFIER_DROPS)
            again = [await self.read_register(node, "quiet") for node in range(overlay.nodes)]
            done = sent == received and all(again)
        return KernelStatus(quiet, counters, done, self.cycle)

    async def wait_kernel(self, overlay, *, timeout_cycles, poll_cycles=64):
        """Poll ``Check_Kernel`` until done; raise ``TimeoutError`` after ``timeout_cycles``."""
        start = self.cycle
        reported = start
        while True:
            status = await self.Check_Kernel(overlay)
            if status.done:
                return status
            if self.cycle - reported >= 20_000:
                reported = self.cycle
                self.dut._log.info("waiting for the kernel: %d cycles, quiet %s", self.cycle - start,
                                   status.quiet)
            if self.cycle - start > timeout_cycles:
                counters = [await self.read_counters(node) for node in range(overlay.nodes)]
                busy = {node: {name: value for name, value in counts.items() if value}
                        for node, counts in enumerate(counters)}
                raise TimeoutError(f"the kernel did not finish within {timeout_cycles} cycles "
                                   f"(quiet {status.quiet}; counters {busy})")
            await ClockCycles(self.clock, poll_cycles)

    async def Sync_to_Host(self, overlay, handler):  # noqa: N802
        """Read every output row from its home node: an ``rows x features`` uint32 array."""
        self._check_open(overlay)
        config = handler.config
        values = await self._read_rows([(config.home(row), row) for row in range(config.rows)])
        return np.array([line_words(value, handler.workload.features) for value in values], dtype=np.uint32)

    async def System_Finalize(self, overlay):  # noqa: N802
        """Free the overlay: hold the cluster in reset."""
        self._check_open(overlay)
        self.dut.rst.value = 1
        await ClockCycles(self.clock, 2)
        overlay.open = False

    # ------------------------------------------------------------------ helpers
    def _check_open(self, overlay):
        if not overlay.open:
            raise RuntimeError("the overlay was finalised")

    async def load_tasks(self, overlay, handler):
        """``Board_MEM_init`` with the task-carrying data, remembering each node's count."""
        self._spawned = [len(entries) for entries in handler.tasks.spawn]
        return await self.Board_MEM_init(overlay, handler.tasks)

    _spawned = ()


async def prepare(host, nodes, data):
    """``System_init``, ``Board_init``, ``Host_data_preprocess``, both ``Board_MEM_init`` and zero
    outputs; returns ``(overlay, handler)``."""
    overlay = await host.System_init(nodes)
    await host.Board_init(overlay, "runtime_cluster")
    handler = host.Host_data_preprocess(data)
    await host.Board_MEM_init(overlay, handler)
    await host.load_tasks(overlay, handler)
    await host.clear_outputs(overlay, handler.config.rows)
    return overlay, handler


async def run_job(host, job):
    """One demo job: the Table 4.1 sequence for ``job`` (a dict); returns ``out``, ``b_load`` (the data
    load: lines, host-port cycles, replicated) and per kernel run the counters, ``cycles`` (on chip,
    start to all done), ``node_cycles``, ``host_cycles`` (Kernel_Start to Check_Kernel done, the
    host's register traffic included) and ``cycle_problems`` (:meth:`RunCycles.problems`)."""
    overlay, handler = await prepare(host, job["nodes"], job["data"])
    results = []
    for task_id in job["kernels"]:
        start = host.cycle
        await host.Kernel_Start(overlay, task_id)
        status = await host.wait_kernel(overlay, timeout_cycles=job.get("timeout", 2_000_000))
        timing = await host.read_cycles()
        results.append({"task_id": task_id, "cycles": timing.cycles, "node_cycles": timing.nodes,
                        "host_cycles": status.cycle - start, "counters": status.counters,
                        "cycle_problems": timing.problems(status.cycle - start)})
    out = await host.Sync_to_Host(overlay, handler)
    await host.System_Finalize(overlay)
    return {"out": out, "runs": results, "b_load": host.b_load}


async def cluster_session(dut, job):
    """Run ``job`` (see :func:`run_job`) through the host API on the simulated cluster."""
    return await run_job(FCsNHost(dut, channel.params()["nodes"]), job)


SESSIONS = {"cluster": cluster_session}


# -------------------------------------------------------------------- synchronous API
def cluster_params(workload, *, queue_depth=8, switch_depth=8):
    """``runtime_cluster`` parameters that hold ``workload``."""
    config = workload.config
    entries = max(len(entries) for entries in workload.spawn)
    return {
        "nodes": config.nodes,
        "lines": config.rows,
        "features": workload.features,
        "spawn_depth": 1 << max(1, (entries - 1).bit_length()),
        "ranges": max(2, 1 << (config.ranges - 1).bit_length()),
        "block": config.block,
        "queue_depth": queue_depth,
        "switch_depth": switch_depth,
    }


# The long cluster runs (demo, scaling bench) build their model at -O2: see docs/runtime.md §7
# for the build time against the run time.
CLUSTER_MODEL_OPT = "-O2"


def run_cluster(workload, kernels=(AGGREGATION,), *, model_opt=CLUSTER_MODEL_OPT, **cluster_options):
    """Run ``workload`` through the host API on a ``runtime_cluster`` that holds it (built with
    :func:`cluster_params` and ``cluster_options``, its C++ at ``model_opt``); returns
    :func:`run_job`'s result dict."""
    from scripts.sim.devices import run_session

    job = {
        "nodes": workload.config.nodes,
        "data": workload,
        "kernels": list(kernels),
        "timeout": 40 * sum(len(entries) for entries in workload.spawn) * 4 + 50_000,
    }
    return run_session("runtime_cluster", "runtime.cluster", job,
                       params=cluster_params(workload, **cluster_options), model_opt=model_opt)
