"""The runtime family's checked sessions: one node with the rest of the cluster played, and the cluster.

:mod:`.runtime` holds the host API (:class:`~.runtime.FCsNHost`, the seed's Table 4.1); this module
holds what the runtime tests and ``bench_runtime`` both run on top of it:

* one ``runtime_node`` with the testbench playing the switch and the other nodes
  (:class:`Network`), the memory and the kernel (:class:`NodeTB`); the sessions
  ``runtime_sessions.arrival_to_issue`` (cycles from ``net_in`` to ``kernel_task``) and
  ``runtime_sessions.line_rate`` (packets per cycle through each path), run by
  :func:`measure_node`;
* a ``runtime_cluster`` job through the host API checked against the golden protocol
  (:func:`run_and_check`), and the session ``runtime_sessions.flood`` (every node floods every
  other node), run by :func:`measure_flood`.

:class:`RuntimeTB` (clock, reset and stream drivers with shared stall generators) is the base of
the runtime units' testbenches too.
"""

import logging

import cocotb
import numpy as np
import scipy.sparse as sp
from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from golden.runtime import kernels as gk
from golden.runtime import packet as gp
from golden.runtime.protocol import Cluster, serve
from golden.runtime.tables import HOST_COUNTERS, KERNEL_COUNTERS, MEMORY_COUNTERS
from golden.runtime.workload import sparse_dense_workload
from scripts.sim import knobs
from scripts.sim.devices.runtime import CreditLink, FCsNHost, prepare
from scripts.sim.runner import component_from_env, params_from_env, resolved_params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses
from scripts.sim.tb import ClockedTB

__all__ = ["RuntimeTB", "NODES", "NODE", "TASK_ID", "Network", "NodeTB", "node_job",
           "arrival_to_issue_session", "line_rate_session", "COUNTERS_CHECKED", "random_job", "golden_run",
           "run_and_check", "no_errors", "flood_bound", "flood_session", "SESSIONS", "measure_node",
           "measure_flood"]


class RuntimeTB(ClockedTB):
    """Clock, reset and a set of stream drivers with shared idle and backpressure generators."""

    def __init__(self, dut, *, sources=(), sinks=(), idle=False, backpressure=False, salt=0):
        super().__init__(dut)
        self.sources = {
            name: StreamSource(dut, name, self.clock,
                               pause=random_pauses(knobs.rng(salt + 100 + i), 0.4) if idle else never())
            for i, name in enumerate(sources)}
        self.sinks = {name: StreamSink(dut, name, self.clock,
                                       backpressure=random_pauses(knobs.rng(salt + 200 + i), 0.4)
                                       if backpressure else never())
                      for i, name in enumerate(sinks)}

    @property
    def drivers(self):
        return list(self.sources.values()) + list(self.sinks.values())


# ---- one node, the rest of the cluster played by the testbench ----

NODES = 4
NODE = 0
TASK_ID = 2


class Network(CreditLink):
    """The switch and nodes 1-3: sends flits into node 0 within its credits, takes what it sends."""

    credit_delay = (1, 8)  # cycles before the switch frees a buffer entry: random in [1, 8)

    def __init__(self, tb, rng, gaps):
        params = params_from_env()
        super().__init__(tb, "net_", rng, gaps, depth=params["queue_depth"], held_limit=params["tx_credits"])

    def clear(self):
        super().clear()
        self.received = []  # (cycle, vc, word)
        self.sent_cycles = {}  # word -> cycle it entered net_in
        self.on_receive = None

    def take(self, vc, word):
        self.received.append((self.tb.cycle, vc, word))
        if self.on_receive is not None:
            self.on_receive(vc, word)

    def pick(self):
        # Any channel with a credit may go: a channel waiting for credits blocks no other.
        return next((index for index, (vc, _) in enumerate(self.outbound) if self.may_send(vc)), None)

    def sent(self, word):
        self.sent_cycles.setdefault(word, self.tb.cycle)


