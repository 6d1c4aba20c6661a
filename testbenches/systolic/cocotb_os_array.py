"""cocotb tests of :class:`rtl.systolic.os_array.OutputStationaryArray` against golden.systolic.

Also runs :class:`rtl.systolic.tensor_array.TensorArray` (parameter ``tensor`` t): its streams
are those of a ``rows t x cols t`` one-MAC array, so the bench cuts tiles over lanes and asks
``gemm_cycles(..., tensor=t)`` for the count.

Each GEMM is cut into the array's tiles exactly as the block's docstring says, streamed in,
and every result row is checked bit for bit against :func:`golden.systolic.gemm` on the
zero-padded matrices. Without stalls the cycle count, measured here from the first ``a``
transfer to the last ``c`` transfer and reported by the block's ``cycles`` port, must equal
:func:`golden.systolic.gemm_cycles` with the documented latencies (:mod:`.schedule`), never the
block's own latency attributes.
"""

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge, with_timeout

from golden.systolic import gemm, gemm_cycles
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, Scoreboard
from testbenches.systolic.commands import bad_commands, reject_then_run, reset_then_clean, size_limits
from testbenches.systolic.schedule import array_schedule

DEFAULT_GEMMS = 4

# Raw encodings that exercise every special path of the PE: signed zeros, subnormals, the
# smallest and largest normals, infinities, quiet and signaling NaNs, one.
SPECIALS = {
    "f16": [0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x3C00],
    "bf16": [0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x3F80,
             0x1F80, 0x2000],
    "f32": [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000,
            0xFF800000, 0x7FC00000, 0x7F800001, 0x3F800000, 0x1F800000, 0x20000000],
}


