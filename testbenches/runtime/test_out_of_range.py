"""Out-of-range rows, addresses and nodes are refused and counted, and every host read is answered.

``amaranth.sim`` tests (no Verilator build), each a short scripted sequence whose expectation is
stated here, not read from the design:

* ``NodeKernels`` with 4 output rows: a task slot, a host write and a host read of row 5 must not
  reach row 1 (the 24-bit row was cut to the memory's 2 address bits); the read is answered with
  ``error`` set and data 0; each refusal counts once in ``range_errors``; a ``b_load`` past the
  rows counts too. With the aggregation pipeline attached, the same for kernel 6, and an
  aggregation slot outside its output bank (row mod 4 differs from the slot) counts in
  ``bank_errors``.
* ``Cluster`` of 2 nodes with 8 lines: a host read of node 3 (not in the cluster) and of row 9
  (past the lines) are each answered with ``error`` set within a few cycles, counted in
  ``host_read_errors``; host loads to node 3, to target 3, to output row 9, to data line 9 and to
  Spawn_MEM entry 5 (of 4) are each refused and counted in ``host_load_errors``, and the output
  row 1 that row 9 would alias keeps its value.
* ``NodeMemory`` of 4 lines: a handler write, a host write and an RDMA read of line 5 are refused
  (line 1 keeps its value, the read returns 0) and each counts in ``range_errors``.
* The counters saturate at 2**32 - 1 (set near the top, then driven past it).
"""

import numpy as np
from amaranth.hdl import Value
from amaranth.sim import Simulator

from golden.runtime import packet as gp
from golden.runtime.kernels import ACTIVATION, AGGREGATION, SPMM
from golden.runtime.tables import HOST_TARGETS, READ_ANSWER_FIELDS
from rtl.runtime.cluster import Cluster
from rtl.runtime.node_kernels import NodeKernels
from rtl.runtime.node_memory import NodeMemory

SPAWN, DATA, OUT = HOST_TARGETS["spawn"], HOST_TARGETS["data"], HOST_TARGETS["out"]
_ANSWER = {name: (offset, width) for name, offset, width in READ_ANSWER_FIELDS}
LINE_BITS = _ANSWER["data"][1]
ERROR_BIT = _ANSWER["error"][0]
TOP = (1 << 32) - 1  # the counters are 32 bits wide


def _f32(value):
    return int(np.float32(value).view(np.uint32))


def _task(task_id, slots):
    return gp.encode(gp.Packet(gp.TASK, task_id=task_id, slots=tuple(slots)), sealed=False)


async def _send(ctx, stream, payload, limit=200):
    """One transfer on ``stream`` (valid held until ready)."""
    ctx.set(stream.valid, 1)
    ctx.set(Value.cast(stream.payload), payload)
    for _ in range(limit):
        if ctx.get(stream.ready):
            await ctx.tick()
            ctx.set(stream.valid, 0)
            return
        await ctx.tick()
    raise AssertionError(f"{stream} never ready")


async def _receive(ctx, stream, limit=400):
    """The next transfer on ``stream`` as ``(data, error)``; fails after ``limit`` cycles (a hang)."""
    ctx.set(stream.ready, 1)
    for _ in range(limit):
        if ctx.get(stream.valid):
            word = ctx.get(Value.cast(stream.payload))
            await ctx.tick()
            ctx.set(stream.ready, 0)
            return word & ((1 << LINE_BITS) - 1), word >> ERROR_BIT & 1
        await ctx.tick()
    raise AssertionError(f"no answer on {stream} within {limit} cycles (the host would wait for ever)")


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


# ------------------------------------------------------------------ NodeKernels


class _Kernels:
    """Drives a NodeKernels: B is the constant line ``b`` on the b_addr/b_data port."""

    def __init__(self, ctx, dut, b):
        self.ctx, self.dut = ctx, dut
        ctx.set(dut.b_data, b)

    async def write(self, row, value):
        await _send(self.ctx, self.dut.load, row | value << 24)

    async def read(self, row):
        await _send(self.ctx, self.dut.read_cmd, row)
        return await _receive(self.ctx, self.dut.read_data)

    async def task(self, task_id, slots):
        ctx, dut = self.ctx, self.dut
        ctx.set(dut.task.valid, 1)
        ctx.set(Value.cast(dut.task.payload), _task(task_id, slots))
        sent = done = False
        for _ in range(200):  # an aggregation task is done in the cycle the pipeline takes it
            done |= bool(ctx.get(dut.done.valid))
            sent |= bool(ctx.get(dut.task.ready))
            await ctx.tick()
            if sent:
                ctx.set(dut.task.valid, 0)
            if sent and done:
                return
        raise AssertionError(f"task sent: {sent}, reported done: {done}")


def _run_kernels(script, *, aggregation=False, b=0, settle=2):
    """Simulate a NodeKernels of 1 feature and 4 rows (with the aggregation pipeline if ``aggregation``),
    B the constant line ``b``: ``settle`` cycles, then ``script(ctx, dut, kernels)``."""
    dut = NodeKernels(features=1, rows=4, aggregation=aggregation)

    async def bench(ctx):
        k = _Kernels(ctx, dut, b)
        await ctx.tick().repeat(settle)
        await script(ctx, dut, k)

    _run(dut, bench)


