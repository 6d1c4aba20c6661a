"""The cocotb side of ``neartrain demo gcn``: host drivers of the simulated blocks, and the two sessions.

:class:`AggregationDevice` drives an ``aggregation_pipeline`` (B load, packet stream, drain,
counters) and :class:`GemmDevice` a ``tiled_gemm`` (one GEMM: command, A and B element by
element, result rows placed back); the testbench of the pipeline uses the same driver.

The caller (:func:`scripts.demo_gcn.run_demo`) passes a job through :mod:`scripts.sim.channel`
and selects ``gemm_session`` or ``aggregate_session``, which replies with its results. Each
session is skipped when no job is given.
"""

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge, with_timeout

from scripts.sim import channel
from scripts.sim.runner import component_from_env
from scripts.sim.stream import StreamSink, StreamSource, stream_layout
from scripts.sim.tb import ClockedTB

__all__ = ["AggregationDevice", "GemmDevice", "MODE_RUN"]

MODE_RUN = 1  # rtl.aggregate.aggregation_pipeline.Mode.RUN
COUNTERS = ("packet_count", "nonzero_count", "stall_cycles", "header_errors", "range_errors", "bank_errors")
_NS_PER_CYCLE = 10


class AggregationDevice:
    """Host driver of an ``aggregation_pipeline`` under simulation.

    Parameters
    ----------
    dut, component, clock
        The top level, the component it was built from (for the payload layouts), its clock.
    """

    def __init__(self, dut, component, clock):
        self.dut, self.component, self.clock = dut, component, clock
        self.packets = StreamSource(dut, "packets", clock)
        self.loads = StreamSource(dut, "b_load", clock, stream_layout(component, "b_load"))
        self.drained = StreamSink(dut, "drain", clock, stream_layout(component, "drain"))
        self.transfer_cycles = []
        for name in ("drain_start", "clear_start", "relu", "n_rows", "n_cols"):
            getattr(dut, name).value = 0
        self._cycle = 0
        cocotb.start_soon(self._watch_packets())

    @property
    def drivers(self):
        """Every driver, for :meth:`scripts.sim.tb.ClockedTB.reset_mid_transfer`."""
        return [self.packets, self.loads, self.drained]

    async def _watch_packets(self):
        valid, ready = self.dut.packets__valid, self.dut.packets__ready
        while True:
            await RisingEdge(self.clock)
            self._cycle += 1
            if valid.value and ready.value:
                self.transfer_cycles.append(self._cycle)

    def configure(self, n_rows, n_cols):
        """Set the rows of OUT and of B in use."""
        self.dut.n_rows.value = int(n_rows)
        self.dut.n_cols.value = int(n_cols)

    def counters(self):
        return {name: int(getattr(self.dut, name).value) for name in COUNTERS}

    async def wait_run(self, limit=1_000_000):
        """Wait until the pipeline takes packets (after a reset's or a clear's sweep)."""
        for _ in range(limit):
            if int(self.dut.mode.value) == MODE_RUN:
                return
            await RisingEdge(self.clock)
        raise AssertionError(f"the pipeline did not reach RUN in {limit} cycles "
                             f"(mode {int(self.dut.mode.value)})")

    async def load_b(self, rows_bits, start=0):
        """Write B rows ``start ..`` (uint32 raw bits, one row per transfer) and wait until sent."""
        self.loads.send_many({"addr": start + index, "data": [int(x) for x in row]}
                             for index, row in enumerate(np.asarray(rows_bits, np.uint32)))
        await self.loads.wait_idle()

    async def send(self, words):
        """Send encoded packets and wait until the pipeline has taken them all."""
        self.packets.send_many(words)
        await self.packets.wait_idle()

    async def strobe(self, name, **levels):
        """Pulse ``drain_start`` or ``clear_start`` for one cycle in RUN, with other inputs set."""
        await self.wait_run()
        for level, value in levels.items():
            getattr(self.dut, level).value = int(value)
        getattr(self.dut, name).value = 1
        await RisingEdge(self.clock)
        getattr(self.dut, name).value = 0

    async def drain(self, n_rows, *, relu=False, timeout_cycles=None):
        """Drain OUT (``n_rows`` physical rows, in order) as a uint32 array; OUT is zero afterwards."""
        await self.strobe("drain_start", relu=relu)
        rows = []

        async def collect():
            while len(rows) < n_rows:
                item = await self.drained.recv()
                rows.append(item)
                if item["last"]:
                    break

        budget = timeout_cycles or 50 * (n_rows + 1000)
        await with_timeout(collect(), budget * _NS_PER_CYCLE, "ns")
        assert [item["row"] for item in rows] == list(range(n_rows)), "drain rows out of order or missing"
        lasts = [item["last"] for item in rows]
        assert lasts == [0] * (n_rows - 1) + [1] if n_rows else not lasts, "misplaced last"
        await self.wait_run()
        assert self.drained.empty(), "rows after the one marked last"
        return np.array([item["data"] for item in rows], dtype=np.uint32).reshape(n_rows, -1)

    async def clear(self):
        """Zero OUT and the counters (``clear_start``) and wait for the sweep."""
        await self.strobe("clear_start")
        await RisingEdge(self.clock)
        await self.wait_run()


