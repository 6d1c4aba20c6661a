"""The sliced all-reduce: a GCU slice per leaf on the switch, partition p reduced at slice p mod N.

The testbench plays the leaves on the ports of ``sliced_gcu_cluster``
(:class:`scripts.sim.devices.collective.SlicedTB`): each leaf sends partition ``p``'s lines and
its fetch to slice ``p mod N`` (as that slice's partition ``p // N``), round after round with the
leaves staggered, keeps ``slots`` rounds open, fetches every partition's sums from the slice that
owns it, and passes slice 0's barrier. Every leaf must receive every partition's sums
bit-identical to :func:`golden.collective.reduce_leaf_order` of all leaves' lines (the
deterministic mode: leaf-id order whatever the arrival order). Leaves permute each partition's
lines, idle on 30 % of the cycles and return their receive credits slowly (up to 30 cycles:
backpressure on the slices' replies), so the arrival orders at the slices differ from run to run
and from slice to slice.
"""

import cocotb
import pytest
from cocotb.triggers import ClockCycles

from golden.runtime import packet as gp
from scripts.sim import knobs
from scripts.sim.devices.collective import SlicedTB, sliced_traffic_session
from scripts.sim.runner import run_cocotb
from testbenches.collective.tb import (
    ZERO_COUNTERS,
    AllReduceChecks,
    gradient_line,
    parametrize_shapes,
    rejects_at_elaboration,
)


class TB(AllReduceChecks, SlicedTB):
    """The sliced testbench with the checks the GCU tests share."""


@cocotb.test()
async def leaves_all_reduce_through_the_slices(dut):
    """Whole all-reduce iterations with random gaps, orders and slow credits: bit-exact, nothing
    counted."""
    tb = TB(dut, salt=1)
    await tb.reset()
    await tb.run(knobs.rng(5), knobs.vectors(3, limit=30))
    assert tb.counters() == dict.fromkeys(ZERO_COUNTERS, 0), knobs.describe()
    assert int(dut.switch_dropped.value) == 0, knobs.describe()


@cocotb.test()
async def bad_packets_are_counted_and_dropped(dut):
    """A corrupt gradient line to one slice and a fetch out of range to another: each counted once
    in the summed counters, and the next all-reduce is exact."""
    tb = TB(dut, salt=2)
    await tb.reset()
    rng = knobs.rng(6)
    await tb.run(rng, 1)
    leaf, last = tb.leaves[0], tb.gcu + tb.params["leaves"] - 1
    leaf.send(gp.Packet(gp.DATA, dst=tb.gcu, src=0, range=0, line=0, data=1), broken=True)
    leaf.send(gp.Packet(gp.RDMA, dst=last, src=0, range=tb.params["partitions"], first=2))
    await ClockCycles(tb.clock, 200)
    expected = dict.fromkeys(ZERO_COUNTERS, 0)
    expected.update(malformed=1, bad_requests=1)
    assert tb.counters() == expected, knobs.describe()
    await tb.run(rng, 1, first=1)
    assert tb.counters() == expected, knobs.describe()


@cocotb.test()
async def late_duplicate_gradient_is_dropped(dut):
    """A gradient line of iteration 0 sent again to its slice after the partition was reduced:
    dropped by its tag and counted once; the next iteration is exact."""
    tb = TB(dut, salt=9)
    await tb.reset()
    slice_ = tb.gcu + 1  # global partition 1 is slice 1's partition 0
    packet = gp.Packet(gp.DATA, dst=slice_, src=0, range=0, line=gradient_line(0, 1), data=1)
    await tb.late_duplicate(knobs.rng(9), tb.leaves[0], packet, "late_gradients")


@cocotb.test()
async def traffic_of_one_all_reduce(dut):
    """Every leaf's link carries Z/P lines each way (:func:`sliced_traffic_session`, which the
    bench runs too), and the sums are exact."""
    measured = await sliced_traffic_session(dut, None)
    assert measured["data_packets"] == 2 * measured["leaves"] * measured["elements"] // 14, measured


SHAPES = {
    # Three leaves and three slices on an 8-port switch (two ports idle), 3 x 4 partitions of 2 lines.
    "3_leaves": {"nodes": 8, "leaves": 3, "partitions": 4, "chunks": 2, "slots": 2},
    # Seven leaves and seven slices on the 16-port switch, 7 x 4 partitions of 2 lines.
    "7_leaves": {"nodes": 16, "leaves": 7, "partitions": 4, "chunks": 2, "slots": 2},
}
# Every shape is a build of several minutes (3 leaves: about 4 at load 8, 7 leaves more), more than
# CI's fast suite can spare: make test-full runs both; the fast suite keeps the parameter checks.
SLOW_SHAPES = {"3_leaves", "7_leaves"}


@parametrize_shapes(SHAPES, SLOW_SHAPES)
def test_sliced_gcu_cluster(shape):
    run_cocotb("sliced_gcu_cluster", __name__, params=SHAPES[shape])


@pytest.mark.parametrize("params,message", [
    ({"nodes": 4, "leaves": 3}, "leaves must be in 2..2"),
    ({"nodes": 16, "leaves": 9}, "leaves must be in 2..8"),
    ({"partitions": 65}, "partitions must be in 1..64"),
    ({"mode": "fastest"}, "mode must be one of"),
])
def test_sliced_gcu_cluster_rejects_bad_parameters_at_elaboration(params, message):
    rejects_at_elaboration("sliced_gcu_cluster", params, message)
