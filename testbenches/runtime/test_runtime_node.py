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


import cocotb

from golden.runtime import packet as gp
from golden.runtime.protocol import Cluster, detect_request, respond, serve, spawn, split
from golden.runtime.tables import NODE_STATUS_COUNTERS as COUNTERS
from scripts.sim import knobs
from scripts.sim.devices.runtime_sessions import (
    NODE,
    NODES,
    TASK_ID,
    NodeTB,
    arrival_to_issue_session,
    line_rate_session,
)
from scripts.sim.devices.runtime_sessions import (
    node_job as job,
)
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.runtime.tb import corrupt


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
    """Cycles from net_in to kernel_task, a local task before a fetched one (the bench's session)."""
    await arrival_to_issue_session(dut, None)


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


@cocotb.test()
async def line_rate(dut):
    """Packets per cycle through each path with nothing stalling (the bench's session): every path
    finishes, and every fetched line reaches the memory."""
    await line_rate_session(dut, None)


def test_runtime_node():
    run_cocotb(
        "runtime_node",
        __name__,
        params=NODE_PARAMS,
        testcase=["node_in_a_cluster", "arrival_to_issue", "reset_mid_packet", "line_rate"],
    )


NODE_PARAMS = {"spawn_depth": 256, "queue_depth": 4, "tx_credits": 3}