class NodeTB(RuntimeTB):
    def __init__(self, dut, *, stalls, salt):
        super().__init__(dut, sources=["spawn_load"], sinks=[])
        self.stalls = stalls
        self.rng = knobs.rng(salt)
        self.kernel = StreamSink(
            dut,
            "kernel_task",
            self.clock,
            backpressure=random_pauses(knobs.rng(salt + 1), 0.3) if stalls else never(),
        )
        self.mem_cmd = StreamSink(
            dut,
            "mem_rd_cmd",
            self.clock,
            backpressure=random_pauses(knobs.rng(salt + 2), 0.3) if stalls else never(),
        )
        self.mem_data = StreamSource(
            dut,
            "mem_rd_data",
            self.clock,
            pause=random_pauses(knobs.rng(salt + 3), 0.3) if stalls else never(),
        )
        self.mem_wr = StreamSink(dut, "mem_wr", self.clock)
        self.network = Network(self, knobs.rng(salt + 4), stalls)
        self.host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control_"), dut.clk, dut.rst)
        for interface in (self.host.write_if, self.host.read_if):  # they log every access at INFO
            interface.log.setLevel(logging.WARNING)
        self.registers = {entry["name"]: entry["offset"] for entry in component_from_env().register_map()}
        self.spawn_bits = component_from_env().spawn_bits
        self.spawn_depth = resolved_params_from_env()["spawn_depth"]
        self.memory = {}
        self.issued = []  # (cycle, task word)
        self.written = []  # (line, value)
        self.pending_done = 0
        dut.kernel_done__valid.value = 0
        cocotb.start_soon(self._kernel_and_memory())

    async def _kernel_and_memory(self):
        while True:
            await RisingEdge(self.clock)
            done = 0
            while not self.kernel.empty():
                task = self.kernel.queue.popleft()
                self.issued.append((self.cycle, task))
                done += 1
            self.pending_done += done
            self.dut.kernel_done__valid.value = 0
            if self.pending_done:
                self.pending_done -= 1
                self.dut.kernel_done__valid.value = 1
                self.dut.kernel_done__payload.value = TASK_ID
            while not self.mem_cmd.empty():
                self.mem_data.send_nowait(self.memory.get(self.mem_cmd.queue.popleft(), 0))
            while not self.mem_wr.empty():
                write = self.mem_wr.queue.popleft()
                self.written.append((write & 0xFFFFFF, write >> 24))

    async def write(self, name, value):
        await self.host.write_dword(self.registers[name], int(value))

    async def read(self, name):
        return await self.host.read_dword(self.registers[name])

    async def configure(self, config):
        for name, value in (
            ("node", NODE),
            ("nodes", config.nodes),
            ("home_shift", config.home_shift),
            ("range_shift", config.range_shift),
            ("rows", config.rows),
            ("ranges", config.ranges),
        ):
            await self.write(name, value)


def node_job(rng, placement="spread"):
    """A 200-row integer sparse x dense job for a 4-node cluster (node 0 is the RTL)."""
    rows = 200
    adjacency = sp.random(
        rows, rows, density=0.03, random_state=np.random.RandomState(rng.integers(1 << 31)), format="coo"
    )
    adjacency.data = rng.integers(0, 1 << 32, adjacency.nnz, dtype=np.uint64).astype(np.float64)
    dense = rng.integers(0, 1 << 32, (rows, 4), dtype=np.uint64).astype(np.uint32)
    return sparse_dense_workload(
        adjacency, dense, nodes=NODES, home_shift=2, placement=placement, values="uint32"
    )


async def arrival_to_issue_session(dut, job):
    """Cycles from net_in to kernel_task: a task whose range is local, then one that must be fetched
    (``{"local", "remote"}``; ``job`` is unused)."""
    tb = NodeTB(dut, stalls=False, salt=320)
    workload = node_job(knobs.rng(321), placement="home")
    config = workload.config
    await tb.reset()
    await tb.configure(config)
    local_range = next(g for g in range(config.ranges) if config.range_owner(g) == NODE)
    remote_range = next(g for g in range(config.ranges) if config.range_owner(g) != NODE)
    row = next(r for r in range(config.rows) if config.home(r) == NODE)

    def on_receive(vc, word):
        if vc == gp.RDMA:
            for reply in serve(gp.decode(word), gp.decode(word).dst, config, workload.memory):
                tb.network.outbound.append((gp.DATA, reply))

    tb.network.on_receive = on_receive
    results = {}
    for name, index in (("local", local_range), ("remote", remote_range)):
        first, _ = config.range_lines(index)
        word = gp.encode(
            gp.Packet(
                gp.TASK,
                task_id=TASK_ID,
                dst=NODE,
                src=1,
                range=index,
                slots=(gp.Item(row, first, 1),) + (None,) * 3,
            )
        )
        count = len(tb.issued)
        tb.network.outbound.append((gp.TASK, word))
        for _ in range(1000):
            await RisingEdge(tb.clock)
            if len(tb.issued) > count:
                break
        assert len(tb.issued) > count, f"the {name} task was never issued"
        results[name] = tb.issued[-1][0] - tb.network.sent_cycles[word]
        await tb.cycles(20)
    dut._log.info("arrival to issue: %s", results)
    assert results["remote"] > results["local"] > 0
    return results


