"""The node's kernels: aggregation on the pipeline (6), integer sparse x dense (2), ReLU (5), GEMM (1).

B is loaded on ``b_load`` (the pipeline's copy) and served on the ``b_addr``/``b_data`` port (one
cycle latency, by the testbench); random tasks (slot ``i`` holds a row with ``row mod 4 == i``, as
the spawner makes them) arrive with random gaps; every task must be reported done once; the
output rows read back through the host port must equal :func:`golden.runtime.kernels.execute` bit
for bit, including a ReLU after an aggregation (the pipeline drained first). A few slots are bad
on purpose (a row or column past the memory, an aggregation row outside its slot's bank): the
kernels skip them and ``range_errors`` / ``bank_errors`` must equal the golden's counts.
``aggregation_non_finite`` loads B with NaNs (quiet, signalling, negative, with payloads) and
infinities and uses such weights: every output bit must still equal the golden's (canonical NaN
``0x7FC00000``; nothing counts non-finite values).

The GEMM tests (``gemm_*``) load the output rows with random float32 values, put random ``W``
matrices (``K x N``, 1 to ``features`` each) in B's lines and send GEMM tasks (every slot of a task
with the task's ``W`` and shape, rows of any bank, a few slots bad: a row past the memory, a shape
past ``features`` or ``W`` lines past the memory) mixed with aggregation and ReLU tasks, the task
stream paused at random and the host's read answers backpressured: the rows must equal
:func:`golden.runtime.kernels.execute` (in place, :func:`golden.systolic.gemm`'s order) bit for bit.
"""

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from golden.runtime import kernels as gk
from golden.runtime import packet as gp
from golden.runtime.tables import READ_ANSWER_FIELDS
from scripts.sim import knobs
from scripts.sim.runner import params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, random_pauses
from scripts.sim.tb import ClockedTB

ERROR_BIT = dict((name, offset) for name, offset, _ in READ_ANSWER_FIELDS)["error"]
# Non-finite and special float32 bit patterns: quiet and signalling NaNs (both signs, payloads),
# infinities, zeros, a subnormal and the largest finite value.
SPECIALS = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFBFFFFF, 0x7FC12345, 0x7F800000, 0xFF800000,
                     0x00000000, 0x80000000, 0x00000001, 0x7F7FFFFF], dtype=np.uint32)


class KernelsTB(ClockedTB):
    def __init__(self, dut, salt):
        super().__init__(dut)
        params = params_from_env()
        self.rows, self.features = params["rows"], params["features"]
        self.task = StreamSource(dut, "task", self.clock, pause=random_pauses(knobs.rng(salt), 0.3))
        self.b_load = StreamSource(dut, "b_load", self.clock)
        self.load = StreamSource(dut, "load", self.clock)
        self.read_cmd = StreamSource(dut, "read_cmd", self.clock)
        self.read_data = StreamSink(dut, "read_data", self.clock,
                                    backpressure=random_pauses(knobs.rng(salt + 7), 0.3))
        self.done = StreamSink(dut, "done", self.clock)
        self.memory = {}
        cocotb.start_soon(self._b_port())

    async def _b_port(self):
        while True:
            await RisingEdge(self.clock)
            self.dut.b_data.value = self.memory.get(int(self.dut.b_addr.value), 0)

    async def read_all(self):
        self.read_cmd.send_many(range(self.rows))
        answers = [await self.read_data.recv() for _ in range(self.rows)]
        assert not any(answer >> ERROR_BIT for answer in answers), "a read of a row that is there was refused"
        return np.array([gk.line_words(answer, self.features) for answer in answers])

    def counters(self):
        return {name: int(getattr(self.dut, name).value) for name in gk.KERNEL_COUNTERS}


