"""Two switch levels: leaves all-reduce through regional control units and the GCU, bit-exact.

The testbench plays the leaves on the ports of ``tiered_cluster``: leaf ``i`` is node
``i mod region_leaves`` of region ``i // region_leaves``, and talks to its region's
:class:`~rtl.collective.region_unit.RegionalControlUnit` exactly as a leaf of ``gcu_cluster`` talks
to the GCU (the same :class:`testbenches.collective.tb.Leaf`: gradients, fetches, barrier, random
gaps and slow credits). Every leaf must fetch every partition's sums equal to
:func:`golden.collective.reduce_hierarchical`: each region's leaves in leaf order, then the regions
in region order.
"""


import cocotb
import pytest
from cocotb.triggers import ClockCycles, RisingEdge

from golden.collective import FetchRetry
from golden.collective.control import DAMAGED_BIT, REGION_COUNTERS
from golden.runtime import packet as gp
from scripts.sim import knobs
from scripts.sim.devices.collective import TieredTB as DeviceTieredTB
from scripts.sim.devices.collective import tiered_traffic_session
from scripts.sim.runner import run_cocotb
from testbenches.collective.tb import (
    VC,
    ZERO_COUNTERS,
    AllReduceChecks,
    gradient_line,
    parametrize_shapes,
    rejects_at_elaboration,
)
from testbenches.net.tb import SwitchPort

# What a regional unit counts on its side of the GCU, that a clean all-reduce leaves at zero.
REGION_ZERO = (*ZERO_COUNTERS, "lost_fetches", "bad_replies", "unexpected_replies", "up_requests",
               "unexpected_acks")
REGION_PORTS = (*REGION_COUNTERS, "overflow")


class TieredTB(AllReduceChecks, DeviceTieredTB):
    """:class:`~scripts.sim.devices.collective.TieredTB` with the counters and the injector the tests read."""

    def all_counters(self):
        """Every counter that a clean all-reduce leaves at zero: the GCU's, then ``r<k>_``."""
        names = [*ZERO_COUNTERS, *(f"r{region}_{name}" for region in range(self.params["regions"])
                                   for name in REGION_PORTS if name in REGION_ZERO)]
        return self.counters(names)

    def region_sum(self, name):
        """Counter ``name`` summed over the regional units."""
        return sum(int(getattr(self.dut, f"r{region}_{name}").value)
                   for region in range(self.params["regions"]))

    def injector(self):
        """The root switch's spare port (``p<leaves>``): it sends what the GCU never would."""
        return SwitchPort(self, len(self.leaves), knobs.rng(99), False, False,
                          depth=self.params["switch_depth"], rx_credits=self.params["queue_depth"])


@cocotb.test()
async def leaves_all_reduce_through_two_levels(dut):
    tb = TieredTB(dut, salt=11)
    await tb.reset()
    await tb.run(knobs.rng(15), knobs.vectors(2, limit=20))  # whole two-level all-reduce iterations
    counters = tb.all_counters()
    assert counters == dict.fromkeys(counters, 0), knobs.describe()


@cocotb.test()
async def bad_packets_at_a_region_are_counted_and_dropped(dut):
    """What the GCU counts, a regional unit counts too; the GCU and the other regions see none of it."""
    tb = TieredTB(dut, salt=12)
    await tb.reset()
    await tb.run(knobs.rng(16), 1)
    leaf = tb.leaves[0]
    unit, spare = leaf.dst, tb.params["region_leaves"]  # a node id no leaf of the region has
    leaf.send(gp.Packet(gp.DATA, dst=unit, src=0, range=0, line=0, data=1), broken=True)
    leaf.send(gp.Packet(gp.DATA, dst=unit, src=0, range=tb.partitions, line=0, data=1))
    leaf.send(gp.Packet(gp.RDMA, dst=unit, src=0, range=tb.partitions + 1, first=1))
    leaf.send(gp.Packet(gp.RDMA, dst=unit, src=0, range=0, first=0))  # version 1 replaced version 0
    leaf.send(gp.Packet(gp.RDMA, dst=unit, src=0, range=1, first=9))  # waits: never reduced 9 times
    leaf.send(gp.Packet(gp.RDMA, dst=unit, src=0, range=1 + tb.slots, first=9))  # same slot: duplicate
    leaf.send(gp.Packet(gp.TASK, dst=unit, src=0, mask=1))  # held: the region's other leaves are not there
    leaf.send(gp.Packet(gp.TASK, dst=unit, src=0, mask=1))
    bad_ids = int(spare < unit)
    if bad_ids:
        leaf.send(gp.Packet(gp.RDMA, dst=unit, src=spare, range=0, first=1))
        leaf.send(gp.Packet(gp.TASK, dst=unit, src=spare, mask=1))
    await ClockCycles(tb.clock, 300)
    expected = dict.fromkeys(tb.all_counters(), 0)
    expected.update({"r0_malformed": 1, "r0_reduction_bad_partition": 1, "r0_bad_requests": 1 + bad_ids,
                     "r0_stale_requests": 1, "r0_duplicate_requests": 1, "r0_barrier_duplicates": 1,
                     "r0_barrier_bad_leaf": bad_ids})
    assert tb.all_counters() == expected, knobs.describe()
    assert not leaf.acks[1:], f"a region released a barrier its other leaves never reached: {leaf.acks}"