def _rate(cycles):
    """Packets per cycle over a run of transfers at the given cycles (first to last)."""
    return round((len(cycles) - 1) / max(1, cycles[-1] - cycles[0]), 3) if len(cycles) > 1 else 0.0


async def line_rate_session(dut, job):
    """Packets per cycle through each path with nothing else stalling (for docs/runtime.md, not a check
    of speed): network tasks to the kernel, spawned tasks to the kernel, spawned tasks to the network,
    RDMA requests to data replies, data replies to the memory. ``job`` is unused."""
    tb = NodeTB(dut, stalls=False, salt=340)
    tb.network.credit_delay = (1, 2)
    count = knobs.vectors(200)
    workload = node_job(knobs.rng(341), placement="home")
    config = workload.config
    await tb.reset()
    await tb.configure(config)
    mine = [g for g in range(config.ranges) if config.range_owner(g) == NODE]
    others = [g for g in range(config.ranges) if config.range_owner(g) != NODE]
    local_row = next(r for r in range(config.rows) if config.home(r) == NODE)
    remote_row = next(r for r in range(config.rows) if config.home(r) == 1)
    rates = {}

    def task(index, row, src):
        first, _ = config.range_lines(index)
        return gp.Packet(
            gp.TASK,
            task_id=TASK_ID,
            dst=NODE,
            src=src,
            range=index,
            slots=(gp.Item(row, first, 1),) + (None,) * 3,
        )

    async def wait_for(predicate, limit=20 * count + 500):
        for _ in range(limit):
            await RisingEdge(tb.clock)
            if predicate():
                return
        raise AssertionError("line-rate run did not finish")

    # Network tasks (wholly local, local range) to the kernel.
    tb.issued.clear()
    for _ in range(count):
        tb.network.outbound.append((gp.TASK, gp.encode(task(mine[0], local_row, 1))))
    await wait_for(lambda: len(tb.issued) >= count)
    rates["network task -> kernel"] = _rate([cycle for cycle, _ in tb.issued])

    # Spawned tasks to the kernel, then spawned tasks split off to the network: one run of the
    # whole Spawn_MEM at most (a larger NEARTRAIN_VECTORS would address entries it does not have).
    spawned = min(count, tb.spawn_depth)
    for name, row in (("spawned task -> kernel", local_row), ("spawned task -> network", remote_row)):
        for address in range(spawned):
            entry = gp.encode(task(mine[0], row, NODE), sealed=False)
            tb.sources["spawn_load"].send_nowait(address | entry << tb.spawn_bits)
        await tb.sources["spawn_load"].wait_idle()
        tb.issued.clear()
        tb.network.received.clear()
        await tb.write("task_id", TASK_ID)
        await tb.write("spawn_first", 0)
        await tb.write("spawn_count", spawned)
        await tb.write("CTRL", 1)
        if row == local_row:
            await wait_for(lambda: len(tb.issued) >= spawned)
            rates[name] = _rate([cycle for cycle, _ in tb.issued])
        else:
            await wait_for(lambda: len(tb.network.received) >= spawned)
            rates[name] = _rate([cycle for cycle, vc, _ in tb.network.received if vc == gp.TASK])
        await tb.cycles(20)

    # RDMA requests of one line each to data replies.
    tb.network.received.clear()
    for index in range(count):
        first, lines = config.range_lines(mine[index % len(mine)])
        line = first + index % lines
        tb.network.outbound.append(
            (
                gp.RDMA,
                gp.encode(
                    gp.Packet(
                        gp.RDMA,
                        task_id=TASK_ID,
                        dst=NODE,
                        src=1,
                        range=mine[index % len(mine)],
                        first=line,
                        lines=1,
                    )
                ),
            )
        )
    await wait_for(lambda: len(tb.network.received) >= count)
    rates["RDMA request -> data reply"] = _rate(
        [cycle for cycle, vc, _ in tb.network.received if vc == gp.DATA]
    )

    # Data replies to the memory: the node fetches remote ranges; the testbench answers at once.
    def on_receive(vc, word):
        if vc == gp.RDMA:
            replies = serve(gp.decode(word), gp.decode(word).dst, config, workload.memory)
            tb.network.outbound.extend((gp.DATA, reply) for reply in replies)

    tb.network.on_receive = on_receive
    tb.issued.clear()
    tb.written.clear()
    write_cycles = []
    wanted = sum(config.range_lines(index)[1] for index in others)
    for index in others:
        tb.network.outbound.append((gp.TASK, gp.encode(task(index, local_row, 1))))

    async def watch():
        while True:
            await RisingEdge(tb.clock)
            if int(dut.mem_wr__valid.value):  # mem_wr is always ready
                write_cycles.append(tb.cycle)

    watcher = cocotb.start_soon(watch())
    await wait_for(lambda: len(tb.issued) >= len(others))
    watcher.cancel()
    assert len(write_cycles) == wanted
    rates["data reply -> memory"] = _rate(write_cycles)
    dut._log.info("line rate (packets per cycle): %s", rates)
    return rates


