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
from testbenches import knobs
from testbenches.harness import component_from_env, params_from_env
from testbenches.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from testbenches.systolic.cocotb_os_array import random_accumulator, random_matrix, signed_zero_operands
from testbenches.tb import ClockedTB, Scoreboard

DEFAULT_GEMMS = 4


class TB(ClockedTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params_from_env()
        self.rows, self.cols = self.params["rows"], self.params["cols"]
        self.element = self.params["element"]
        self.accumulate = self.params.get("accumulate", False)
        ports = ("cmd", "w", "a", "d") if self.accumulate else ("cmd", "w", "a")
        self.sources = {port: StreamSource(dut, port, self.clock, stream_layout(self.component, port))
                        for port in ports}
        self.c = StreamSink(dut, "c", self.clock, stream_layout(self.component, "c"))
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

    async def run_gemm(self, a, b, d=None, *, exact_cycles):
        m_size, k_size = a.shape
        n_size = b.shape[1]
        rows, cols = self.rows, self.cols
        k_pad, n_pad = -(-k_size // rows) * rows, -(-n_size // cols) * cols
        a_pad = np.zeros((m_size, k_pad), a.dtype)
        a_pad[:, :k_size] = a
        b_pad = np.zeros((k_pad, n_pad), b.dtype)
        b_pad[:k_size, :n_size] = b
        d_pad = None if d is None else np.zeros((m_size, n_pad), d.dtype)
        if d is not None:
            d_pad[:, :n_size] = d
        # Rows past K pass sums through untouched, so the reference reduces over K, not the padding.
        expected = gemm(a, b_pad[:k_size], d_pad, element=self.element).view(np.uint32)
        scoreboard = Scoreboard(f"ws_array {self.params} GEMM {a.shape} x {b.shape}")
        w_items, a_items, d_items = [], [], []
        for n0 in range(0, n_pad, cols):
            for k0 in range(0, k_pad, rows):
                # Weight rows go in last row first; rows past K are padding the array ignores.
                w_items += [[int(x) for x in b_pad[k0 + rows - 1 - j, n0:n0 + cols]] for j in range(rows)]
                a_items += [[int(x) for x in a_pad[m, k0:k0 + rows]] for m in range(m_size)]
            if d is not None:
                d_items += [[int(x) for x in d_pad[m, n0:n0 + cols]] for m in range(m_size)]
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
        model = gemm_cycles(m_size, k_size, n_size, rows=rows, cols=cols, dataflow="weight_stationary",
                            mac_latency=self.component.mac_latency)
        measured = self.last_c - self.first_w + 1
        reported = int(self.dut.cycles.value)
        assert reported == measured, f"cycles port {reported} != measured {measured}; {knobs.describe()}"
        if exact_cycles:
            assert measured == model, (f"GEMM {a.shape} x {b.shape}: {measured} cycles, model {model}; "
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
