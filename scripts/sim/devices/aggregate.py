"""Host devices of the aggregation family and of the GEMM that combines its features.

:class:`AggregationDevice` drives an ``aggregation_pipeline`` (B load, packet stream, drain,
counters) and :class:`GemmDevice` a ``tiled_gemm`` (one GEMM: command, A, B (and D) element by
element, result rows placed back in either dataflow's order). Their tests, ``neartrain demo
gcn`` and the benches use these drivers; :func:`run_gemms` and :func:`run_aggregation` run
them in a simulation (sessions ``aggregate.gemm`` and ``aggregate.aggregation``).

:class:`AggregationTB` adds to the pipeline's device stall patterns, the spawner and the check of
every job's OUT bits, counters and stall cycles against the golden; the pipeline's tests use it,
and :func:`graphs_session` (session ``aggregate.graphs``, run by :func:`run_graphs`) streams the
bench's whole graphs through it.
"""

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout

from golden.aggregate import PacketFormat, execute, issue_cycles, live_slots, spawn
from golden.systolic.block_fp import to_block_fp
from scripts.sim import channel, knobs
from scripts.sim.runner import component_from_env, resolved_params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB

__all__ = ["AggregationDevice", "GemmDevice", "AggregationTB", "special_features", "MODE_RUN", "SESSIONS",
           "run_gemms", "run_aggregation", "run_graphs"]

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
        Its parameters (``rows``, ``cols``, and ``slots``, ``dataflow``, ``accumulate`` if set;
        with ``element="block_fp"``, ``block`` and ``mantissa_bits``: A and B are then binary32
        bits that the device encodes along K, as the block expects them).
    """

    def __init__(self, dut, component, clock, params):
        self.dut, self.component, self.clock = dut, component, clock
        self.rows, self.cols = params["rows"], params["cols"]
        self.block_format = None
        if params.get("element") == "block_fp":
            self.block_format = {"block": params["block"], "mantissa_bits": params["mantissa_bits"]}
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

    def encode(self, bits, axis):
        """The transfers of ``bits`` (binary32, row-major) on ``a`` (``axis=1``) or ``b``
        (``axis=0``): the words themselves, or block floating point ``{mantissa, exponent}``, the
        exponent of an element being its block's shared exponent."""
        if self.block_format is None:
            return [int(x) for x in bits.ravel()]
        exponents, mantissas = to_block_fp(bits, **self.block_format, axis=axis)
        exponents = np.repeat(exponents, self.block_format["block"], axis=axis)
        exponents = exponents.take(np.arange(bits.shape[axis]), axis=axis)
        return [{"mantissa": int(m), "exponent": int(e)}
                for e, m in zip(exponents.ravel(), mantissas.ravel(), strict=True)]

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
        self.sources["a"].send_many(self.encode(a_bits, 1))
        self.sources["b"].send_many(self.encode(b_bits, 0))
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


# ---------------------------------------------------------------- the checked testbench
def special_features(rng, rows, features, *, specials=True):
    """Random binary32 B rows; with ``specials``, some NaN, infinities, subnormals and signed zeros."""
    values = (rng.standard_normal((rows, features)) * 10.0 ** rng.integers(-3, 4, (rows, features)))
    values = values.astype(np.float32)
    if specials and rows * features >= 8:
        picks = rng.choice(rows * features, 6, replace=False)
        flat = values.reshape(-1)
        flat[picks] = np.array([np.nan, np.inf, -np.inf, 1e-40, -0.0, 3e38], np.float32)
    return values