# ---- the cluster through the host API, checked against the golden protocol ----

COUNTERS_CHECKED = (
    "rx_task",
    "rx_rdma",
    "rx_data",
    "tx_task",
    "tx_rdma",
    "tx_data",
    "spawned",
    "issued",
    "completed",
    "served",
)


def random_job(rng, params, *, density, placement, integer=False, home_shift=2, replicated=False):
    """``(adjacency, dense, workload)``: a random sparse x dense job for a ``runtime_cluster`` of
    ``params`` (with B in every node when ``replicated``)."""
    nodes, rows, features = params["nodes"], params["lines"], params["features"]
    adjacency = sp.random(
        rows, rows, density=density, random_state=np.random.RandomState(rng.integers(1 << 31)), format="coo"
    )
    if integer:
        adjacency.data = rng.integers(0, 1 << 32, adjacency.nnz, dtype=np.uint64).astype(np.float64)
        dense = rng.integers(0, 1 << 32, (rows, features), dtype=np.uint64).astype(np.uint32)
        values = "uint32"
    else:
        adjacency.data = rng.standard_normal(adjacency.nnz)
        dense = rng.standard_normal((rows, features)).astype(np.float32)
        values = "float32"
    workload = sparse_dense_workload(
        adjacency,
        dense,
        nodes=nodes,
        block=params["block"],
        home_shift=home_shift,
        placement=placement,
        values=values,
        replicated=replicated,
    )
    return adjacency, dense, workload


def golden_run(workload, kernels):
    """Per kernel: the golden protocol result; and the final per-row outputs gathered from their homes."""
    config = workload.config
    model = Cluster(config, workload.memory)
    results, out = [], None
    for task_id in kernels:
        result = model.run(workload.spawn, task_id)
        results.append(result)
        out = gk.execute(
            result.issued, workload.memory, rows=config.rows, features=workload.features, out=out
        )
    gathered = np.array([out[config.home(row)][row] for row in range(config.rows)], dtype=np.uint32)
    return results, gathered