async def damage_replies(tb, region, picks, golden):
    """Damage the data packets the root switch delivers to ``region``'s unit whose index (counted
    from 0) is in ``picks``, and play each delivery to the golden :class:`FetchRetry` of its fetch
    (``golden``: partition -> the fetches in order): a damaged line is no event, and a damaged last
    line is followed by the silence that makes the unit ask again."""
    unit = getattr(tb.dut.block, f"region{region}_unit")
    count = 0
    while True:
        armed = count in picks
        tb.damage = tb.damage & ~(1 << region) | int(armed) << region
        tb.dut.damage.value = tb.damage
        await RisingEdge(tb.clock)
        if not int(unit.up_in__valid.value):
            continue
        word = int(unit.up_in__payload.value)
        if word >> gp.PACKET_BITS != VC[gp.DATA]:
            continue
        count += 1
        packet = gp.decode((word ^ (armed << DAMAGED_BIT)) & ((1 << gp.PACKET_BITS) - 1))
        fetches = golden.setdefault(packet.range, [])
        if not fetches or not fetches[-1].open:
            fetches.append(FetchRetry(partition=packet.range, chunks=tb.chunks, limit=15))
        if not armed:
            fetches[-1].line(packet.range, packet.line)
        elif packet.line == tb.chunks - 1:
            fetches[-1].silence()


@cocotb.test()
async def damaged_replies_are_asked_for_again(dut):
    """Reply lines from the GCU damaged on their way to a regional unit: a middle line (the last
    then comes after a gap) and last lines (then nothing comes). The unit asks again, counts each
    re-ask, and every leaf still fetches bit-exact sums; the re-asks are the golden model's, plus
    one per repeat the GCU saw (a re-ask while it still held the request early)."""
    tb = TieredTB(dut, salt=21)
    await tb.reset()
    tb.damage = 0
    golden = [{} for _ in range(tb.params["regions"])]
    picks = {0, 3, 5, 10}  # line 0 of the first reply, then last lines (chunks = 2)
    assert tb.chunks == 2
    watchers = [cocotb.start_soon(damage_replies(tb, region, picks, golden[region]))
                for region in range(tb.params["regions"])]
    await tb.run(knobs.rng(21), 2)
    for watcher in watchers:
        watcher.cancel()
    dut.damage.value = 0
    regions = tb.params["regions"]
    expected_retries = sum(f.counters["retries"] for region in golden for fs in region.values() for f in fs)
    assert tb.region_sum("malformed") == regions * len(picks), knobs.describe()
    repeats = tb.counters(["repeated_requests"])["repeated_requests"]
    assert expected_retries == regions * len(picks), (expected_retries, knobs.describe())
    assert tb.region_sum("retries") == expected_retries + repeats, (repeats, knobs.describe())
    counters = {k: v for k, v in tb.all_counters().items() if not k.endswith("malformed")}
    assert counters == dict.fromkeys(counters, 0), knobs.describe()


