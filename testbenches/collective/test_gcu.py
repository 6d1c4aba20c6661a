"""The global control unit on a switch: leaves all-reduce their gradients through it, bit-exact.

The testbench plays the leaves on the ports of ``gcu_cluster`` (the GCU sits on the last port).
Each leaf, per iteration, sends its gradient lines of every partition (a window of ``slots``
partitions open: it opens partition ``p`` once it holds the sums of ``p - slots``), asks for each
partition's sums, then sends a barrier and waits for its acknowledgement. Every leaf must receive
every partition's sums equal to :func:`golden.collective.reduce_leaf_order` of all leaves'
lines, in chunk order. Leaves have random gaps and return their receive credits slowly.

With ``update="adam"`` the host loads random parameters and moments first and sets each step's
scalars, and what every leaf fetches must be the new parameters of
:func:`golden.collective.delayed_update_step`: one step of delayed-update training in the GCU.
"""


import itertools

import cocotb
import pytest
from cocotb.triggers import ClockCycles, RisingEdge

from golden.runtime import packet as gp
from scripts.sim import knobs
from scripts.sim.devices.collective import gcu_traffic_session
from scripts.sim.runner import run_cocotb
from testbenches.collective.tb import (
    TB,
    ZERO_COUNTERS,
    gradient_line,
    parametrize_shapes,
    rejects_at_elaboration,
)


@cocotb.test()
async def leaves_all_reduce_through_the_gcu(dut):
    tb = TB(dut, salt=1)
    await tb.reset()
    await tb.run(knobs.rng(5), knobs.vectors(3, limit=30))  # whole all-reduce iterations
    assert tb.counters() == dict.fromkeys(ZERO_COUNTERS, 0), knobs.describe()
    if tb.adam:
        assert int(dut.update_nonfinite.value) == int(tb.nonfinite), knobs.describe()


@cocotb.test()
async def bad_packets_are_counted_and_dropped(dut):
    """A corrupt packet, fetches out of range, twice, or for sums already replaced: counted, and the
    all-reduce goes on."""
    tb = TB(dut, salt=2)
    await tb.reset()
    rng = knobs.rng(6)
    await tb.run(rng, 1)
    leaf = tb.leaves[0]
    leaf.send(gp.Packet(gp.DATA, dst=tb.gcu, src=0, range=0, line=0, data=1), broken=True)
    leaf.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=0, range=tb.partitions + 1, first=1))
    if tb.params["leaves"] < tb.gcu:
        leaf.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=tb.params["leaves"], range=0, first=1))
    leaf.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=0, range=0, first=0))  # version 1 replaced version 0
    leaf.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=0, range=1, first=9))  # waits: never reduced 9 times
    # ... so a fetch of a partition in the same slot is a duplicate
    leaf.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=0, range=1 + tb.slots, first=9))
    await ClockCycles(tb.clock, 200)
    expected = dict.fromkeys(ZERO_COUNTERS, 0)
    expected.update(malformed=1, bad_requests=1 + int(tb.params["leaves"] < tb.gcu), stale_requests=1,
                    duplicate_requests=1)
    assert tb.counters() == expected, knobs.describe()


@cocotb.test()
async def late_duplicate_gradient_is_dropped(dut):
    """A gradient line of iteration 0 sent again after its partition was reduced: recognised by its
    tag, dropped and counted (``late_gradients``); it must not open the partition again, so the
    next iteration reduces every partition bit-exact with nothing else counted."""
    tb = TB(dut, salt=9)
    await tb.reset()
    packet = gp.Packet(gp.DATA, dst=tb.gcu, src=0, range=0, line=gradient_line(0, 1), data=1)
    await tb.late_duplicate(knobs.rng(9), tb.leaves[0], packet, "late_gradients")


@cocotb.test()
async def reset_mid_iteration(dut):
    tb = TB(dut, salt=3)
    await tb.reset()
    await tb.clean_after_reset(knobs.rng(7), (20, 200))


async def _fetch(tb, leaf, partition):
    """``leaf`` fetches ``partition`` at version 1; the cycles until its last line, and its lines."""
    start, seen, lines = tb.cycle, len(leaf.port.received), {}
    leaf.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=leaf.node, range=partition, first=1))
    while len(lines) < tb.chunks:
        leaf.port.arrived.clear()
        await leaf.port.arrived.wait()
        for _, word in leaf.port.received[seen:]:
            packet = gp.decode(word)
            if packet.ptype == gp.DATA and packet.range == partition:
                lines[packet.line] = packet.data
        seen = len(leaf.port.received)
    return tb.cycle - start, lines


