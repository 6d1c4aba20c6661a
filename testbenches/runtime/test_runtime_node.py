"""One runtime node, with the testbench playing the switch, the other nodes, the memory and the kernel.

The job is a 4-node sparse x dense workload; the RTL is node 0 and the testbench plays nodes 1-3
from the golden protocol: it injects the tasks they forward to node 0 and their RDMA requests for
node 0's ranges, answers node 0's RDMA requests with their data replies, and checks everything
node 0 sends (its forwarded tasks, its requests, its data replies) against
:mod:`golden.runtime.protocol`. The kernel is a sink with backpressure that reports each task done;
the memory answers line reads from node 0's lines and records the fetched lines it writes.
Bad packets are injected on every channel (a flipped bit, a wrong type, a wrong destination, an
unattached kernel id, a misrouted task, an out-of-range RDMA request, unsolicited data), and
the host reads every counter through AXI4-Lite at the end: each must equal the golden's.

``arrival_to_issue`` measures (without stalls) the cycles from a task's arrival on ``net_in`` to
its issue on ``kernel_task``, for a task whose range is local and one that needs an RDMA fetch;
it replies with them (:mod:`scripts.sim.channel`) for the bench to write into ``docs/runtime.md``.
"""

import logging

import cocotb
import numpy as np
import scipy.sparse as sp
from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from golden.runtime import packet as gp
from golden.runtime.protocol import Cluster, detect_request, respond, serve, spawn, split
from golden.runtime.tables import NODE_STATUS_COUNTERS as COUNTERS
from golden.runtime.workload import sparse_dense_workload
from scripts.sim import channel, knobs
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses
from scripts.sim.tb import Scoreboard
from testbenches.runtime.tb import RuntimeTB, corrupt

NODES = 4
NODE = 0
TASK_ID = 2


class Network:
    """The switch and nodes 1-3: sends flits into node 0 within its credits, takes what it sends."""

    def __init__(self, tb, rng, gaps):
        self.tb, self.dut, self.rng, self.gaps = tb, tb.dut, rng, gaps
        params = params_from_env()
        self.rx_depth, self.tx_credits = params["queue_depth"], params["tx_credits"]
        self.clear()
        self.dut.net_in__valid.value = 0
        self.dut.net_out__ready.value = 1
        self.dut.net_out_credit.value = 0
        cocotb.start_soon(self._run())

    credit_delay = (1, 8)  # cycles before the switch frees a buffer entry: random in [1, 8)

    def clear(self):
        self.credits = [self.rx_depth] * 3
        self.outbound = []  # (vc, word)
        self.in_flight = [0] * 3
        self.returns = []
        self.received = []  # (cycle, vc, word)
        self.sent_cycles = {}  # word -> cycle it entered net_in
        self.on_receive = None

    async def _run(self):
        dut = self.dut
        while True:
            await RisingEdge(self.tb.clock)
            credit = int(dut.net_in_credit.value)
            for vc in range(3):
                self.credits[vc] += credit >> vc & 1
            if int(dut.net_out__valid.value):
                word = int(dut.net_out__payload.value)
                vc, packet = word >> 512, word & ((1 << 512) - 1)
                self.in_flight[vc] += 1
                assert self.in_flight[vc] <= self.tx_credits, f"channel {vc} overran its credits"
                self.received.append((self.tb.cycle, vc, packet))
                self.returns.append((self.tb.cycle + int(self.rng.integers(*self.credit_delay)), vc))
                if self.on_receive is not None:
                    self.on_receive(vc, packet)
            pulses = 0
            for entry in [entry for entry in self.returns if entry[0] <= self.tb.cycle]:
                if not pulses >> entry[1] & 1:
                    pulses |= 1 << entry[1]
                    self.returns.remove(entry)
                    self.in_flight[entry[1]] -= 1
            dut.net_out_credit.value = pulses
            dut.net_in__valid.value = 0
            if self.outbound and not (self.gaps and self.rng.random() < 0.3):
                # Any channel with a credit may go: a channel waiting for credits blocks no other.
                for index, (vc, word) in enumerate(self.outbound):
                    if vc == 3 or self.credits[vc]:
                        self.outbound.pop(index)
                        if vc < 3:
                            self.credits[vc] -= 1
                        dut.net_in__payload.value = word | vc << 512
                        dut.net_in__valid.value = 1
                        self.sent_cycles.setdefault(word, self.tb.cycle)
                        break


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


def job(rng, placement="spread"):
    rows = 200
    adjacency = sp.random(
        rows, rows, density=0.03, random_state=np.random.RandomState(rng.integers(1 << 31)), format="coo"
    )
    adjacency.data = rng.integers(0, 1 << 32, adjacency.nnz, dtype=np.uint64).astype(np.float64)
    dense = rng.integers(0, 1 << 32, (rows, 4), dtype=np.uint64).astype(np.uint32)
    return sparse_dense_workload(
        adjacency, dense, nodes=NODES, home_shift=2, placement=placement, values="uint32"
    )