def random_matrix(rng, shape, element, specials=0.0):
    """Random raw operands of ``element``; a fraction ``specials`` drawn from :data:`SPECIALS`."""
    if element == "int8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    values = rng.standard_normal(shape).astype(np.float32) * np.float32(4)
    if element == "f16":
        raw = values.astype(np.float16).view(np.uint16)
    elif element == "bf16":
        raw = (values.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    else:
        raw = values.view(np.uint32)
    if specials:
        mask = rng.random(shape) < specials
        picks = rng.choice(np.asarray(SPECIALS[element], dtype=raw.dtype), size=shape)
        raw = np.where(mask, picks, raw)
    return raw


def random_accumulator(rng, shape, element, specials=0.0):
    if element == "int8":
        return rng.integers(-(2**31), 2**31, shape, dtype=np.int64).astype(np.int32)
    return random_matrix(rng, shape, "f32", specials)


def signed_zero_operands(rng, shape, element, accumulate):
    """A GEMM of signed zeros: D = -0.0, B = -0.0, each row of A all +0.0 or all -0.0.

    Rows of A at +0.0 give -0.0 products, so their sums must stay -0.0 through every step; a PE
    that adds a +0.0 anywhere (a padding slot, a row past K) turns them into +0.0.
    """
    m_size, k_size, n_size = shape
    if element == "int8":
        zeros = np.zeros((m_size, n_size), np.int32) if accumulate else None
        return np.zeros((m_size, k_size), np.int8), np.zeros((k_size, n_size), np.int8), zeros
    dtype, sign = (np.uint32, 0x80000000) if element == "f32" else (np.uint16, 0x8000)
    a = np.repeat(rng.integers(0, 2, (m_size, 1)) * sign, k_size, axis=1).astype(dtype)
    b = np.full((k_size, n_size), sign, dtype)
    d = np.full((m_size, n_size), 0x80000000, np.uint32) if accumulate else None
    return a, b, d


def tile_streams(a, b, d, *, rows, cols, slots):
    """Cut a GEMM into the array's transfers. Returns (tiles, a, b, d, expected-row shapes)."""
    m_size, k_size = a.shape
    n_size = b.shape[1]
    tile_m, tile_n = rows * slots, cols
    m_pad, n_pad = -(-m_size // tile_m) * tile_m, -(-n_size // tile_n) * tile_n
    a_pad = np.zeros((m_pad, k_size), a.dtype)
    a_pad[:m_size] = a
    b_pad = np.zeros((k_size, n_pad), b.dtype)
    b_pad[:, :n_size] = b
    d_pad = None
    if d is not None:
        d_pad = np.zeros((m_pad, n_pad), d.dtype)
        d_pad[:m_size, :n_size] = d
    a_items, b_items, d_items, origins = [], [], [], []
    for m0 in range(0, m_pad, tile_m):
        for n0 in range(0, n_pad, tile_n):
            origins.append((m0, n0))
            for k in range(k_size):
                for u in range(slots):
                    a_items.append([int(x) for x in a_pad[m0 + u:m0 + tile_m:slots, k]])
                b_items.append([int(x) for x in b_pad[k, n0:n0 + tile_n]])
            if d_pad is not None:
                d_items += [[int(x) for x in row] for row in d_pad[m0:m0 + tile_m, n0:n0 + tile_n]]
    return origins, a_pad, b_pad, d_pad, a_items, b_items, d_items


class TB(ClockedTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params_from_env()
        # Lanes (rows t x cols t) set the stream layout; PEs (rows x cols) the skew of the count.
        self.tensor = self.params.get("tensor", 1)
        self.pe_rows, self.pe_cols = self.params.get("rows", 2), self.params.get("cols", 2)
        self.rows, self.cols = self.pe_rows * self.tensor, self.pe_cols * self.tensor
        self.slots = self.params.get("slots", 1)
        self.element = self.params.get("element", "f16")
        self.accumulate = self.params.get("accumulate", False)
        layout = {port: stream_layout(self.component, port) for port in ("cmd", "a", "b", "c")}
        self.cmd = StreamSource(dut, "cmd", self.clock, layout["cmd"])
        self.a = StreamSource(dut, "a", self.clock, layout["a"])
        self.b = StreamSource(dut, "b", self.clock, layout["b"])
        self.d = (StreamSource(dut, "d", self.clock, stream_layout(self.component, "d"))
                  if self.accumulate else None)
        self.c = StreamSink(dut, "c", self.clock, layout["c"])
        self.drivers = [self.cmd, self.a, self.b] + ([self.d] if self.d else []) + [self.c]
        self.first_a = self.last_c = None
        cocotb.start_soon(self._stamp())

    async def _stamp(self):
        """Cycle stamps of the first ``a`` transfer and the latest ``c`` transfer."""
        dut, edge = self.dut, 0
        while True:
            await RisingEdge(self.clock)
            edge += 1
            if dut.a__valid.value and dut.a__ready.value and self.first_a is None:
                self.first_a = edge
            if dut.c__valid.value and dut.c__ready.value:
                self.last_c = edge

    def stall(self, idle, backpressure, salt):
        sources = [self.a, self.b] + ([self.d] if self.d else [])
        for index, source in enumerate(sources):
            source.set_pause_generator(random_pauses(knobs.rng(salt + 10 + index), 0.3) if idle else never())
        self.c.set_backpressure_generator(
            random_pauses(knobs.rng(salt + 20), 0.3) if backpressure else never())

    def random_gemm(self, rng, shape, fraction=0.0):
        """Random operands ``(a, b, d)`` of an ``M x K x N`` GEMM (``d`` None without ``accumulate``)."""
        m_size, k_size, n_size = shape
        a = random_matrix(rng, (m_size, k_size), self.element, fraction)
        b = random_matrix(rng, (k_size, n_size), self.element, fraction)
        d = random_accumulator(rng, (m_size, n_size), self.element, fraction) if self.accumulate else None
        return a, b, d

    def model_cycles(self, m_size, k_size, n_size):
        """``gemm_cycles`` of one GEMM on this array, with the documented latencies."""
        return gemm_cycles(m_size, k_size, n_size, rows=self.pe_rows, cols=self.pe_cols, tensor=self.tensor,
                           **array_schedule(self.element, slots=self.slots))

    async def run_gemm(self, a, b, d=None, *, exact_cycles):
        """Stream one GEMM through the array and check its bits (and cycles when not stalled)."""
        origins, a_pad, b_pad, d_pad, a_items, b_items, d_items = tile_streams(
            a, b, d, rows=self.rows, cols=self.cols, slots=self.slots)
        expected = gemm(a_pad, b_pad, d_pad, element=self.element)
        model = self.model_cycles(a.shape[0], a.shape[1], b.shape[1])
        return await self.run_job(f"GEMM {a.shape} x {b.shape}", {"k": a.shape[1], "tiles": len(origins)},
                                  origins, expected, a_items, b_items, d_items, model,
                                  exact_cycles=exact_cycles)

    async def run_job(self, label, command, origins, expected, a_items, b_items, d_items, model, *,
                      exact_cycles):
        """Send ``command`` and the tiles' transfers; check every result row against ``expected``
        (the padded C) and the cycle count against ``model`` (exactly when not stalled).

        Shared with the block floating point array's bench, which encodes its operands differently.
        """
        tile_m = self.rows * self.slots
        scoreboard = Scoreboard(f"{self.component.__class__.__name__} {self.params} {label}")
        for m0, n0 in origins:
            for i in range(tile_m):
                row = expected[m0 + i, n0:n0 + self.cols]
                scoreboard.expect([int(x) & 0xFFFFFFFF for x in row], {"row": m0 + i, "n0": n0})
        self.first_a = self.last_c = None
        self.cmd.send_nowait(command)
        self.a.send_many(a_items)
        self.b.send_many(b_items)
        if self.d:
            self.d.send_many(d_items)

        async def drain():
            for _ in range(len(origins) * tile_m):
                scoreboard.check(await self.c.recv())

        bound = 50 * (len(a_items) + len(d_items) + len(origins) * tile_m) + 2000
        await with_timeout(drain(), bound * 10, "ns")
        await self.cycles(5)
        scoreboard.check_complete()
        assert self.c.empty(), f"extra result rows after the GEMM; {knobs.describe()}"
        measured = self.last_c - self.first_a
        reported = int(self.dut.cycles.value)
        assert reported == measured, f"cycles port {reported} != measured {measured}; {knobs.describe()}"
        if exact_cycles:
            assert measured == model, f"{label}: {measured} cycles, model {model}; {knobs.describe()}"
        else:
            assert measured >= model, f"{measured} cycles under stalls < model {model}"
        return measured, model


def shapes(tb, rng, count):
    """1x1x1, a single K=1 tile, tall (several m-tiles), wide (several n-tiles), then random."""
    tile_m = tb.rows * tb.slots
    fixed = [(1, 1, 1), (tile_m, 1, tb.cols), (3 * tile_m - 1, 2, 1), (1, 3, 2 * tb.cols + 1),
             (tile_m, 9, tb.cols)]
    randoms = [tuple(int(x) for x in (rng.integers(1, 2 * tile_m + 2), rng.integers(1, 12),
                                      rng.integers(1, 2 * tb.cols + 2))) for _ in range(count)]
    return fixed + randoms


async def run_test(dut, *, idle, backpressure, specials):
    tb = TB(dut)
    salt = 4 * specials + 2 * idle + backpressure
    tb.stall(idle, backpressure, salt)
    await tb.reset()
    rng = knobs.rng(salt)
    fraction = 0.25 if specials else 0.0
    for m_size, k_size, n_size in shapes(tb, rng, knobs.vectors(DEFAULT_GEMMS)):
        a = random_matrix(rng, (m_size, k_size), tb.element, fraction)
        b = random_matrix(rng, (k_size, n_size), tb.element, fraction)
        d = random_accumulator(rng, (m_size, n_size), tb.element, fraction) if tb.accumulate else None
        measured, model = await tb.run_gemm(a, b, d, exact_cycles=not (idle or backpressure))
        dut._log.info("GEMM %dx%dx%d: %d cycles (model %d)", m_size, k_size, n_size, measured, model)
    if specials:
        shape = (tb.rows * tb.slots + 1, 3, tb.cols + 1)
        await tb.run_gemm(*signed_zero_operands(rng, shape, tb.element, tb.accumulate),
                          exact_cycles=not (idle or backpressure))


@cocotb.test()
async def gemm_bits_and_cycles(dut):
    """Random GEMMs (1x1x1, tall, wide, K = 1): bits equal gemm, cycles equal gemm_cycles."""
    await run_test(dut, idle=False, backpressure=False, specials=False)


@cocotb.test()
async def special_values(dut):
    """NaN, infinities, subnormals and signed zeros in A, B and D (int8: full-range values)."""
    await run_test(dut, idle=False, backpressure=False, specials=True)


@cocotb.test()
async def gemm_under_stalls(dut):
    """Random gaps on every input stream and random backpressure on c: bits still exact."""
    await run_test(dut, idle=True, backpressure=True, specials=True)


@cocotb.test()
async def bad_commands_rejected(dut):
    """k or tiles 0 or past max_k / max_tiles: consumed, cmd_error, nothing runs; a good GEMM clears it."""
    tb = TB(dut)
    rng = knobs.rng(99)
    shape = (tb.rows * tb.slots, 2, tb.cols)
    a, b = random_matrix(rng, shape[:2], tb.element), random_matrix(rng, shape[1:], tb.element)
    d = random_accumulator(rng, (shape[0], shape[2]), tb.element) if tb.accumulate else None
    commands = bad_commands({"k": 1, "tiles": 1}, size_limits({"k": "max_k", "tiles": "max_tiles"}))
    await reject_then_run(tb, tb.cmd, commands, lambda: tb.run_gemm(a, b, d, exact_cycles=True))


async def reset_mid_job(tb, when, run_gemm, operands, k_size):
    """Reset at a random cycle while a GEMM of four tiles (K = ``k_size``) streams in (or its rows
    stream out) under random stalls; then nothing comes out and a clean GEMM is exact in bits and
    cycles. ``run_gemm(a, b, d, exact_cycles=)`` and ``operands(rng, shape)`` are the bench's."""
    salt = 500 + (when == "outputs")
    rng = knobs.rng(salt + 10)
    tile_m = tb.rows * tb.slots
    shape = (2 * tile_m, k_size, 2 * tb.cols)
    interrupted = operands(rng, shape)
    clean = operands(rng, (tile_m + 1, k_size - 1, tb.cols + 1))
    # Four tiles, each at least K T transfers on a and T rows out, at most one per cycle.
    watch, transfers = (tb.a, 4 * k_size * tb.slots) if when == "inputs" else (tb.c, 4 * tile_m)
    await reset_then_clean(
        tb, interrupted=lambda: run_gemm(*interrupted, exact_cycles=False),
        clean=lambda: run_gemm(*clean, exact_cycles=True), drivers=tb.drivers, sink=tb.c, watch=watch,
        window=transfers - 2, quiet=tb.model_cycles(*shape) + 20, salt=salt)


@cocotb.test()
@cocotb.parametrize(when=["inputs", "outputs"])
async def reset_mid_gemm(dut, when):
    """Reset in the middle of a GEMM under random stalls: nothing leaks, a clean GEMM is exact."""
    tb = TB(dut)
    await reset_mid_job(tb, when, tb.run_gemm, lambda rng, shape: tb.random_gemm(rng, shape, 0.25), k_size=4)
