"""aggregation_pipeline: cocotb tests (collected by cocotb) and their pytest runners (at the bottom).

Every job loads B, streams packets and drains OUT; the drained bits and the counters must
equal :func:`golden.aggregate.execute` on the same packets (and, for spawner streams, the
stall count its cycle model predicts: none).
"""


import cocotb
import numpy as np
import pytest
from cocotb.triggers import with_timeout

from golden.aggregate import Packets, gcn_normalise, seed_rule, with_self_loops
from scripts.sim import knobs
from scripts.sim.devices.aggregate import AggregationTB as TB
from scripts.sim.devices.aggregate import special_features
from scripts.sim.runner import run_cocotb
from testbenches.aggregate.tb import small_graph

MODULE = "testbenches.aggregate.test_aggregation_pipeline"
DEFAULT_EDGES_PER_NODE = 2
NS_PER_CYCLE = 10


def _nodes(tb):
    """Graph size for a build: as many nodes as both memories hold, a multiple of the lanes."""
    return min(tb.capacity_rows, tb.capacity_cols) // tb.lanes * tb.lanes


def _operator(tb, adjacency):
    return gcn_normalise(adjacency) if tb.weighted else with_self_loops(adjacency)


def _pattern_packets(tb, rng, rows, cols=None):
    """Packets from an ``(n, lanes)`` row array (-1: empty slot); random columns and values."""
    rows = np.asarray(rows)
    n_cols = _nodes(tb)
    cols = rng.integers(0, n_cols, rows.shape) if cols is None else cols
    values = rng.standard_normal(rows.shape).astype(np.float32)
    return Packets.from_slots(np.maximum(rows, 0), cols, values, rows >= 0, weighted=tb.weighted)