def random_tasks(rng, rows, count, task_id, weights="float", bad=0.03):
    """Tasks as the spawner makes them (slot i holds rows i mod 4), a fraction ``bad`` of slots
    broken: a row or column past the memory, or a row of another bank."""
    tasks = []
    for _ in range(count):
        slots = []
        for slot in range(gp.ITEMS):
            if rng.random() < 0.25:
                slots.append(None)
                continue
            row = int(rng.integers(0, rows // gp.ITEMS)) * gp.ITEMS + slot
            col = int(rng.integers(0, rows))
            if weights == "float":
                value = int(np.float32(rng.standard_normal()).view(np.uint32))
            elif weights == "special":
                value = int(rng.choice(SPECIALS)) if rng.random() < 0.3 else int(
                    np.float32(rng.standard_normal()).view(np.uint32))
            else:
                value = int(rng.integers(0, 1 << 32))
            if rng.random() < bad:
                kind = int(rng.integers(0, 3))
                if kind == 0:
                    row = int(rng.integers(rows, 1 << 24))
                elif kind == 1:
                    col = int(rng.integers(rows, 1 << 24))
                else:
                    row = row ^ int(rng.integers(1, gp.ITEMS))
            slots.append(gp.Item(row, col, value))
        if all(item is None for item in slots):
            slots[0] = gp.Item(0, 0, 0)
        tasks.append(gp.Packet(gp.TASK, task_id=task_id, slots=tuple(slots)))
    return tasks


async def run_sequence(tb, rng, kernels, floats, specials=False):
    if floats:
        b = rng.standard_normal((tb.rows, tb.features)).astype(np.float32).view(np.uint32)
        if specials:
            chosen = rng.random(b.shape) < 0.2
            b[chosen] = rng.choice(SPECIALS, int(chosen.sum()))
    else:
        b = rng.integers(0, 1 << 32, (tb.rows, tb.features), dtype=np.uint64).astype(np.uint32)
    tb.memory = {line: gk.words_line(b[line]) for line in range(tb.rows)}
    tb.load.send_many(range(tb.rows))  # zero the output memory (it keeps its contents over a reset)
    await tb.load.wait_idle()
    tb.b_load.send_many(line | value << 24 for line, value in tb.memory.items())
    await tb.b_load.wait_idle()
    issued = []
    # With specials, more tasks per row turn every infinity into a NaN (inf - inf, inf * 0), so
    # that the outputs would no longer show both: their count stays at the default.
    count = knobs.vectors(80, limit=80 if specials else None)
    for task_id in kernels:
        weights = ("special" if specials else "float") if floats else "int"
        tasks = random_tasks(rng, tb.rows, count, task_id, weights)
        issued += tasks
        tb.task.send_many(gp.encode(task, sealed=False) for task in tasks)
    out, _ = await check_outputs(tb, issued)
    return out


async def check_outputs(tb, issued, start=None):
    """Wait for every task of ``issued`` to be done once, then the output rows and the counters
    against :func:`golden.runtime.kernels.execute` (from rows ``start``, zeros by default); returns
    ``(rows, golden counters)``."""
    for _ in range(len(issued)):
        await tb.done.recv()
    out = await tb.read_all()
    errors = []
    expected = gk.execute([issued], tb.memory, rows=tb.rows, features=tb.features,
                          out=None if start is None else [start], errors=errors)[0]
    bad = np.flatnonzero((out != expected).any(axis=1))
    assert not bad.size, (
        f"rows {bad[:8].tolist()} differ: {out[bad[0]]} != {expected[bad[0]]}; {knobs.describe()}"
    )
    await tb.cycles(20)
    assert tb.done.empty(), "a task was reported done twice"
    assert tb.counters() == errors[0], f"{tb.counters()} != golden {errors[0]}; {knobs.describe()}"
    return out, errors[0]


def gemm_tasks(rng, rows, features, count, bad=0.05):
    """GEMM tasks on random rows (any bank), each with a random ``W`` shape at a random line; a
    fraction ``bad`` of slots broken (a row past the memory, a shape past ``features``, ``W`` past B)."""
    tasks = []
    for _ in range(count):
        k, n = (int(value) for value in rng.integers(1, features + 1, 2))
        col = int(rng.integers(0, rows - k + 1))
        slots = []
        for _ in range(gp.ITEMS):
            if rng.random() < 0.25:
                slots.append(None)
                continue
            row, slot_col, value = int(rng.integers(0, rows)), col, gk.gemm_value(k, n)
            if rng.random() < bad:
                kind = int(rng.integers(0, 3))
                if kind == 0:
                    row = int(rng.integers(rows, 1 << 24))
                elif kind == 1:
                    value = gk.gemm_value(features + 1, n) if rng.random() < 0.5 else gk.gemm_value(k, 0)
                else:
                    slot_col = rows - k + 1
            slots.append(gp.Item(row, slot_col, value))
        if all(item is None for item in slots):
            slots[0] = gp.Item(0, col, gk.gemm_value(k, n))
        tasks.append(gp.Packet(gp.TASK, task_id=gk.GEMM, slots=tuple(slots)))
    return tasks


async def gemm_sequence(dut, salt, kernels):
    """Random output rows and B, then batches of tasks of ``kernels`` in turn (GEMM tasks from
    :func:`gemm_tasks`); the output rows, the done events and the counters against the golden."""
    tb = KernelsTB(dut, salt)
    await tb.reset()
    rng = knobs.rng(salt + 1)
    b = rng.standard_normal((tb.rows, tb.features)).astype(np.float32).view(np.uint32)
    start = rng.standard_normal((tb.rows, tb.features)).astype(np.float32).view(np.uint32)
    tb.memory = {line: gk.words_line(b[line]) for line in range(tb.rows)}
    tb.load.send_many(row | gk.words_line(start[row]) << 24 for row in range(tb.rows))
    await tb.load.wait_idle()
    tb.b_load.send_many(line | value << 24 for line, value in tb.memory.items())
    await tb.b_load.wait_idle()
    issued = []
    for task_id in kernels:
        count = knobs.vectors(30)
        tasks = (gemm_tasks(rng, tb.rows, tb.features, count) if task_id == gk.GEMM
                 else random_tasks(rng, tb.rows, count, task_id))
        issued += tasks
        tb.task.send_many(gp.encode(task, sealed=False) for task in tasks)
    out, errors = await check_outputs(tb, issued, start)
    assert errors["range_errors"], f"no bad GEMM slot was refused; {knobs.describe()}"
    changed = (out != start).any(axis=1).sum()
    assert changed > tb.rows // 2, f"only {changed} rows changed: the GEMMs did not run; {knobs.describe()}"


@cocotb.test()
async def gemm_in_place(dut):
    await gemm_sequence(dut, 540, [gk.GEMM, gk.GEMM])


@cocotb.test()
async def gemm_after_aggregation_then_relu(dut):
    """The GCN's order: aggregation (drained first), GEMM on its sums, ReLU, GEMM again."""
    await gemm_sequence(dut, 550, [gk.AGGREGATION, gk.GEMM, gk.ACTIVATION, gk.GEMM])


async def fresh_sequence(dut, salt, kernels, **options):
    """A testbench seeded by ``salt``, reset, then :func:`run_sequence` seeded by ``salt + 1``."""
    tb = KernelsTB(dut, salt)
    await tb.reset()
    return await run_sequence(tb, knobs.rng(salt + 1), kernels, **options)


@cocotb.test()
async def aggregation_then_relu(dut):
    await fresh_sequence(dut, 500, [gk.AGGREGATION, gk.ACTIVATION], floats=True)


@cocotb.test()
async def aggregation_non_finite(dut):
    """NaNs and infinities in B and in the weights: bit-exact with the golden (canonical NaN), then ReLU."""
    out = await fresh_sequence(dut, 530, [gk.AGGREGATION, gk.ACTIVATION], floats=True, specials=True)
    words = out.view(np.float32)
    reached = np.isnan(words).any() and np.isinf(words).any()
    assert reached, f"no NaN or infinity reached the output; {knobs.describe()}"


@cocotb.test()
async def spmm_then_relu(dut):
    await fresh_sequence(dut, 510, [gk.SPMM, gk.ACTIVATION], floats=False)


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
    run_cocotb("runtime_node_kernels", __name__, params={"features": 3, "rows": 64, "gemm": True})