def bad_flits(rng, config):
    """One flit of each bad kind for node 0 (the golden decides what each one costs)."""
    mine = [g for g in range(config.ranges) if config.range_owner(g) == NODE]
    other_row = next(r for r in range(config.rows) if config.home(r) != NODE)
    first, _ = config.range_lines(mine[0])
    task = gp.Packet(
        gp.TASK,
        task_id=TASK_ID,
        dst=NODE,
        src=1,
        range=mine[0],
        slots=(gp.Item(other_row, first, 1),) + (None,) * 3,
    )
    return [
        (gp.TASK, corrupt(rng, gp.encode(task))),  # integrity
        (gp.RDMA, gp.encode(task)),  # type
        (gp.TASK, gp.encode(gp.Packet(gp.TASK, task_id=TASK_ID, dst=2, src=1, range=0, slots=task.slots))),
        (gp.TASK, gp.encode(gp.Packet(gp.TASK, task_id=0, dst=NODE, src=1, range=0, slots=task.slots))),
        (gp.TASK, gp.encode(task)),  # misrouted: its row is not node 0's
        (gp.RDMA, gp.encode(gp.Packet(gp.RDMA, dst=NODE, src=2, range=config.ranges, first=0, lines=1))),
        (gp.DATA, gp.encode(gp.Packet(gp.DATA, dst=NODE, src=3, range=mine[0], line=first, last=0))),
    ]


async def run_scenario(tb, workload):
    """Node 0 of ``workload`` from configuration to quiet, checked against the golden (module docstring)."""
    config = workload.config
    injected = bad_flits(knobs.rng(311), config)
    result = Cluster(config, workload.memory).run(workload.spawn, TASK_ID, injected={NODE: injected})
    tb.memory = dict(workload.node_lines(NODE))
    await tb.configure(config)
    for address, entry in enumerate(workload.spawn[NODE]):
        tb.sources["spawn_load"].send_nowait(address | entry << tb.spawn_bits)
    await tb.sources["spawn_load"].wait_idle()

    # What the other nodes send node 0, and what node 0 must send them.
    to_node, expected_tasks, expected_requests = [], Scoreboard("forwarded tasks"), []
    for source in range(NODES):
        for entry in workload.spawn[source]:
            packet = spawn(entry, source, config, TASK_ID)
            local, owners = respond(packet, source, config, from_network=False)
            for word in split(packet, source, config, local, owners)[1]:
                if source == NODE:
                    expected_tasks.expect(word)
                elif gp.decode(word).dst == NODE:
                    to_node.append((gp.TASK, word))
    for requester in range(1, NODES):
        for index in sorted(result.requests[requester]):
            if config.range_owner(index) == NODE:
                first, lines = config.range_lines(index)
                request = gp.Packet(
                    gp.RDMA, task_id=TASK_ID, dst=NODE, src=requester, range=index, first=first, lines=lines
                )
                to_node.append((gp.RDMA, gp.encode(request)))
    for index in sorted(result.requests[NODE]):
        expected_requests.append(
            detect_request(gp.Packet(gp.TASK, task_id=TASK_ID, range=index), NODE, config)
        )
    flits = to_node + injected
    for position in knobs.rng(312).permutation(len(flits)):
        tb.network.outbound.append(flits[position])
    # Node 0 serves the good requests in the order they arrive: their order on the RDMA channel.
    expected_data = []
    for vc, word in tb.network.outbound:
        if vc == gp.RDMA and gp.checksum(word) == 0 and gp.decode(word).ptype == gp.RDMA:
            served = serve(gp.decode(word), NODE, config, workload.memory)
            expected_data += [] if isinstance(served, str) else served

    requests, data = [], []

    def on_receive(vc, word):
        if vc == gp.TASK:
            expected_tasks.check(word)
        elif vc == gp.RDMA:
            requests.append(word)
            replies = serve(gp.decode(word), gp.decode(word).dst, config, workload.memory)
            tb.network.outbound.extend((gp.DATA, reply) for reply in replies)
        else:
            data.append(word)

    tb.network.on_receive = on_receive
    await tb.write("task_id", TASK_ID)
    await tb.write("spawn_first", 0)
    await tb.write("spawn_count", len(workload.spawn[NODE]))
    await tb.write("CTRL", 1)
    for _ in range(2000):
        await tb.cycles(100)
        if len(tb.issued) >= result.counters[NODE]["issued"] and not tb.network.outbound:
            if await tb.read("quiet"):
                break
    await tb.cycles(50)
    assert await tb.read("quiet") == 1, f"node 0 never went quiet; {knobs.describe()}"
    expected_tasks.check_complete()
    assert sorted(requests) == sorted(expected_requests), knobs.describe()
    assert data == expected_data, (
        f"data replies differ from the golden's (or their order); {knobs.describe()}"
    )
    issued = sorted(task for _, task in tb.issued)
    assert issued == sorted(gp.encode(task, sealed=False) for task in result.issued[NODE]), knobs.describe()
    for line, value in tb.written:
        assert workload.memory[line] == value, f"fetched line {line} corrupted"
    counters = {name: await tb.read(name) for name in COUNTERS}
    expected = {name: result.counters[NODE].get(name, 0) for name in COUNTERS}
    assert counters == expected, f"counters {counters} != golden {expected}; {knobs.describe()}"
    assert all(
        expected[f"drop_{reason}"]
        for reason in ("check", "type", "node", "task_id", "misrouted", "rdma_range", "data_unsolicited")
    )