class GemmDevice:
    """Host driver of a ``tiled_gemm`` (output stationary): one GEMM at a time, binary32 raw bits."""

    def __init__(self, dut, component, clock, params):
        self.dut, self.component, self.clock = dut, component, clock
        self.rows, self.cols = params["rows"], params["cols"]
        self.tile_m = self.rows * params.get("slots", 1)
        self.sources = {port: StreamSource(dut, port, clock, stream_layout(component, port))
                        for port in ("cmd", "a", "b")}
        self.c = StreamSink(dut, "c", clock, stream_layout(component, "c"))

    async def gemm(self, a_bits, b_bits):
        """``A B`` for uint32 ``A (M x K)`` and ``B (K x N)``; returns uint32 ``(M x N)``."""
        m_size, k_size = a_bits.shape
        n_size = b_bits.shape[1]
        self.sources["cmd"].send_nowait({"m": m_size, "k": k_size, "n": n_size})
        self.sources["a"].send_many(int(x) for x in a_bits.ravel())
        self.sources["b"].send_many(int(x) for x in b_bits.ravel())
        rows = []

        async def collect():
            while True:
                item = await self.c.recv()
                rows.append(item["data"])
                if item["last"]:
                    return

        budget = 20 * (a_bits.size + b_bits.size + m_size * n_size) + 10 * m_size * k_size * n_size + 100_000
        await with_timeout(collect(), budget * _NS_PER_CYCLE, "ns")
        while int(self.dut.busy.value):
            await RisingEdge(self.clock)
        order = [(m, n0) for m0 in range(0, m_size, self.tile_m) for n0 in range(0, n_size, self.cols)
                 for m in range(m0, min(m0 + self.tile_m, m_size))]
        assert len(order) == len(rows), f"{len(rows)} result rows for {len(order)}"
        out = np.zeros((m_size, -(-n_size // self.cols) * self.cols), np.uint32)
        for (m, n0), row in zip(order, rows, strict=True):
            out[m, n0:n0 + self.cols] = row
        return out[:, :n_size]


@cocotb.test(skip=not channel.has_job())
async def gemm_session(dut):
    """Every GEMM of the job (``{"gemms": [(a_bits, b_bits), ...], "params": {...}}``), in order."""
    job = channel.job()
    tb = ClockedTB(dut)
    device = GemmDevice(dut, component_from_env(), tb.clock, job["params"])
    await tb.reset()
    results = []
    for a_bits, b_bits in job["gemms"]:
        start = tb.cycle
        results.append({"c": await device.gemm(a_bits, b_bits), "cycles": tb.cycle - start,
                        "compute_cycles": int(dut.cycles.value)})
    channel.reply(results)


@cocotb.test(skip=not channel.has_job())
async def aggregate_session(dut):
    """One aggregation: load B, stream the packets, drain (``{"b", "words", "n_rows", "relu"}``)."""
    job = channel.job()
    tb = ClockedTB(dut)
    device = AggregationDevice(dut, component_from_env(), tb.clock)
    await tb.reset()
    device.configure(job["n_rows"], len(job["b"]))
    await device.wait_run()
    await device.load_b(job["b"])
    start = tb.cycle
    await device.send(job["words"])
    out = await device.drain(job["n_rows"], relu=job["relu"])
    cycles = device.transfer_cycles
    result = {"out": out, "counters": device.counters(), "cycles": tb.cycle - start,
              "stream_cycles": cycles[-1] - cycles[0] + 1 if cycles else 0}
    channel.reply(result)