async def run_and_check(dut, workload, kernels, *, timeout_cycles):
    """The Table 4.1 sequence on the cluster, checked against the golden; returns the on-chip cycles
    (start to all done) per kernel, which must be plausible (:meth:`RunCycles.problems`)."""
    params = params_from_env()
    host = FCsNHost(dut, params["nodes"])
    overlay, handler = await prepare(host, params["nodes"], workload)
    results, expected = golden_run(workload, kernels)
    cycles = []
    for run, task_id in enumerate(kernels):
        start = host.cycle
        await host.Kernel_Start(overlay, task_id)
        status = await host.wait_kernel(overlay, timeout_cycles=timeout_cycles)
        timing = await host.read_cycles()
        problems = timing.problems(status.cycle - start)
        assert not problems, f"kernel {task_id}: {problems}; {knobs.describe()}"
        cycles.append(timing.cycles)
        for node in range(overlay.nodes):
            got = {name: status.counters[node][name] for name in COUNTERS_CHECKED}
            # The counters accumulate over the runs since reset.
            want = {
                name: sum(result.counters[node][name] for result in results[: run + 1])
                for name in COUNTERS_CHECKED
            }
            assert got == want, f"kernel {task_id} node {node}: {got} != golden {want}; {knobs.describe()}"
            drops = {
                name: value
                for name, value in status.counters[node].items()
                if (name.startswith("drop_") or name == "overflow") and value
            }
            assert not drops, f"node {node} dropped packets: {drops}"
    out = await host.Sync_to_Host(overlay, handler)
    mismatches = np.flatnonzero((out != expected).any(axis=1))
    assert not mismatches.size, (
        f"rows {mismatches[:8].tolist()} differ from the golden: "
        f"{out[mismatches[0]]} != {expected[mismatches[0]]}; {knobs.describe()}"
    )
    assert host.host_errors() == no_errors(params["nodes"]), knobs.describe()
    await host.System_Finalize(overlay)
    return cycles, out


def no_errors(nodes):
    """The host-port, kernel and memory error counters of a clean run on ``nodes`` nodes."""
    return {**dict.fromkeys(HOST_COUNTERS, 0), **{f"kernel_{name}": [0] * nodes for name in KERNEL_COUNTERS},
            **{f"memory_{name}": [0] * nodes for name in MEMORY_COUNTERS}}


def flood_bound(workload, result, params):
    """A cycle bound for the flood: everything done one after the other, nothing overlapped.

    Every kernel item (3 cycles each for kernel 2, plus the task's 2), every packet on the
    network (4 cycles: send, switch, receive, classify) and every data line (2 more: read,
    write), plus 4,000 cycles of host polling and start-up.
    """
    items = sum(len([s for s in task.slots if s is not None]) for tasks in result.issued for task in tasks)
    tasks = sum(len(tasks) for tasks in result.issued)
    packets = sum(c["tx_task"] + c["tx_rdma"] + c["tx_data"] for c in result.counters)
    lines = sum(c["tx_data"] for c in result.counters)
    return 3 * items + 2 * tasks + 4 * packets + 2 * lines + 4000


async def flood_session(dut, job):
    """Every node floods every other node with tasks whose data is on a third node, with 2-entry queues:
    checked as :func:`run_and_check` does, within :func:`flood_bound`; returns the packets and cycles
    (``job`` is unused)."""
    params = params_from_env()
    rng = knobs.rng(220)
    adjacency, dense, workload = random_job(rng, params, density=0.05, placement="spread", integer=True)
    result = Cluster(workload.config, workload.memory).run(workload.spawn, gk.SPMM)
    # The flood is a flood only if the tasks travel: with "spread" placement every spawned task
    # is sent at least once (split tasks are sent again), so the network carries at least as
    # many task packets as were spawned.
    remote = sum(c["tx_task"] for c in result.counters)
    assert remote >= workload.packets or params["nodes"] == 1, (remote, workload.packets)
    bound = flood_bound(workload, result, params)
    cycles, _ = await run_and_check(dut, workload, [gk.SPMM], timeout_cycles=bound)
    dut._log.info("deadlock flood: %d packets, %d cycles (bound %d)", workload.packets, cycles[0], bound)
    assert cycles[0] <= bound
    network = sum(c["tx_task"] + c["tx_rdma"] + c["tx_data"] for c in result.counters)
    return {"nodes": params["nodes"], "spawned": workload.packets, "network_packets": network,
            "rdma_requests": sum(c["tx_rdma"] for c in result.counters), "cycles": cycles[0], "bound": bound}


SESSIONS = {"arrival_to_issue": arrival_to_issue_session, "line_rate": line_rate_session,
            "flood": flood_session}


def measure_node(session, params):
    """Session ``session`` (``"arrival_to_issue"`` or ``"line_rate"``) on a ``runtime_node`` of ``params``."""
    from scripts.sim.devices import run_session

    return run_session("runtime_node", f"runtime_sessions.{session}", None, params=params)


def measure_flood(params):
    """:func:`flood_session` on a ``runtime_cluster`` of ``params``: its packets and cycles."""
    from scripts.sim.devices import run_session

    return run_session("runtime_cluster", "runtime_sessions.flood", None, params=params)
