"""The node's kernels: aggregation on the pipeline (6), integer sparse x dense (2), ReLU (5).

B is loaded on ``b_load`` (the pipeline's copy) and served on the ``b_addr``/``b_data`` port (one
cycle latency, by the testbench); random tasks (slot ``i`` holds a row with ``row mod 4 == i``, as
the spawner makes them) arrive with random gaps; every task must be reported done once; the
output rows read back through the host port must equal :func:`golden.runtime.kernels.execute` bit
for bit, including a ReLU after an aggregation (the pipeline drained first).
"""

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from golden.runtime import kernels as gk
from golden.runtime import packet as gp
from scripts.sim import knobs
from scripts.sim.runner import params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, random_pauses
from scripts.sim.tb import ClockedTB


class KernelsTB(ClockedTB):
    def __init__(self, dut, salt):
        super().__init__(dut)
        params = params_from_env()
        self.rows, self.features = params["rows"], params["features"]
        self.task = StreamSource(dut, "task", self.clock, pause=random_pauses(knobs.rng(salt), 0.3))
        self.b_load = StreamSource(dut, "b_load", self.clock)
        self.load = StreamSource(dut, "load", self.clock)
        self.read_cmd = StreamSource(dut, "read_cmd", self.clock)
        self.read_data = StreamSink(dut, "read_data", self.clock)
        self.done = StreamSink(dut, "done", self.clock)
        self.memory = {}
        cocotb.start_soon(self._b_port())

    async def _b_port(self):
        while True:
            await RisingEdge(self.clock)
            self.dut.b_data.value = self.memory.get(int(self.dut.b_addr.value), 0)

    async def read_all(self):
        self.read_cmd.send_many(range(self.rows))
        return np.array([gk.line_words(await self.read_data.recv(), self.features) for _ in range(self.rows)])


def random_tasks(rng, rows, count, task_id, weights="float"):
    tasks = []
    for _ in range(count):
        slots = []
        for slot in range(gp.ITEMS):
            if rng.random() < 0.25:
                slots.append(None)
                continue
            row = int(rng.integers(0, rows // gp.ITEMS)) * gp.ITEMS + slot
            value = (
                int(np.float32(rng.standard_normal()).view(np.uint32))
                if weights == "float"
                else int(rng.integers(0, 1 << 32))
            )
            slots.append(gp.Item(row, int(rng.integers(0, rows)), value))
        if all(item is None for item in slots):
            slots[0] = gp.Item(0, 0, 0)
        tasks.append(gp.Packet(gp.TASK, task_id=task_id, slots=tuple(slots)))
    return tasks


async def run_sequence(tb, rng, kernels, floats):
    if floats:
        b = rng.standard_normal((tb.rows, tb.features)).astype(np.float32).view(np.uint32)
    else:
        b = rng.integers(0, 1 << 32, (tb.rows, tb.features), dtype=np.uint64).astype(np.uint32)
    tb.memory = {line: gk.words_line(b[line]) for line in range(tb.rows)}
    tb.load.send_many(range(tb.rows))  # zero the output memory (it keeps its contents over a reset)
    await tb.load.wait_idle()
    tb.b_load.send_many(line | value << 24 for line, value in tb.memory.items())
    await tb.b_load.wait_idle()
    issued = []
    for task_id in kernels:
        tasks = random_tasks(rng, tb.rows, knobs.vectors(80), task_id, "float" if floats else "int")
        issued += tasks
        tb.task.send_many(gp.encode(task, sealed=False) for task in tasks)
    for _ in range(len(issued)):
        await tb.done.recv()
    out = await tb.read_all()
    expected = gk.execute([issued], tb.memory, rows=tb.rows, features=tb.features)[0]
    bad = np.flatnonzero((out != expected).any(axis=1))
    assert not bad.size, (
        f"rows {bad[:8].tolist()} differ: {out[bad[0]]} != {expected[bad[0]]}; {knobs.describe()}"
    )
    await tb.cycles(20)
    assert tb.done.empty(), "a task was reported done twice"


@cocotb.test()
async def aggregation_then_relu(dut):
    tb = KernelsTB(dut, 500)
    await tb.reset()
    await run_sequence(tb, knobs.rng(501), [gk.AGGREGATION, gk.ACTIVATION], floats=True)


@cocotb.test()
async def spmm_then_relu(dut):
    tb = KernelsTB(dut, 510)
    await tb.reset()
    await run_sequence(tb, knobs.rng(511), [gk.SPMM, gk.ACTIVATION], floats=False)


@cocotb.test()
async def reset_mid_packet(dut):
    """Reset while aggregation tasks flow; afterwards (outputs zeroed) a clean run is exact."""
    tb = KernelsTB(dut, 520)
    await tb.reset()
    rng = knobs.rng(521)
    tb.task.send_many(gp.encode(t, sealed=False) for t in random_tasks(rng, tb.rows, 40, gk.AGGREGATION))
    await tb.reset_mid_transfer(
        rng, after=(5, 60), drivers=[tb.task, tb.b_load, tb.load, tb.read_cmd, tb.read_data, tb.done]
    )
    await run_sequence(tb, rng, [gk.AGGREGATION], floats=True)


def test_node_kernels():
    run_cocotb("runtime_node_kernels", __name__, params={"features": 3, "rows": 64})
