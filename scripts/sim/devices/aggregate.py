"""Host devices of the aggregation family and of the GEMM that combines its features.

:class:`AggregationDevice` drives an ``aggregation_pipeline`` (B load, packet stream, drain,
counters) and :class:`GemmDevice` a ``tiled_gemm`` (one GEMM: command, A, B (and D) element by
element, result rows placed back in either dataflow's order). Their tests, ``neartrain demo
gcn`` and the benches use these drivers; :func:`run_gemms` and :func:`run_aggregation` run
them in a simulation (sessions ``aggregate.gemm`` and ``aggregate.aggregation``).
"""

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout

from scripts.sim import channel
from scripts.sim.runner import component_from_env
from scripts.sim.stream import StreamSink, StreamSource, stream_layout
from scripts.sim.tb import ClockedTB

__all__ = ["AggregationDevice", "GemmDevice", "MODE_RUN", "SESSIONS", "run_gemms", "run_aggregation"]

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
    """Host driver of a ``tiled_gemm``: one GEMM at a time, raw bits in and out.

    Parameters
    ----------
    dut, component, clock
        The top level, the component it was built from (for the payload layouts), its clock.
    params : dict
        Its parameters (``rows``, ``cols``, and ``slots``, ``dataflow``, ``accumulate`` if set).
    """

    def __init__(self, dut, component, clock, params):
        self.dut, self.component, self.clock = dut, component, clock
        self.rows, self.cols = params["rows"], params["cols"]
        self.tile_m = self.rows * params.get("slots", 1)
        self.dataflow = params.get("dataflow", "output_stationary")
        ports = ("cmd", "a", "b", "d") if params.get("accumulate", False) else ("cmd", "a", "b")
        self.sources = {port: StreamSource(dut, port, clock, stream_layout(component, port))
                        for port in ports}
        self.c = StreamSink(dut, "c", clock, stream_layout(component, "c"))

    @property
    def drivers(self):
        """Every driver, for :meth:`scripts.sim.tb.ClockedTB.reset_mid_transfer`."""
        return [*self.sources.values(), self.c]

    def order(self, m_size, n_size):
        """``(row, first column)`` of each result row, in the order they leave: output stationary,
        tiles m-outer and n-inner with each tile's rows in order; weight stationary, per n-tile,
        every row."""
        if self.dataflow == "output_stationary":
            return [(m, n0) for m0 in range(0, m_size, self.tile_m) for n0 in range(0, n_size, self.cols)
                    for m in range(m0, min(m0 + self.tile_m, m_size))]
        return [(m, n0) for n0 in range(0, n_size, self.cols) for m in range(m_size)]

    async def gemm(self, a_bits, b_bits, d_bits=None):
        """``A B (+ D)`` for raw bits ``A (M x K)``, ``B (K x N)``, ``D (M x N)``; a uint32 ``(M x N)``.

        Waits until the block is idle again; raises AssertionError on extra, missing or misplaced
        rows or on a padding lane that is not zero."""
        m_size, k_size = a_bits.shape
        n_size = b_bits.shape[1]
        self.sources["cmd"].send_nowait({"m": m_size, "k": k_size, "n": n_size})
        self.sources["a"].send_many(int(x) for x in a_bits.ravel())
        self.sources["b"].send_many(int(x) for x in b_bits.ravel())
        if d_bits is not None:
            self.sources["d"].send_many(int(x) for x in d_bits.ravel())
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
        await ClockCycles(self.clock, 2)
        assert self.c.empty(), "rows after the one marked last"
        order = self.order(m_size, n_size)
        assert len(order) == len(rows), f"{len(rows)} result rows for {len(order)}"
        out = np.zeros((m_size, -(-n_size // self.cols) * self.cols), np.uint32)
        for (m, n0), row in zip(order, rows, strict=True):
            out[m, n0:n0 + self.cols] = row
        assert not out[:, n_size:].any(), "padding lanes not zero"
        return out[:, :n_size]


async def gemm_session(dut, job):
    """Every GEMM of ``job`` (``[(a_bits, b_bits), ...]``), in order: ``c``, ``cycles`` (from the
    command to idle) and ``compute_cycles`` (the block's counter) of each."""
    tb = ClockedTB(dut)
    device = GemmDevice(dut, component_from_env(), tb.clock, channel.params())
    await tb.reset()
    results = []
    for a_bits, b_bits in job:
        start = tb.cycle
        results.append({"c": await device.gemm(a_bits, b_bits), "cycles": tb.cycle - start,
                        "compute_cycles": int(dut.cycles.value)})
    return results


async def aggregate_session(dut, job):
    """One aggregation: load B, stream the packets, drain (``{"b", "words", "n_rows", "relu"}``)."""
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
    return {"out": out, "counters": device.counters(), "cycles": tb.cycle - start,
            "stream_cycles": cycles[-1] - cycles[0] + 1 if cycles else 0}


SESSIONS = {"gemm": gemm_session, "aggregation": aggregate_session}


# -------------------------------------------------------------------- synchronous API
def run_gemms(params, gemms):
    """Run ``gemms`` (``[(a_bits, b_bits), ...]``, uint32) on one ``tiled_gemm`` build of ``params``.

    Returns the list of :func:`gemm_session`'s results, one per GEMM."""
    from scripts.sim.devices import run_session

    return run_session("tiled_gemm", "aggregate.gemm", list(gemms), params=params)


def run_aggregation(params, b_bits, words, n_rows, *, relu=False):
    """One aggregation on an ``aggregation_pipeline`` build of ``params``: B rows ``b_bits``
    (uint32), the encoded packet ``words``, ``n_rows`` rows drained. Returns ``out`` (uint32),
    ``counters``, ``cycles`` and ``stream_cycles`` (first to last packet transfer)."""
    from scripts.sim.devices import run_session

    return run_session("aggregation_pipeline", "aggregate.aggregation",
                       {"b": b_bits, "words": words, "n_rows": n_rows, "relu": relu}, params=params)