@cocotb.test()
@cocotb.parametrize(stalls=[False, True])
async def node_in_a_cluster(dut, stalls):
    """Node 0 of a 4-node job: spawning, forwarding, fetching, serving and bad input, against the golden."""
    tb = NodeTB(dut, stalls=stalls, salt=300 + int(stalls))
    await tb.reset()
    await run_scenario(tb, job(knobs.rng(310)))


@cocotb.test()
async def arrival_to_issue(dut):
    """Cycles from net_in to kernel_task: a task whose range is local, then one that must be fetched."""
    tb = NodeTB(dut, stalls=False, salt=320)
    workload = job(knobs.rng(321), placement="home")
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
    channel.reply(results)


@cocotb.test()
async def reset_mid_packet(dut):
    """Reset while the node spawns, forwards and fetches; then the full scenario again, exact."""
    tb = NodeTB(dut, stalls=True, salt=330)
    workload = job(knobs.rng(331))
    await tb.reset()
    await tb.configure(workload.config)
    for address, entry in enumerate(workload.spawn[NODE]):
        tb.sources["spawn_load"].send_nowait(address | entry << tb.spawn_bits)
    await tb.sources["spawn_load"].wait_idle()
    await tb.write("task_id", TASK_ID)
    await tb.write("spawn_first", 0)
    await tb.write("spawn_count", len(workload.spawn[NODE]))
    await tb.write("CTRL", 1)
    drivers = tb.drivers + [tb.network, tb.kernel, tb.mem_cmd, tb.mem_data, tb.mem_wr]
    await tb.reset_mid_transfer(tb.rng, after=(20, 200), drivers=drivers)
    tb.issued.clear()
    tb.written.clear()
    tb.pending_done = 0
    for name in COUNTERS:
        assert await tb.read(name) == 0, f"counter {name} survived the reset"
    assert await tb.read("quiet") == 1
    await run_scenario(tb, job(knobs.rng(332)))


def _rate(cycles):
    """Packets per cycle over a run of transfers at the given cycles (first to last)."""
    return round((len(cycles) - 1) / max(1, cycles[-1] - cycles[0]), 3) if len(cycles) > 1 else 0.0


@cocotb.test()
async def line_rate(dut):
    """Packets per cycle through each path with nothing else stalling (for docs/runtime.md, not a check
    of speed): network tasks to the kernel, spawned tasks to the kernel, spawned tasks to the network,
    RDMA requests to data replies, data replies to the memory."""
    tb = NodeTB(dut, stalls=False, salt=340)
    tb.network.credit_delay = (1, 2)
    count = knobs.vectors(200)
    workload = job(knobs.rng(341), placement="home")
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

    # Spawned tasks to the kernel, then spawned tasks split off to the network.
    for name, row in (("spawned task -> kernel", local_row), ("spawned task -> network", remote_row)):
        for address in range(count):
            entry = gp.encode(task(mine[0], row, NODE), sealed=False)
            tb.sources["spawn_load"].send_nowait(address | entry << tb.spawn_bits)
        await tb.sources["spawn_load"].wait_idle()
        tb.issued.clear()
        tb.network.received.clear()
        await tb.write("task_id", TASK_ID)
        await tb.write("spawn_first", 0)
        await tb.write("spawn_count", count)
        await tb.write("CTRL", 1)
        if row == local_row:
            await wait_for(lambda: len(tb.issued) >= count)
            rates[name] = _rate([cycle for cycle, _ in tb.issued])
        else:
            await wait_for(lambda: len(tb.network.received) >= count)
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
    channel.reply(rates)


def test_runtime_node():
    run_cocotb(
        "runtime_node",
        __name__,
        params=NODE_PARAMS,
        testcase=["node_in_a_cluster", "arrival_to_issue", "reset_mid_packet", "line_rate"],
    )


NODE_PARAMS = {"spawn_depth": 256, "queue_depth": 4, "tx_credits": 3}