@cocotb.test()
async def unasked_replies_do_not_advance_a_version(dut):
    """From the GCU's side, what the GCU never sends: an intact last line of a partition no fetch
    asked for (it must neither advance the version nor answer a leaf's fetch of that version),
    replies out of range, a fetch request, and an acknowledgement while no barrier waits. Each is
    counted and dropped, and the next iteration is bit-exact."""
    tb = TieredTB(dut, salt=22)
    await tb.reset()
    rng = knobs.rng(22)
    await tb.run(rng, 1)
    injector = tb.injector()
    last = tb.chunks - 1
    for packet in (gp.Packet(gp.DATA, dst=0, src=tb.gcu, range=0, line=last, last=1, data=0xBAD),
                   gp.Packet(gp.DATA, dst=0, src=tb.gcu, range=tb.partitions, line=0, data=1),
                   gp.Packet(gp.DATA, dst=0, src=tb.gcu, range=0, line=tb.chunks, data=1),
                   gp.Packet(gp.RDMA, dst=0, src=tb.gcu, range=0, first=2),
                   gp.Packet(gp.TASK, dst=0, src=tb.gcu, mask=1)):
        injector.outbound.append((VC[packet.ptype], gp.encode(packet)))
    await ClockCycles(tb.clock, 100)
    leaf = tb.leaves[0]
    before = leaf.got[gp.DATA]
    leaf.send(gp.Packet(gp.RDMA, dst=leaf.dst, src=leaf.node, range=0, first=2))  # not reduced twice yet
    await ClockCycles(tb.clock, 300)
    leaf._sort()
    assert leaf.got[gp.DATA] == before, "a regional unit served a version it never fetched"
    expected = dict.fromkeys(tb.all_counters(), 0)
    expected.update({"r0_unexpected_replies": 1, "r0_bad_replies": 2, "r0_up_requests": 1,
                     "r0_unexpected_acks": 1})
    assert tb.all_counters() == expected, knobs.describe()
    await tb.run(rng, 1, first=1)
    assert tb.all_counters() == expected, knobs.describe()


@cocotb.test()
async def late_duplicate_gradient_is_dropped(dut):
    """A leaf's gradient line of iteration 0 sent again after the region reduced it: dropped and
    counted by its tag, and the next iteration is bit-exact."""
    tb = TieredTB(dut, salt=23)
    await tb.reset()
    leaf = tb.leaves[-1]
    packet = gp.Packet(gp.DATA, dst=leaf.dst, src=leaf.node, range=1, line=gradient_line(0, 1), data=1)
    await tb.late_duplicate(knobs.rng(23), leaf, packet, f"r{tb.params['regions'] - 1}_late_gradients")


@cocotb.test()
async def reset_mid_iteration(dut):
    tb = TieredTB(dut, salt=13)
    await tb.reset()
    await tb.clean_after_reset(knobs.rng(17), (50, 400))


@cocotb.test()
async def traffic_of_one_all_reduce(dut):
    """The packets of one all-reduce on two levels, against the seed's ``Z/P * 2(N + S)``
    (:func:`scripts.sim.devices.collective.tiered_traffic_session`, which the bench runs too)."""
    await tiered_traffic_session(dut, None)


SHAPES = {
    "4_leaves_2_regions": {"regions": 2, "region_leaves": 2, "partitions": 4, "chunks": 2},
    "8_leaves_2x4": {"regions": 2, "region_leaves": 4, "partitions": 4, "chunks": 2},
    "16_leaves_2x8": {"regions": 2, "region_leaves": 8, "partitions": 4, "chunks": 2},
    "16_leaves_4x4": {"regions": 4, "region_leaves": 4, "partitions": 4, "chunks": 2, "slots": 1},
}
# Every shape is a build of minutes with every signal public (the 4-leaf one was the fast suite's
# longest test, 294 s of a CI core, when CI ran over its 45 minutes; the 8-leaf one was 361 s):
# make test-full only. Its parts that the GCU shares keep fast tests of their own (test_gcu,
# test_reduction_unit, test_barrier_table); the regional unit's retries are tested here only.
SLOW_SHAPES = set(SHAPES)


@parametrize_shapes(SHAPES, SLOW_SHAPES)
def test_tiered(shape):
    # Two tests read the region units' and the GCU's own counters (dut.block.*).
    run_cocotb("tiered_cluster", __name__, params=SHAPES[shape], internals=True)


@pytest.mark.parametrize("block,params,message", [
    ("tiered_cluster", {"regions": 1}, "regions must be in 2..15"),
    ("tiered_cluster", {"region_leaves": 16}, "region_leaves must be in 2..15"),
    ("tiered_cluster", {"slots": 3}, "slots must be one of"),
    ("region_unit", {"leaves": 4, "node": 3}, "node must be in 4..15"),
    ("region_unit", {"region": 3, "gcu": 3}, "gcu must be in 4..15"),
    ("region_unit", {"mode": "fastest"}, "mode must be one of"),
    ("region_unit", {"retry_cycles": 8}, "retry_cycles must be in 16..65536"),
    ("region_unit", {"retry_limit": 0}, "retry_limit must be in 1..255"),
])
def test_two_level_blocks_reject_bad_parameters_at_elaboration(block, params, message):
    rejects_at_elaboration(block, params, message)
