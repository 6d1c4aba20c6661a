"""The multi-node cluster: N runtime nodes on the RTL switch, driven through the Table 4.1 host API.

Every run cuts a random sparse x dense job (:mod:`golden.runtime.workload`), loads it with
``Board_MEM_init``, starts the kernel on every node, waits for ``Check_Kernel`` and reads the
outputs back with ``Sync_to_Host``. Checks, for each node: the output rows equal
:func:`golden.runtime.kernels.execute` on the golden protocol's issued tasks bit for bit, and
every counter (packets sent and received per type, spawned, issued, completed, served, drops)
equals :class:`golden.runtime.protocol.Cluster`'s. The float32 aggregation is also within the
recursive-summation bound of ``scipy.sparse`` in float64.

* ``aggregation``: kernel 6 (float32) with tasks spawned at their home (and B replicated into
  every node: no range is fetched), at the next node, or spread over all the others (every task
  crosses the network);
* ``spmm_then_relu``: kernel 2 (integer) then kernel 5 on the same tasks;
* ``deadlock_flood``: every node sends every other node tasks whose data range is on yet another
  node, through 2-entry queues everywhere; it must finish within the stated bound
  (:func:`flood_bound`);
* ``unknown_kernel_rejected``: a start with a kernel id no node has spawns nothing and is
  counted; a later valid start still runs;
* ``refused_host_requests``: host reads of a node not in the cluster and of a row past the lines
  are answered with the error flag (the host API raises at once, nothing hangs) and counted; host
  writes to an absent node, an unknown target, past the lines or past Spawn_MEM are counted and
  change nothing; a job run afterwards is exact.

After every job the cluster's host-port and kernel error counters must be 0, and the on-chip cycle
counters (broadcast start to each node's last busy cycle, and to all done) must be plausible: none
0, none past the host's window, all done the largest node's.
"""

import dataclasses

import cocotb
import numpy as np
import pytest
import scipy.sparse as sp
from cocotb.triggers import ClockCycles

from golden.runtime import kernels as gk
from golden.runtime.tables import HOST_TARGETS
from scripts.sim import knobs
from scripts.sim.devices.runtime import FCsNHost, HostReadError, prepare
from scripts.sim.devices.runtime_sessions import (
    flood_session,
    golden_run,
    no_errors,
    random_job,
    run_and_check,
)
from scripts.sim.runner import params_from_env, run_cocotb
from testbenches.runtime.tb import CLUSTER_PARAMS


def float_bound_check(adjacency, dense, out):
    a = sp.csr_matrix(adjacency).astype(np.float32).astype(np.float64)
    reference = a @ dense.astype(np.float64)
    degree = np.diff(a.indptr)[:, None].astype(np.float64)
    u = 2.0**-24
    bound = degree * u / (1 - degree * u) * (abs(a) @ np.abs(dense.astype(np.float64))) + degree * 2.0**-149
    error = np.abs(out.view(np.float32).astype(np.float64) - reference)
    assert np.all(error <= bound), f"max error {error.max()} over the float64 bound; {knobs.describe()}"


@cocotb.test()
@cocotb.parametrize(placement=["home", "next", "spread"])
async def aggregation(dut, placement):
    """Kernel 6 (float32 aggregation), bit-exact with the golden and within the float64 bound; with
    tasks at home, B is replicated into every node, and no RDMA request may be sent."""
    params = params_from_env()
    rng = knobs.rng(200 + ["home", "next", "spread"].index(placement))
    replicated = placement == "home"
    adjacency, dense, workload = random_job(rng, params, density=0.02, placement=placement,
                                            replicated=replicated)
    if replicated and params["nodes"] > 1:  # the job would fetch ranges if B were not replicated
        fetched = golden_run(dataclasses.replace(workload, config=dataclasses.replace(
            workload.config, replicated=False)), [gk.AGGREGATION])[0][0]
        assert sum(c["tx_rdma"] for c in fetched.counters) > 0
    _, out = await run_and_check(dut, workload, [gk.AGGREGATION], timeout_cycles=20 * adjacency.nnz + 20_000)
    float_bound_check(adjacency, dense, out)