def test_kernels_refuse_rows_past_the_memory():
    async def script(ctx, dut, k):
        for row in range(4):
            await k.write(row, 100 + row)
        # Slot 1 on row 5 (1 with 2 address bits), slot 2 on row 2 (good), slot 3 column 9 (past B).
        await k.task(SPMM, [None, gp.Item(5, 0, 3), gp.Item(2, 0, 2), gp.Item(3, 9, 1)])
        assert await k.read(1) == (101, 0), "a task slot on row 5 changed row 1"
        assert await k.read(2) == (102 + 2 * 7, 0)
        assert await k.read(3) == (103, 0), "a slot whose column is past B ran"
        await k.write(5, 55)
        assert await k.read(1) == (101, 0), "a host write of row 5 landed in row 1"
        assert await k.read(5) == (0, 1), "a host read of row 5 must be answered with the error flag"
        # ReLU reads no B: its column is not checked, only its row.
        await k.write(0, 0x80000000)
        await k.task(ACTIVATION, [gp.Item(0, 1 << 20), gp.Item(1 << 23, 0), None, None])
        assert await k.read(0) == (0, 0)
        assert ctx.get(dut.range_errors) == 5, "slot row, slot column, write, read, ReLU slot row"
        # A b_load past the rows is refused and counted (kernels without the pipeline ignore B loads).
        ctx.set(dut.b_load.valid, 1)
        ctx.set(Value.cast(dut.b_load.payload), 4)
        await ctx.tick()
        ctx.set(Value.cast(dut.b_load.payload), 3)
        await ctx.tick()
        ctx.set(dut.b_load.valid, 0)
        await ctx.tick()
        assert ctx.get(dut.range_errors) == 6
        assert ctx.get(dut.bank_errors) == 0

    _run_kernels(script, b=7)


def test_aggregation_refuses_rows_past_the_memory_and_counts_bank_errors():
    async def script(ctx, dut, k):
        for row in range(4):
            await k.write(row, 0)
        for line, value in ((0, 2.0), (1, 3.0), (6, 5.0)):  # line 6 is past the pipeline's B
            await _send(ctx, dut.b_load, line | _f32(value) << 24)
        # Slot 1 on row 5 (would be row 1), slot 2 on row 2 with column 0, slot 3 on row 1 (bank 1, not 3).
        await k.task(AGGREGATION, [None, gp.Item(5, 0, _f32(1.0)), gp.Item(2, 0, _f32(1.5)),
                                   gp.Item(1, 1, _f32(1.0))])
        await k.task(AGGREGATION, [gp.Item(0, 7, _f32(1.0)), None, None, None])  # column 7 is past B
        assert await k.read(1) == (0, 0), "an aggregation slot on row 5 changed row 1"
        assert await k.read(2) == (_f32(3.0), 0)
        assert await k.read(0) == (0, 0)
        assert ctx.get(dut.range_errors) == 3, "b_load line 6, slot row 5, slot column 7"
        assert ctx.get(dut.bank_errors) == 1, "row 1 in slot 3"

    _run_kernels(script, aggregation=True, settle=4)


def test_kernel_counters_saturate():
    async def script(ctx, dut, k):
        ctx.set(dut.range_errors, TOP - 2)
        await k.task(SPMM, [gp.Item(4, 0, 1), gp.Item(5, 0, 1), gp.Item(6, 0, 1), gp.Item(7, 0, 1)])
        assert ctx.get(dut.range_errors) == TOP, "4 refusals from 2**32 - 3 must stop at 2**32 - 1"
        await k.write(9, 1)
        assert ctx.get(dut.range_errors) == TOP

    _run_kernels(script)


def test_memory_counts_lines_past_its_end():
    dut = NodeMemory(lines=4)

    async def bench(ctx):
        await ctx.tick().repeat(2)
        await _send(ctx, dut.wr, 1 | 11 << 24)
        await _send(ctx, dut.wr, 5 | 55 << 24)
        await _send(ctx, dut.load, 5 | 66 << 24)
        ctx.set(dut.rd_data.ready, 1)
        answers = []
        for line in (1, 5):
            await _send(ctx, dut.rd_cmd, line)
            answers.append(ctx.get(dut.rd_data.payload))
        assert answers == [11, 0], "line 5 must read as 0 and must not have reached line 1"
        assert ctx.get(dut.range_errors) == 3, "the handler write, the host write and the read of line 5"

    _run(dut, bench)


# ------------------------------------------------------------------ Cluster


def test_cluster_answers_every_host_read_and_counts_refused_loads():
    dut = Cluster(nodes=2, lines=8, features=1, spawn_depth=4, ranges=2, block=4, queue_depth=2,
                  switch_depth=2, aggregation=False)

    def load(node, target, address, value):
        return node | target << 4 | address << 6 | value << 30

    async def read(ctx, node, row):
        await _send(ctx, dut.host_read, node | row << 4)
        return await _receive(ctx, dut.host_read_data, limit=50)

    async def bench(ctx):
        await ctx.tick().repeat(4)
        for row in range(8):
            await _send(ctx, dut.host_load, load(0, OUT, row, 200 + row))
        assert await read(ctx, 0, 1) == (201, 0)
        assert await read(ctx, 3, 1) == (0, 1), "a read of node 3 (not in the cluster) must be answered"
        assert await read(ctx, 0, 9) == (0, 1), "a read of row 9 (past 8 lines) must be answered as an error"
        assert ctx.get(dut.host_read_errors) == 2
        refused = [load(3, OUT, 1, 9), load(0, 3, 1, 9), load(0, OUT, 9, 9), load(1, DATA, 9, 9),
                   load(1, SPAWN, 5, 9)]
        for word in refused:
            await _send(ctx, dut.host_load, word)
        await ctx.tick()
        assert ctx.get(dut.host_load_errors) == len(refused)
        assert await read(ctx, 0, 1) == (201, 0), "a host write of output row 9 landed in row 1"
        assert ctx.get(dut.host_read_errors) == 2
        assert ctx.get(Value.cast(dut.kernel_range_errors)) == 0
        assert ctx.get(Value.cast(dut.memory_range_errors)) == 0  # the host port refused line 9 first

    _run(dut, bench)