async def _timed(tb, coroutine, cycles):
    return await with_timeout(coroutine, cycles * NS_PER_CYCLE, "ns")


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def graph_jobs(dut, idle, backpressure):
    """Two spawner jobs on a power-law graph, back to back (the drain leaves OUT zero): bits and counters."""
    salt = 2 * idle + backpressure
    tb, rng = await TB.ready(dut, salt, stall=(idle, backpressure, 10 * salt))
    nodes = _nodes(tb)
    for job in range(2):
        # Edges per node: the graph generator cannot give a node more than about nodes / 4 neighbours.
        per_node = knobs.vectors(DEFAULT_EDGES_PER_NODE, limit=max(DEFAULT_EDGES_PER_NODE, nodes // 4))
        adjacency = small_graph(nodes, per_node * nodes, seed=knobs.seed() + job)
        spawned = tb.spawn(_operator(tb, adjacency))
        features = special_features(rng, nodes, tb.features)
        await _timed(tb, tb.run_job(spawned.packets, features, spawned.n_rows, what=f"job {job}",
                                    check_stalls=not idle), 40 * (len(spawned.packets) + 4 * nodes) + 5000)
        if not idle and not backpressure:
            # One packet per cycle, but for the stalls the cycle model predicts (the spawner leaves a
            # cycle empty where every lane's rows are still in flight).
            first, last = tb.device.transfer_cycles[0], tb.device.transfer_cycles[-1]
            assert len(spawned.packets) <= last - first + 1 <= spawned.steps, (
                f"{len(spawned.packets)} packets ({spawned.steps} modelled cycles) took {last - first + 1} "
                f"cycles; {knobs.describe()}")
    dut._log.info("%d packets per job, fill %.3f", len(spawned.packets), spawned.packets.fill())


@cocotb.test()
async def hazard_patterns(dut):
    """A row in consecutive packets, in every packet, a hub row, the seed's packer: stalls as modelled."""
    tb, rng = await TB.ready(dut, 20)
    nodes, lanes = _nodes(tb), tb.lanes
    features = special_features(rng, nodes, tb.features, specials=False)
    count = knobs.vectors(60)
    base = (rng.integers(0, nodes // lanes, (count, lanes)) * lanes + np.arange(lanes))
    pairs = base.copy()
    pairs[1::2] = pairs[0::2][:pairs[1::2].shape[0]]  # each packet's rows again in the next one
    every = np.tile(np.arange(lanes), (count, 1))  # rows 0 .. lanes-1 in every packet
    hub = base.copy()
    hub[:, 0] = 0  # one hub row in lane 0 of every packet, the other lanes random
    hub_rows = knobs.vectors(300)
    lone_hub = np.full((hub_rows, lanes), -1)
    lone_hub[:, 0] = lanes  # a hub alone: every packet one nonzero, all on one row
    patterns = {"consecutive": pairs, "every packet": every, "hub row": hub, "lone hub": lone_hub}
    for name, rows in patterns.items():
        packets = _pattern_packets(tb, rng, rows)
        _, counters = await _timed(tb, tb.run_job(packets, features, nodes, what=name, check_stalls=True),
                                   20 * tb.component.hazard_window * len(packets) + 5000)
        dut._log.info("%s: %d packets, %d stall cycles", name, len(packets), counters["stall_cycles"])
        assert counters["stall_cycles"] > 0, name
    # The seed's packer on a graph: it never repeats a row within one packet but may within the window.
    adjacency = _operator(tb, small_graph(nodes, 3 * nodes, seed=knobs.seed()))
    spawned = seed_rule(adjacency, lanes=lanes, weighted=tb.weighted)
    budget = 20 * tb.component.hazard_window * len(spawned.packets) + 5000
    await _timed(tb, tb.run_job(spawned.packets, features, spawned.n_rows, what="seed rule",
                                check_stalls=True), budget)
    # The spawner on a graph with a hub: the hub's nonzeros are spread, the stream never stalls
    # except where nothing else is left to interleave (modelled exactly).
    hubbed = small_graph(nodes, 2 * nodes, seed=knobs.seed() + 1, max_degree=nodes - 1)
    spawned = tb.spawn(_operator(tb, hubbed))
    budget = 20 * tb.component.hazard_window * len(spawned.packets) + 5000
    await _timed(tb, tb.run_job(spawned.packets, features, spawned.n_rows, what="spawned hub",
                                check_stalls=True), budget)


@cocotb.test()
async def bad_packets(dut):
    """Wrong headers, rows and columns out of range, bank clashes: dropped and counted; the rest exact."""
    tb, rng = await TB.ready(dut, 30, stall=(True, True, 30))
    nodes, lanes = _nodes(tb), tb.lanes
    n_rows = n_cols = max(lanes, nodes - lanes)  # below the capacity: the range check is the register's
    features = special_features(rng, n_cols, tb.features)
    count = knobs.vectors(80)
    rows = rng.integers(0, n_rows // lanes, (count, lanes)) * lanes + np.arange(lanes)
    packets = _pattern_packets(tb, rng, np.where(rng.random((count, lanes)) < 0.8, rows, -1),
                               rng.integers(0, n_cols, (count, lanes)))
    pick = rng.random((count, lanes))
    packets.rows[pick < 0.08] = n_rows + rng.integers(0, lanes)  # out of range (still in the memory)
    packets.cols[(pick >= 0.08) & (pick < 0.16)] = n_cols + rng.integers(0, 2)
    if lanes > 1:
        packets.rows[(pick >= 0.16) & (pick < 0.24)] ^= 1  # the row of another lane's bank
    if tb.b_banks > 1:
        clash = (pick >= 0.24) & (pick < 0.4)
        packets.cols[:, 1:][clash[:, 1:]] = packets.cols[:, :1].repeat(lanes - 1, 1)[clash[:, 1:]]
    header = rng.random(count)
    packets.task[header < 0.05] = 3
    packets.weighted[(header >= 0.05) & (header < 0.1)] ^= 1
    if lanes < 8:
        packets.mask[(header >= 0.1) & (header < 0.15)] |= np.uint8(1 << lanes)
    _, counters = await _timed(tb, tb.run_job(packets, features, n_rows, what="bad packets"),
                               200 * count + 20 * nodes + 5000)
    assert counters["header_errors"] and counters["range_errors"], counters
    assert counters["bank_errors"] or lanes == 1, counters
    # A B load past the memory is ignored and counted.
    if tb.capacity_cols < 1 << tb.params["col_bits"]:
        before = tb.device.counters()["range_errors"]
        await tb.device.load_b(np.full((1, tb.features), 0x7F800000, np.uint32), start=tb.capacity_cols)
        await tb.cycles(2)
        assert tb.device.counters()["range_errors"] == before + 1
    # Nothing else was harmed: a clean job is exact.
    spawned = tb.spawn(_operator(tb, small_graph(nodes, 2 * nodes, seed=knobs.seed())))
    await _timed(tb, tb.run_job(spawned.packets, special_features(rng, nodes, tb.features), spawned.n_rows,
                                what="after bad packets"), 200 * len(spawned.packets) + 20 * nodes + 5000)


@cocotb.test()
async def reset_mid_stream(dut):
    """Reset at a random cycle of a job (B loads, packets, drain in flight); the next job is exact."""
    tb, rng = await TB.ready(dut, 40, stall=(True, True, 40))
    nodes = _nodes(tb)
    for round_ in range(knobs.vectors(3, limit=30)):  # whole graphs, each a job
        spawned = tb.spawn(_operator(tb, small_graph(nodes, 2 * nodes, seed=knobs.seed() + 10 + round_)))
        features = special_features(rng, nodes, tb.features)
        tb.device.configure(spawned.n_rows, nodes)
        await tb.device.wait_run()
        traffic = cocotb.start_soon(tb.run_job(spawned.packets, features, spawned.n_rows, what="interrupted"))
        await tb.reset_mid_transfer(rng, after=(2, nodes + len(spawned.packets)), drivers=tb.device.drivers)
        traffic.cancel()
        dut.drain_start.value = dut.clear_start.value = 0  # in case the job was cut inside a strobe
        assert tb.device.counters() == dict.fromkeys(tb.device.counters(), 0), "counters survived the reset"
        spawned = tb.spawn(_operator(tb, small_graph(nodes, 2 * nodes, seed=knobs.seed() + 20 + round_)))
        features = special_features(rng, nodes, tb.features)
        await _timed(tb, tb.run_job(spawned.packets, features, spawned.n_rows, what=f"after reset {round_}"),
                     200 * len(spawned.packets) + 40 * nodes + 5000)


@cocotb.test()
async def relu_and_clear(dut):
    """Drain with ReLU; clear_start in the middle of a job zeroes OUT and the counters."""
    tb, rng = await TB.ready(dut, 50)
    nodes = _nodes(tb)
    spawned = tb.spawn(_operator(tb, small_graph(nodes, 2 * nodes, seed=knobs.seed() + 30)))
    features = special_features(rng, nodes, tb.features)
    await _timed(tb, tb.run_job(spawned.packets, features, spawned.n_rows, relu=True, what="relu"),
                 100 * len(spawned.packets) + 20 * nodes + 5000)
    tb.device.configure(spawned.n_rows, nodes)
    await tb.device.send(tb.format.encode(spawned.packets))
    await _timed(tb, tb.device.clear(), 200 + nodes)
    assert tb.device.counters() == dict.fromkeys(tb.device.counters(), 0)
    await _timed(tb, tb.run_job(spawned.packets, features, spawned.n_rows, what="after clear"),
                 100 * len(spawned.packets) + 20 * nodes + 5000)


# ---- pytest runners ----

SMALL = {"rows": 64, "cols": 64, "row_bits": 8, "col_bits": 8}
CASES = [
    {"lanes": 4, "features": 2, **SMALL},
    {"lanes": 4, "features": 2, "weighted": True, **SMALL},
    {"lanes": 1, "features": 1, "weighted": True, "rows": 24, "cols": 24, "row_bits": 5, "col_bits": 5},
    {"lanes": 2, "features": 1, "b_banks": 4, "rows": 40, "cols": 36, "row_bits": 6, "col_bits": 6},
    {"lanes": 8, "features": 1, "b_banks": 16, **SMALL},
]
SLOW_CASES = [
    # 8 weighted lanes with 16-bit ids: 1024-bit packets.
    {"lanes": 8, "features": 2, "weighted": True, "rows": 128, "cols": 128},
    {"lanes": 4, "features": 16, "weighted": True, "rows": 128, "cols": 128, "row_bits": 12, "col_bits": 12},
]


def _id(params):
    return "-".join(f"{key}={value}" for key, value in params.items() if key not in SMALL)


@pytest.mark.parametrize("params", CASES + [pytest.param(p, marks=pytest.mark.slow) for p in SLOW_CASES],
                         ids=_id)
def test_aggregation_pipeline(params):
    run_cocotb("aggregation_pipeline", MODULE, params=params)


@pytest.mark.slow
def test_hub_with_thousands_of_edges():
    """The hazard patterns with a hub row of 3,000 nonzeros (NEARTRAIN_VECTORS=3000)."""
    run_cocotb("aggregation_pipeline", MODULE, params=CASES[0], testcase="hazard_patterns",
               extra_env={"NEARTRAIN_VECTORS": "3000"})


@pytest.mark.filterwarnings("ignore::amaranth.hdl._ir.UnusedElaboratable")
@pytest.mark.parametrize("options,message", [
    ({"lanes": 3}, "lanes must be one of"),
    ({"lanes": 4, "b_banks": 2}, "b_banks must be 1 or at least lanes"),
    ({"rows": 100, "row_bits": 6}, "row_bits must be in 7..24"),
])
def test_parameters_are_validated(options, message):
    from rtl.aggregate.aggregation_pipeline import AggregationPipeline

    with pytest.raises(ValueError, match=message):
        AggregationPipeline(**options)

