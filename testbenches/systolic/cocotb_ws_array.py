"""cocotb tests of :class:`rtl.systolic.ws_array.WeightStationaryArray` against golden.systolic.

Each GEMM is cut into the array's weight tiles as the block's docstring says and streamed in;
every result row is checked bit for bit against :func:`golden.systolic.gemm`. Without stalls
the cycles from the first ``w`` transfer to the last ``c`` transfer must equal
``gemm_cycles(..., dataflow="weight_stationary")``.
"""

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge, with_timeout

from golden.systolic import gemm, gemm_cycles
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, Scoreboard
from testbenches.systolic.cocotb_os_array import random_accumulator, random_matrix, signed_zero_operands
from testbenches.systolic.commands import bad_commands, reject_then_run, reset_then_clean, size_limits
from testbenches.systolic.schedule import array_schedule

DEFAULT_GEMMS = 4


class TB(ClockedTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params_from_env()
        self.rows, self.cols = self.params["rows"], self.params["cols"]
        self.element = self.params.get("element")
        self.accumulate = self.params.get("accumulate", False)
        ports = ("cmd", "w", "a", "d") if self.accumulate else ("cmd", "w", "a")
        self.sources = {port: StreamSource(dut, port, self.clock, stream_layout(self.component, port))
                        for port in ports}
        self.c = StreamSink(dut, "c", self.clock, stream_layout(self.component, "c"))
        self.drivers = [*self.sources.values(), self.c]
        self.first_w = self.last_c = None
        cocotb.start_soon(self._stamp())

    async def _stamp(self):
        dut, edge = self.dut, 0
        while True:
            await RisingEdge(self.clock)
            edge += 1
            if dut.w__valid.value and dut.w__ready.value and self.first_w is None:
                self.first_w = edge
            if dut.c__valid.value and dut.c__ready.value:
                self.last_c = edge

    def stall(self, idle, backpressure, salt):
        for index, port in enumerate(("w", "a", "d")):
            if port in self.sources:
                self.sources[port].set_pause_generator(
                    random_pauses(knobs.rng(salt + 10 + index), 0.3) if idle else never())
        self.c.set_backpressure_generator(
            random_pauses(knobs.rng(salt + 20), 0.3) if backpressure else never())

    def model_cycles(self, m_size, k_size, n_size):
        """``gemm_cycles`` of one GEMM on this array, with the documented latency."""
        return gemm_cycles(m_size, k_size, n_size, rows=self.rows, cols=self.cols,
                           dataflow="weight_stationary", **array_schedule(self.element, "weight_stationary"))

    async def run_gemm(self, a, b, d=None, *, exact_cycles):
        """One GEMM of ``element`` values: bits against gemm, cycles against gemm_cycles."""
        # Rows past K pass sums through untouched, so the reference reduces over K, not the padding.
        n_pad = -(-b.shape[1] // self.cols) * self.cols
        b_cols = np.zeros((b.shape[0], n_pad), b.dtype)
        b_cols[:, :b.shape[1]] = b
        d_cols = None
        if d is not None:
            d_cols = np.zeros((d.shape[0], n_pad), d.dtype)
            d_cols[:, :d.shape[1]] = d
        expected = gemm(a, b_cols, d_cols, element=self.element).view(np.uint32)
        model = self.model_cycles(a.shape[0], a.shape[1], b.shape[1])
        return await self.run_job(a.tolist(), b.tolist(), None if d is None else d.tolist(), expected, model,
                                  padding=0, exact_cycles=exact_cycles)

    async def run_job(self, a, b, d, expected, model, *, padding, exact_cycles):
        """Stream one GEMM's weight tiles, check every result row and the cycle count.

        ``a`` (M x K), ``b`` (K x N) and ``d`` (M x N, or None) are nested lists of transfer lane
        values; ``padding`` fills the operand lanes past K and N (0 fills D's). ``expected``
        holds the result bits of the GEMM with N padded to whole column tiles (the array
        computes those columns too).
        """
        m_size, k_size, n_size = len(a), len(b), len(b[0])
        rows, cols = self.rows, self.cols
        k_pad, n_pad = -(-k_size // rows) * rows, -(-n_size // cols) * cols

        def padded(matrix, height, width, fill):
            return [[matrix[i][j] if i < len(matrix) and j < len(matrix[0]) else fill for j in range(width)]
                    for i in range(height)]

        a_pad, b_pad = padded(a, m_size, k_pad, padding), padded(b, k_pad, n_pad, padding)
        d_pad = None if d is None else padded(d, m_size, n_pad, 0)
        scoreboard = Scoreboard(f"{self.component.__class__.__name__} {self.params} GEMM "
                                f"{m_size}x{k_size}x{n_size}")
        w_items, a_items, d_items = [], [], []
        for n0 in range(0, n_pad, cols):
            for k0 in range(0, k_pad, rows):
                # Weight rows go in last row first; rows past K are padding the array ignores.
                w_items += [b_pad[k0 + rows - 1 - j][n0:n0 + cols] for j in range(rows)]
                a_items += [a_pad[m][k0:k0 + rows] for m in range(m_size)]
            if d is not None:
                d_items += [d_pad[m][n0:n0 + cols] for m in range(m_size)]
            for m in range(m_size):
                scoreboard.expect([int(x) for x in expected[m, n0:n0 + cols]], {"row": m, "n0": n0})
        self.first_w = self.last_c = None
        self.sources["cmd"].send_nowait({"m": m_size, "k": k_size, "n_tiles": n_pad // cols})
        self.sources["w"].send_many(w_items)
        self.sources["a"].send_many(a_items)
        if d is not None:
            self.sources["d"].send_many(d_items)

        async def drain():
            for _ in range(m_size * n_pad // cols):
                scoreboard.check(await self.c.recv())

        await with_timeout(drain(), 50 * (len(w_items) + len(a_items)) * 10 + 20000, "ns")
        await self.cycles(5)
        scoreboard.check_complete()
        assert self.c.empty(), f"extra result rows after the GEMM; {knobs.describe()}"
        measured = self.last_c - self.first_w + 1
        reported = int(self.dut.cycles.value)
        assert reported == measured, f"cycles port {reported} != measured {measured}; {knobs.describe()}"
        if exact_cycles:
            assert measured == model, (f"GEMM {m_size}x{k_size}x{n_size}: {measured} cycles, model {model}; "
                                       f"{knobs.describe()}")
        else:
            assert measured >= model
        return measured, model


async def run_test(dut, *, idle, backpressure, specials):
    tb = TB(dut)
    salt = 4 * specials + 2 * idle + backpressure
    tb.stall(idle, backpressure, salt)
    await tb.reset()
    rng = knobs.rng(salt)
    fraction = 0.25 if specials else 0.0
    fixed = [(1, 1, 1), (1, tb.rows + 1, tb.cols), (2 * tb.rows + 3, 2 * tb.rows, 2 * tb.cols + 1)]
    randoms = [(int(rng.integers(1, 20)), int(rng.integers(1, 3 * tb.rows + 2)),
                int(rng.integers(1, 3 * tb.cols))) for _ in range(knobs.vectors(DEFAULT_GEMMS))]
    for m_size, k_size, n_size in fixed + randoms:
        a = random_matrix(rng, (m_size, k_size), tb.element, fraction)
        b = random_matrix(rng, (k_size, n_size), tb.element, fraction)
        d = random_accumulator(rng, (m_size, n_size), tb.element, fraction) if tb.accumulate else None
        measured, model = await tb.run_gemm(a, b, d, exact_cycles=not (idle or backpressure))
        dut._log.info("GEMM %dx%dx%d: %d cycles (model %d)", m_size, k_size, n_size, measured, model)
    if specials:  # K = rows + 1: a ragged last k-tile whose rows past K must leave -0.0 alone
        shape = (5, tb.rows + 1, tb.cols + 1)
        await tb.run_gemm(*signed_zero_operands(rng, shape, tb.element, tb.accumulate),
                          exact_cycles=not (idle or backpressure))


@cocotb.test()
async def gemm_bits_and_cycles(dut):
    """Random GEMMs (ragged k-tiles and n-tiles): bits equal gemm, cycles equal gemm_cycles."""
    await run_test(dut, idle=False, backpressure=False, specials=False)


@cocotb.test()
async def special_values(dut):
    """NaN, infinities, subnormals and signed zeros (a -0.0 D must survive rows past K)."""
    await run_test(dut, idle=False, backpressure=False, specials=True)


@cocotb.test()
async def gemm_under_stalls(dut):
    """Random gaps on every input stream and random backpressure on c: bits still exact."""
    await run_test(dut, idle=True, backpressure=True, specials=True)


@cocotb.test()
async def bad_commands_rejected(dut):
    """m, k or n_tiles 0 or past its maximum: consumed, cmd_error, nothing runs; a good GEMM clears it."""
    tb = TB(dut)
    rng = knobs.rng(99)
    a = random_matrix(rng, (3, tb.rows + 1), tb.element)
    b = random_matrix(rng, (tb.rows + 1, tb.cols), tb.element)
    d = random_accumulator(rng, (3, tb.cols), tb.element) if tb.accumulate else None
    await reject_then_run(tb, tb.sources["cmd"], bad_ws_commands(),
                          lambda: tb.run_gemm(a, b, d, exact_cycles=True))


def bad_ws_commands():
    """Every bad size of a weight-stationary array's command."""
    return bad_commands({"m": 1, "k": 1, "n_tiles": 1},
                        size_limits({"m": "max_m", "k": "max_k", "n_tiles": "max_tiles"}))


async def reset_mid_job(tb, when, run_gemm, operands):
    """Reset at a random cycle while a GEMM of several k-tiles and n-tiles streams in (or its rows
    stream out) under random stalls; then nothing comes out and a clean GEMM is exact in bits and
    cycles. ``run_gemm(a, b, d, exact_cycles=)`` and ``operands(rng, shape)`` are the bench's."""
    salt = 500 + (when == "outputs")
    rng = knobs.rng(salt + 10)
    m_size, k_size, n_size = 5, 2 * tb.rows + 1, 2 * tb.cols
    interrupted = operands(rng, (m_size, k_size, n_size))
    clean = operands(rng, (3, tb.rows + 1, tb.cols + 1))
    # 3 k-tiles x 2 n-tiles: M rows of A per tile in, M rows of C per n-tile out.
    watch, transfers = (tb.sources["a"], 6 * m_size) if when == "inputs" else (tb.c, 2 * m_size)
    await reset_then_clean(
        tb, interrupted=lambda: run_gemm(*interrupted, exact_cycles=False),
        clean=lambda: run_gemm(*clean, exact_cycles=True), drivers=tb.drivers, sink=tb.c, watch=watch,
        window=transfers - 2, quiet=tb.model_cycles(m_size, k_size, n_size) + 20, salt=salt)


@cocotb.test()
@cocotb.parametrize(when=["inputs", "outputs"])
async def reset_mid_gemm(dut, when):
    """Reset in the middle of a GEMM under random stalls: nothing leaks, a clean GEMM is exact."""
    tb = TB(dut)

    def operands(rng, shape):
        m_size, k_size, n_size = shape
        a = random_matrix(rng, (m_size, k_size), tb.element, 0.25)
        b = random_matrix(rng, (k_size, n_size), tb.element, 0.25)
        d = random_accumulator(rng, (m_size, n_size), tb.element, 0.25) if tb.accumulate else None
        return a, b, d

    await reset_mid_job(tb, when, tb.run_gemm, operands)