class AggregationTB(ClockedTB):
    """Testbench of one ``aggregation_pipeline`` build: :class:`AggregationDevice` with stall
    patterns, the spawner, and every job checked against :func:`golden.aggregate.execute`."""

    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = resolved_params_from_env()
        self.lanes, self.features = self.params["lanes"], self.params["features"]
        self.weighted, self.b_banks = self.params["weighted"], self.params["b_banks"]
        self.capacity_rows, self.capacity_cols = self.params["rows"], self.params["cols"]
        self.format = PacketFormat(self.lanes, self.params["row_bits"], self.params["col_bits"],
                                   self.weighted)
        self.device = AggregationDevice(dut, self.component, self.clock)
        assert self.component.hazard_window == _golden_window(), "RTL and golden hazard windows differ"

    @classmethod
    async def ready(cls, dut, seed, stall=None):
        """A reset testbench, stalled by :meth:`stall` with ``stall`` = ``(idle, backpressure, salt)``
        where given, and ``knobs.rng(seed)``."""
        tb = cls(dut)
        if stall is not None:
            tb.stall(*stall)
        await tb.reset()
        return tb, knobs.rng(seed)

    def stall(self, idle, backpressure, salt):
        """Random valid gaps on both input streams and random backpressure on ``drain`` (30 %)."""
        self.device.packets.set_pause_generator(random_pauses(knobs.rng(salt + 1), 0.3) if idle else never())
        self.device.loads.set_pause_generator(random_pauses(knobs.rng(salt + 2), 0.3) if idle else never())
        self.device.drained.set_backpressure_generator(
            random_pauses(knobs.rng(salt + 3), 0.3) if backpressure else never())

    def spawn(self, adjacency):
        """The spawner's packets for this build (lanes, weighted, B banks, hazard window)."""
        return spawn(adjacency, lanes=self.lanes, weighted=self.weighted, b_banks=self.b_banks,
                     window=self.component.hazard_window)

    async def run_job(self, packets, features, n_rows, *, relu=False, what="job", check_stalls=False):
        """Load B, stream ``packets``, drain ``n_rows`` rows; check bits and counters against the golden.

        Returns the drained OUT (uint32) and the counters (deltas over this job).
        """
        before = self.device.counters()
        self.device.configure(n_rows, len(features))
        await self.device.wait_run()
        await self.device.load_b(features.view(np.uint32))
        self.device.transfer_cycles.clear()
        await self.device.send(self.format.encode(packets))
        out = await self.device.drain(n_rows, relu=relu)
        after = self.device.counters()
        counters = {name: (after[name] - before[name]) % (1 << 32) for name in after}
        expected, golden_counters = execute(packets, features, n_rows=n_rows, weighted=self.weighted,
                                            b_banks=self.b_banks)
        if relu:
            expected = np.where(np.signbit(expected), np.float32(0), expected)
        mismatch = np.argwhere(out != expected.view(np.uint32))
        if mismatch.size:
            row, feature = mismatch[0]
            raise AssertionError(
                f"{what} {self.params}: OUT[{row}, {feature}] = {out[row, feature]:#010x}, expected "
                f"{expected.view(np.uint32)[row, feature]:#010x} ({len(mismatch)} mismatches); "
                f"{knobs.describe()}")
        for name in ("packets", "nonzeros", "header_errors", "range_errors", "bank_errors"):
            register = {"packets": "packet_count", "nonzeros": "nonzero_count"}.get(name, name)
            assert counters[register] == getattr(golden_counters, name), (
                f"{what}: {register} = {counters[register]}, golden {getattr(golden_counters, name)}; "
                f"{knobs.describe()}")
        live, _ = live_slots(packets, n_rows=n_rows, n_cols=len(features), weighted=self.weighted,
                             b_banks=self.b_banks)
        times = issue_cycles(packets, window=self.component.hazard_window, live=live)
        model_stalls = int(times[-1] + 1 - len(packets)) if len(packets) else 0
        if check_stalls:
            assert counters["stall_cycles"] == model_stalls, (
                f"{what}: {counters['stall_cycles']} stall cycles, cycle model {model_stalls}; "
                f"{knobs.describe()}")
        else:
            assert counters["stall_cycles"] <= model_stalls, (counters, model_stalls)
        return out, counters


def _golden_window():
    from golden.aggregate import HAZARD_WINDOW

    return HAZARD_WINDOW


async def graphs_session(dut, job):
    """The bench's packet streams (whole graphs: ``[{"name", "packets", "n_rows", "n_cols", ...}]``),
    bits, counters and stalls checked on each; returns each one's ``cycles`` (first to last packet
    transfer), ``stall_cycles`` and the keys ``name``, ``packer``, ``nnz`` and ``model_cycles`` of its job."""
    tb, rng = await AggregationTB.ready(dut, 60)
    results = []
    for item in job:
        packets = item["packets"]
        features = special_features(rng, item["n_cols"], tb.features, specials=False)
        _, counters = await tb.run_job(packets, features, item["n_rows"], what=item["name"],
                                       check_stalls=True)
        first, last = tb.device.transfer_cycles[0], tb.device.transfer_cycles[-1]
        results.append({key: item[key] for key in ("name", "packer", "nnz", "model_cycles")}
                       | {"packets": len(packets), "cycles": last - first + 1, "bit_exact": True,
                          "stall_cycles": counters["stall_cycles"]})
        dut._log.info("%s", results[-1])
    return results


SESSIONS = {"gemm": gemm_session, "aggregation": aggregate_session, "graphs": graphs_session}


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


def run_graphs(params, jobs):
    """:func:`graphs_session` of ``jobs`` on one ``aggregation_pipeline`` build of ``params``."""
    from scripts.sim.devices import run_session

    return run_session("aggregation_pipeline", "aggregate.graphs", list(jobs), params=params)
