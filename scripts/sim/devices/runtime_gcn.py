"""The host flow of a two-layer GCN on the simulated cluster (``neartrain demo cluster --layers 2``).

:func:`gcn_session` runs a :class:`golden.runtime.gcn.GcnJob` through the Table 4.1 host API of
:class:`~scripts.sim.devices.runtime.FCsNHost` on a ``runtime_cluster`` built with the GEMM unit:
the configuration, the W lines (into every node) and the Spawn_MEM entries are loaded, the input
rows written into their home nodes' output memories, then each stage of
:data:`golden.runtime.gcn.STAGES` is one ``Kernel_Start`` (every node on its own window of
Spawn_MEM) and ``Check_Kernel``; before each aggregation the host reads the new rows from their
homes and writes them as B lines into every node (:data:`golden.runtime.gcn.REPLICATE_BEFORE`).
After each stage the host reads every physical row back, for the stage-by-stage comparison.
"""

import numpy as np

from golden.runtime.gcn import REPLICATE_BEFORE, STAGES
from golden.runtime.kernels import line_words
from golden.runtime.workload import Workload
from rtl.runtime.cluster import HOST_DATA
from scripts.sim import channel

from .runtime import CLUSTER_MODEL_OPT, DataHandler, FCsNHost

__all__ = ["gcn_session", "gcn_params", "run_gcn", "SESSIONS"]


async def _gather(host, job):
    """Every physical row from its home node (``physical_rows x features`` uint32)."""
    config = job.config
    values = await host._read_rows([(config.home(row), row) for row in range(job.physical_rows)])
    return np.array([line_words(value, job.features) for value in values], dtype=np.uint32)


async def _replicate(host, job, physical):
    """The dense rows in ``physical`` as B lines into every node; returns the load's lines and cycles."""
    lines = job.b_lines(physical)
    items = [(node, HOST_DATA, line, value) for node in range(job.config.nodes)
             for line, value in lines.items()]
    start = host.cycle
    await host._load(items)
    return {"lines": len(items), "cycles": host.cycle - start}


async def gcn_session(dut, job):
    """Run ``job`` (a :class:`~golden.runtime.gcn.GcnJob`); returns per stage the rows read back,
    the on-chip cycles (all done and per node), the counters, and the B loads before the aggregations."""
    config = job.config
    host = FCsNHost(dut, channel.params()["nodes"])
    overlay = await host.System_init(config.nodes)
    await host.Board_init(overlay, "runtime_cluster")
    handler = DataHandler(Workload(config, job.spawn, job.memory, job.features))
    await host.Board_MEM_init(overlay, handler)  # registers, and the W lines into every node
    w_load = host.b_load
    await host.load_tasks(overlay, handler)
    inputs = np.zeros((config.rows, job.features), np.uint32)
    inputs[:job.physical_rows] = job.x.view(np.uint32)
    await host.clear_outputs(overlay, config.rows, inputs)
    stages, loads, previous = [], {"w": w_load}, None
    for stage, task_id, layer in STAGES:
        if stage in REPLICATE_BEFORE:
            loads[stage] = await _replicate(host, job, stages[-1]["out"])
        start = host.cycle
        await host.Kernel_Start(overlay, task_id, job.windows[stage])
        tasks = sum(count for _, count in job.windows[stage])
        status = await host.wait_kernel(overlay, timeout_cycles=200 * tasks + 50_000)
        timing = await host.read_cycles()
        stages.append({"stage": stage, "task_id": task_id, "layer": layer, "cycles": timing.cycles,
                       "node_cycles": timing.nodes, "counters": status.counters,
                       "cycle_problems": timing.problems(status.cycle - start),
                       "out": await _gather(host, job)})
        previous = stage
    errors = host.host_errors()
    await host.System_Finalize(overlay)
    return {"stages": stages, "loads": loads, "errors": errors, "last": previous}


SESSIONS = {"gcn": gcn_session}


def gcn_params(job, *, queue_depth=8, switch_depth=8):
    """``runtime_cluster`` parameters that hold ``job``, with the GEMM unit."""
    config = job.config
    entries = max(len(entries) for entries in job.spawn)
    return {"nodes": config.nodes, "lines": config.rows, "features": job.features,
            "spawn_depth": 1 << max(1, (entries - 1).bit_length()),
            "ranges": max(2, 1 << (config.ranges - 1).bit_length()), "block": config.block,
            "queue_depth": queue_depth, "switch_depth": switch_depth, "gemm": True}


def run_gcn(job, *, model_opt=CLUSTER_MODEL_OPT):
    """Run ``job`` on a cluster that holds it (:func:`gcn_params`, its C++ at ``model_opt``);
    returns :func:`gcn_session`'s dict."""
    from scripts.sim.devices import run_session

    return run_session("runtime_cluster", "runtime_gcn.gcn", job, params=gcn_params(job), model_opt=model_opt)