@cocotb.test()
async def a_leaf_that_keeps_fetching_starves_no_other(dut):
    """Fair fetch service: leaf 0 asks for its partitions again and again (a fetch is queued at its
    port at every cycle), and the last leaf's fetch of each partition is still answered, in at
    most its latency on an idle GCU plus one service (``chunks`` lines and the grant's cycle) of
    every request entry (``leaves * slots``): round robin. Served lowest leaf first, it starved."""
    tb = TB(dut, gaps=False, slow=False, salt=4)
    await tb.reset()
    await tb.run(knobs.rng(8), 1)  # every partition reduced (or updated) once: version 1
    flooder, last = tb.leaves[0], tb.leaves[-1]
    idle, _ = await _fetch(tb, last, 0)
    bound = idle + tb.params["leaves"] * tb.slots * (tb.chunks + 1)

    async def flood():
        for k in itertools.count():
            flooder.send(gp.Packet(gp.RDMA, dst=tb.gcu, src=flooder.node, range=k % tb.slots, first=1))
            while len(flooder.port.outbound) > 1:
                await RisingEdge(tb.clock)

    flooding = cocotb.start_soon(flood())
    await ClockCycles(tb.clock, 50)
    before = len(flooder.port.received)
    waits = []
    for partition in range(tb.partitions):
        cycles, lines = await tb.bounded(_fetch(tb, last, partition), cycles=20 * bound,
                                         what=f"the last leaf's fetch of {partition} (starved)")
        waits.append(cycles)
        assert lines == last.sums[1, partition], knobs.describe()
    flooding.cancel()
    served = len(flooder.port.received) - before
    assert served >= len(waits) * tb.chunks, f"no flood: leaf 0 got {served} lines"  # it was contended
    dut._log.info(f"fetch waits under flood {waits}, bound {bound} (idle {idle}); leaf 0 got {served} lines")
    assert max(waits) <= bound, f"waits {waits}, bound {bound} (idle {idle}); {knobs.describe()}"


@cocotb.test()
async def traffic_of_one_all_reduce(dut):
    """The packets of one all-reduce, counted at the leaves' ports, against the seed's formula
    (:func:`scripts.sim.devices.collective.gcu_traffic_session`, which the bench runs too)."""
    await gcu_traffic_session(dut, None)


SHAPES = {
    # Two leaves on a 4-port switch: the seed's smallest cluster, and port 2, no leaf, sends a fetch
    # that must count as a bad request (a leaf id out of range). Three leaves run in 3_leaves_adam.
    "2_leaves": {"leaves": 2},
    "7_leaves_one_chunk": {"nodes": 8, "leaves": 7, "chunks": 1, "partitions": 6, "slots": 4},
    "15_leaves": {"nodes": 16, "leaves": 15, "chunks": 2, "partitions": 4, "slots": 2},
    "3_leaves_adam": {"update": "adam", "partitions": 4, "chunks": 2},
}


# The 15-leaf network takes minutes to build and run, and the 7-leaf one (its own 8-port build) most of
# one: make test-full only. The fast suite keeps 2 leaves (a port with no leaf) and 3 leaves with Adam.
SLOW_SHAPES = {"15_leaves", "7_leaves_one_chunk"}


# On the worker of test_demo_allreduce, which simulates the 3_leaves_adam build too (make test's
# --dist loadgroup): two workers on one build folder wait for each other.
@pytest.mark.xdist_group("gcu_3_leaves_adam")
@parametrize_shapes(SHAPES, SLOW_SHAPES)
def test_gcu(shape):
    run_cocotb("gcu_cluster", __name__, params=SHAPES[shape])


@pytest.mark.parametrize("params,message", [
    ({"leaves": 4, "node": 3}, "node must be in 4..15"),
    ({"slots": 3}, "slots must be one of"),
    ({"partitions": 65}, "partitions must be in 1..64"),
    ({"mode": "fastest"}, "mode must be one of"),
    ({"update": "sgd"}, "update must be one of"),
    ({"update_lanes": 4}, "update_lanes must be one of"),
])
def test_gcu_rejects_bad_parameters_at_elaboration(params, message):
    rejects_at_elaboration("gcu", params, message)