@cocotb.test()
async def spmm_then_relu(dut):
    """Kernel 2 (integer sparse x dense) then kernel 5 (ReLU) on the same tasks."""
    params = params_from_env()
    adjacency, dense, workload = random_job(
        knobs.rng(210), params, density=0.02, placement="next", integer=True
    )
    _, out = await run_and_check(
        dut, workload, [gk.SPMM, gk.ACTIVATION], timeout_cycles=10 * adjacency.nnz + 20_000
    )
    # Oracle: A @ B modulo 2**32 with np.add.at (uint64 products are exact; sums wrap modulo 2**64).
    coo = sp.coo_matrix(adjacency)
    terms = coo.data.astype(np.uint64)[:, None] * dense.astype(np.uint64)[coo.col]
    product = np.zeros(dense.shape, np.uint64)
    np.add.at(product, coo.row, terms)
    product = (product & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    assert np.array_equal(out, np.where(product >> 31, np.uint32(0), product)), knobs.describe()


@cocotb.test()
async def deadlock_flood(dut):
    """Every node floods every other node with tasks whose data is on a third node, with 2-entry
    queues, within :func:`~scripts.sim.devices.runtime_sessions.flood_bound` (the bench's session)."""
    await flood_session(dut, None)


@cocotb.test()
async def unknown_kernel_rejected(dut):
    """Kernel_Start with id 0 (2D convolution, not attached): nothing spawned, counted; then a valid run."""
    params = params_from_env()
    _, _, workload = random_job(knobs.rng(230), params, density=0.01, placement="home", integer=True)
    host = FCsNHost(dut, params["nodes"])
    overlay, _ = await prepare(host, params["nodes"], workload)
    await host.Kernel_Start(overlay, 0)
    status = await host.wait_kernel(overlay, timeout_cycles=20_000)
    for node in range(overlay.nodes):
        assert status.counters[node]["start_rejected"] == 1 and status.counters[node]["spawned"] == 0
    await host.Kernel_Start(overlay, gk.SPMM)
    status = await host.wait_kernel(overlay, timeout_cycles=200_000)
    assert sum(c["spawned"] for c in status.counters) == workload.packets


@cocotb.test()
async def refused_host_requests(dut):
    """Bad host reads are answered (as errors) and counted; bad host writes are counted and harmless."""
    params = params_from_env()
    nodes, lines = params["nodes"], params["lines"]
    adjacency, _, workload = random_job(knobs.rng(240), params, density=0.02, placement="next", integer=True)
    host = FCsNHost(dut, nodes)
    overlay, handler = await prepare(host, nodes, workload)
    for node, row in ((nodes, 0), (15, 1), (0, lines), (1, (1 << 24) - 1)):
        start = host.cycle
        try:
            await host._read_rows([(node, row)])
        except HostReadError:
            pass
        else:
            raise AssertionError(f"the read of node {node} row {row} was answered as data")
        assert host.cycle - start < 10, "an error answer must come at once"
    errors = no_errors(nodes)
    errors["host_read_errors"] = 4
    assert host.host_errors() == errors
    # Each refused write would alias row or entry 0 of node 0 (or reach no node): none may change anything.
    await host._load([(nodes, HOST_TARGETS["out"], 0, 1), (0, 3, 0, 1), (0, HOST_TARGETS["out"], lines, 1),
                      (0, HOST_TARGETS["data"], lines, 1),
                      (0, HOST_TARGETS["spawn"], params["spawn_depth"], 1 << 511)])
    await ClockCycles(dut.clk, 2)
    errors["host_load_errors"] = 5
    assert host.host_errors() == errors
    _, expected = golden_run(workload, [gk.SPMM])
    await host.Kernel_Start(overlay, gk.SPMM)
    await host.wait_kernel(overlay, timeout_cycles=10 * adjacency.nnz + 20_000)
    out = await host.Sync_to_Host(overlay, handler)
    assert np.array_equal(out, expected), knobs.describe()
    assert host.host_errors() == errors


# make test-full only (the 2-node run was 224 s of a core in a cold run when CI ran over its 45
# minutes); test_deadlock_flood runs 4 nodes in the fast suite.
@pytest.mark.parametrize("nodes", [pytest.param(n, marks=pytest.mark.slow) for n in (1, 2, 4, 8, 16)])
def test_cluster(nodes):
    run_cocotb(
        "runtime_cluster",
        __name__,
        params={"nodes": nodes, **CLUSTER_PARAMS, "queue_depth": 4, "switch_depth": 2},
        testcase=["aggregation", "spmm_then_relu", "unknown_kernel_rejected", "refused_host_requests"],
    )


@pytest.mark.parametrize(
    "nodes", [4, pytest.param(8, marks=pytest.mark.slow), pytest.param(16, marks=pytest.mark.slow)]
)
def test_deadlock_flood(nodes):
    run_cocotb(
        "runtime_cluster",
        __name__,
        params={"nodes": nodes, **CLUSTER_PARAMS, "queue_depth": 2, "switch_depth": 2, "aggregation": False},
        testcase="deadlock_flood",
    )
