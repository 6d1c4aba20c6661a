"""What the systolic blocks' cocotb tests share: random operands, the arrays' testbenches, tiles.

* Operands: raw ``element`` matrices with the PE's special values (:func:`random_matrix`,
  :func:`random_accumulator`, :func:`signed_zero_operands`), binary32 blocks for the block floating
  point encoder and decoder (:data:`EDGES`, :func:`random_blocks`) and operands for the block
  floating point arrays (:func:`random_operand`, :func:`tie_operands`).
* :class:`OutputStationaryTB` streams a GEMM cut into an output-stationary array's tiles
  (:func:`tile_streams`) and checks every result row and the cycle count; the tests of
  ``os_array``, ``tensor_array``, ``sparse_tensor_array`` and ``block_fp_array`` run on it.
* :class:`WeightStationaryTB` does the same for the weight-stationary arrays (``ws_array``,
  ``block_fp_ws_array``).
* :class:`BlockCodecTB` drives the block floating point encoder and decoder (``i`` in, ``o`` out).

Cycle counts come from the documented latencies (:mod:`.schedule`), never from the block's own
attributes; the command and reset checks are in :mod:`.commands`.
"""

import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge, with_timeout

from golden.systolic import gemm, gemm_cycles
from golden.systolic.block_fp import block_fp_gemm_cycles
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, Scoreboard
from testbenches.systolic.schedule import array_schedule, block_fp_schedule

__all__ = ["SPECIALS", "EDGES", "random_matrix", "random_accumulator", "signed_zero_operands",
           "random_blocks", "random_operand", "tie_operands", "tile_streams", "os_shapes",
           "OutputStationaryTB", "WeightStationaryTB", "BlockFormatTB", "BlockCodecTB", "random_gemm",
           "random_block_operands", "run_random_gemms", "stall_ports", "stalled_start", "case_id",
           "parametrize_cases", "gemm_tests"]

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


# Raw binary32 values that reach every path: signed zeros, the smallest and largest subnormals,
# the smallest normal, values that round half way (ties to even) and carry into the clamp, the
# largest finite value, one.
EDGES = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x3F800000, 0xBF800000,
         0x3FFFFFFF, 0x3FC00000, 0x3F400000, 0x40400000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F7FFFFF]


def random_gemm(rng, shape, element, accumulate, fraction=0.0):
    """Random operands ``(a, b, d)`` of an ``M x K x N`` GEMM (``d`` None without ``accumulate``)."""
    m_size, k_size, n_size = shape
    a = random_matrix(rng, (m_size, k_size), element, fraction)
    b = random_matrix(rng, (k_size, n_size), element, fraction)
    d = random_accumulator(rng, (m_size, n_size), element, fraction) if accumulate else None
    return a, b, d


def random_blocks(rng, count, block, mantissa_bits=None):
    """Blocks of raw f32 bits: normals of mixed scales, edge values, all-zero and tiny blocks.

    With ``mantissa_bits``, every fourth block is 1.0 followed by exact ties of that encoding's
    grid (odd multiples of half its LSB), which round half to even.
    """
    scales = rng.integers(-140, 128, (count, 1)).astype(np.float64)
    spread = rng.integers(0, 30, (count, block))  # elements far below the maximum flush towards 0
    values = rng.standard_normal((count, block)) * np.exp2(scales - spread)
    bits = values.astype(np.float32).view(np.uint32)
    edges = rng.random((count, block)) < 0.15
    bits = np.where(edges, rng.choice(np.asarray(EDGES, np.uint32), (count, block)), bits)
    bits[0] = 0  # an all-zero block
    bits[1] = rng.integers(0, 0x800000, block, dtype=np.uint32)  # subnormals only
    if count > 2:  # a block whose largest element rounds up into the clamp
        bits[2] = np.float32(1.0).view(np.uint32)
        bits[2, 0] = np.float32(2.0 - 2.0**-23).view(np.uint32)
    if mantissa_bits is not None and block > 1:
        # With 1.0 the largest element the LSB is 2^(2 - mantissa_bits); ties sit halfway between.
        odd = 2 * rng.integers(0, 2 ** (mantissa_bits - 1), (count, block - 1)) + 1
        ties = (odd * 2.0 ** (1 - mantissa_bits)).astype(np.float32).view(np.uint32)
        signs = rng.integers(0, 2, (count, block - 1), dtype=np.uint32) << np.uint32(31)
        rows = np.arange(3, count, 4)
        bits[rows, 0] = np.float32(1.0).view(np.uint32)
        bits[rows, 1:] = (ties | signs)[rows]
    return bits


def random_operand(rng, shape, *, wide, edges):
    """Finite binary32 values: normals scaled per row, optionally over the whole exponent range.

    ``wide`` draws each row's scale from 2^-75 .. 2^64 (so products overflow to infinity or land
    in the subnormal range) and spreads elements up to 2^-30 below it (they flush to small or
    zero mantissas); ``edges`` replaces a quarter of the elements by :data:`EDGES`
    (signed zeros, subnormals, the smallest normal, ties, the largest finite value).
    """
    if wide:
        scale = rng.integers(-75, 65, (shape[0], 1)) - rng.integers(0, 30, shape)
    else:
        scale = rng.integers(-6, 7, (shape[0], 1)) + np.zeros(shape, int)
    bits = (rng.standard_normal(shape) * np.exp2(scale.astype(np.float64))).astype(np.float32).view(np.uint32)
    if edges:
        mask = rng.random(shape) < 0.25
        bits = np.where(mask, rng.choice(np.asarray(EDGES, np.uint32), shape), bits)
    return bits


def random_block_operands(rng, m_size, k_size, n_size, *, wide, edges):
    """``a`` (M x K) and ``b`` (K x N) of :func:`random_operand`, ``b`` scaled per column."""
    a = random_operand(rng, (m_size, k_size), wide=wide, edges=edges)
    b = random_operand(rng, (n_size, k_size), wide=wide, edges=edges).T.copy()
    return a, b


def tie_operands(rng, m_size, n_size, block):
    """One block whose products are exact ties below the smallest subnormal: ``q 2^-150``, q = 1, 3, 5.

    ``A[i, 0] = ±q 2^-75``, ``B[0, j] = ±2^-75``, the rest of the block 0, so each result is one
    block sum whose conversion rounds a tie to even: ``2^-150`` to +-0, ``5 2^-150`` to
    ``2 2^-149`` (a round-half-up converter gives ``2^-149`` and ``3 2^-149``).
    """
    a = np.zeros((m_size, block), np.float32)
    b = np.zeros((block, n_size), np.float32)
    a[:, 0] = rng.choice([1.0, 3.0, 5.0, -1.0, -5.0], m_size) * 2.0**-75
    b[0, :] = rng.choice([1.0, -1.0], n_size) * 2.0**-75
    return a.view(np.uint32), b.view(np.uint32)


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


def stall_ports(sources, sink, idle, backpressure, salt):
    """Random valid gaps (30 %) on each of ``sources`` if ``idle`` (the one at ``index`` seeded by
    ``salt + 10 + index``) and random backpressure (30 %, seeded by ``salt + 20``) on ``sink`` if
    ``backpressure``; without them, none."""
    for index, source in enumerate(sources):
        source.set_pause_generator(random_pauses(knobs.rng(salt + 10 + index), 0.3) if idle else never())
    sink.set_backpressure_generator(random_pauses(knobs.rng(salt + 20), 0.3) if backpressure else never())


async def stalled_start(tb, idle, backpressure, salt):
    """Set ``tb``'s stalls (seeded by ``salt``), reset it, and return the test's generator ``rng(salt)``."""
    tb.stall(idle, backpressure, salt)
    await tb.reset()
    return knobs.rng(salt)


async def run_random_gemms(tb, rng, shapes, *, fraction, exact_cycles):
    """One :func:`random_gemm` of each ``M x K x N`` of ``shapes`` through ``tb.run_gemm``, logged."""
    for shape in shapes:
        a, b, d = random_gemm(rng, shape, tb.element, tb.accumulate, fraction)
        measured, model = await tb.run_gemm(a, b, d, exact_cycles=exact_cycles)
        tb.dut._log.info("GEMM %dx%dx%d: %d cycles (model %d)", *shape, measured, model)


def gemm_tests(run_test, *, specials_name="special_values"):
    """The three GEMM cocotb tests every array runs, as a dict for its test module's ``globals()``.

    ``run_test(dut, *, idle, backpressure, specials)`` runs the array's random GEMMs (with
    special operands if ``specials``); the tests run it without stalls, with specials
    (named ``specials_name``), and with both stalls and specials. cocotb runs them in that
    module's namespace, under these names.
    """
    @cocotb.test(name="gemm_bits_and_cycles")
    async def gemm_bits_and_cycles(dut):
        """Random GEMMs (edge shapes, then random ones): bits equal the golden, cycles the cycle model."""
        await run_test(dut, idle=False, backpressure=False, specials=False)

    @cocotb.test(name=specials_name)
    async def with_specials(dut):
        """The same with special operands (NaNs, infinities, subnormals, signed zeros, extreme exponents)."""
        await run_test(dut, idle=False, backpressure=False, specials=True)

    @cocotb.test(name="gemm_under_stalls")
    async def gemm_under_stalls(dut):
        """Random gaps on every input stream and random backpressure on c: bits still exact."""
        await run_test(dut, idle=True, backpressure=True, specials=True)

    return {test.name: test for test in (gemm_bits_and_cycles, with_specials, gemm_under_stalls)}


def case_id(params):
    """A runner's test id: the parameters as ``key=value`` joined by ``-``."""
    return "-".join(f"{key}={value}" for key, value in params.items())


def parametrize_cases(cases, slow_cases):
    """A runner's ``params`` parametrization: ``cases``, then ``slow_cases`` marked slow."""
    return pytest.mark.parametrize(
        "params", cases + [pytest.param(p, marks=pytest.mark.slow) for p in slow_cases], ids=case_id)


class _StampedTB(ClockedTB):
    """An array testbench: cycle stamps of the first input transfer and the latest ``c`` transfer."""

    first_port = "a"  # the input stream whose first transfer starts the count

    async def _stamp(self):
        dut, edge = self.dut, 0
        valid, ready = getattr(dut, f"{self.first_port}__valid"), getattr(dut, f"{self.first_port}__ready")
        while True:
            await RisingEdge(self.clock)
            edge += 1
            if valid.value and ready.value and self.first_in is None:
                self.first_in = edge
            if dut.c__valid.value and dut.c__ready.value:
                self.last_c = edge

    def check_cycles(self, label, measured, model, *, exact_cycles):
        """The ``cycles`` port reports ``measured``, which equals ``model`` (no stalls) or exceeds it."""
        reported = int(self.dut.cycles.value)
        assert reported == measured, f"cycles port {reported} != measured {measured}; {knobs.describe()}"
        if exact_cycles:
            assert measured == model, f"{label}: {measured} cycles, model {model}; {knobs.describe()}"
        else:
            assert measured >= model, f"{label}: {measured} cycles under stalls < model {model}"


class OutputStationaryTB(_StampedTB):
    """An output-stationary array (``tensor`` t: ``rows t x cols t`` lanes): its streams and checks."""

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
        self.first_in = self.last_c = None
        cocotb.start_soon(self._stamp())

    def stall(self, idle, backpressure, salt):
        stall_ports([self.a, self.b] + ([self.d] if self.d else []), self.c, idle, backpressure, salt)

    def random_gemm(self, rng, shape, fraction=0.0):
        """Random operands ``(a, b, d)`` of an ``M x K x N`` GEMM (``d`` None without ``accumulate``)."""
        return random_gemm(rng, shape, self.element, self.accumulate, fraction)

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
        self.first_in = self.last_c = None
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
        measured = self.last_c - self.first_in
        self.check_cycles(label, measured, model, exact_cycles=exact_cycles)
        return measured, model


def os_shapes(tb, rng, count):
    """1x1x1, a single K=1 tile, tall (several m-tiles), wide (several n-tiles), then random."""
    tile_m = tb.rows * tb.slots
    fixed = [(1, 1, 1), (tile_m, 1, tb.cols), (3 * tile_m - 1, 2, 1), (1, 3, 2 * tb.cols + 1),
             (tile_m, 9, tb.cols)]
    randoms = [tuple(int(x) for x in (rng.integers(1, 2 * tile_m + 2), rng.integers(1, 12),
                                      rng.integers(1, 2 * tb.cols + 2))) for _ in range(count)]
    return fixed + randoms


class WeightStationaryTB(_StampedTB):
    """A weight-stationary array: streams, stamps, stalls, checks."""

    first_port = "w"

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
        self.first_in = self.last_c = None
        cocotb.start_soon(self._stamp())

    def stall(self, idle, backpressure, salt):
        stall_ports([self.sources[port] for port in ("w", "a", "d") if port in self.sources], self.c,
                    idle, backpressure, salt)

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
        self.first_in = self.last_c = None
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
        measured = self.last_c - self.first_in + 1
        self.check_cycles(f"GEMM {m_size}x{k_size}x{n_size}", measured, model, exact_cycles=exact_cycles)
        return measured, model


class BlockFormatTB:
    """Block floating point operands on an array bench (list it before the bench in the bases).

    ``block`` (default ``default_block``) and ``mantissa_bits`` come from the parameters; the cycle
    model is ``block_fp_gemm_cycles`` on the array's ``dataflow`` with the documented latencies.
    """

    default_block = 8
    dataflow = "output_stationary"

    def __init__(self, dut):
        super().__init__(dut)
        self.block = self.params.get("block", self.default_block)
        self.mantissa_bits = self.params.get("mantissa_bits", 8)

    def model_cycles(self, m_size, k_size, n_size):
        """``block_fp_gemm_cycles`` of one GEMM on this array, with the documented latencies."""
        geometry = dict(rows=self.rows, cols=self.cols, block=self.block, dataflow=self.dataflow)
        # A weight-stationary bench has no output slots: the schedule's default (T = 1).
        slots = {"slots": self.slots} if hasattr(self, "slots") else {}
        return block_fp_gemm_cycles(m_size, k_size, n_size, **geometry,
                                    **block_fp_schedule(**geometry, **slots))


class BlockCodecTB(ClockedTB):
    """The block floating point encoder or decoder: one stream in (``i``), one out (``o``)."""

    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        params = params_from_env()
        self.block, self.bits = params["block"], params["mantissa_bits"]
        self.source = StreamSource(dut, "i", self.clock, stream_layout(self.component, "i"))
        self.sink = StreamSink(dut, "o", self.clock, stream_layout(self.component, "o"))

    def stall(self, idle, backpressure, salt):
        stall_ports([self.source], self.sink, idle, backpressure, salt)

    async def check_blocks(self, scoreboard, count, default_vectors, convert=lambda item: item):
        """Check ``count`` output blocks (each through ``convert``) against ``scoreboard``, in order,
        within a cycle bound, and nothing after them; ``default_vectors`` is the test's default count."""
        async def drain():
            for _ in range(count):
                scoreboard.check(convert(await self.sink.recv()))

        await with_timeout(drain(), 40 * count + 1000, "ns")
        await self.cycles(5)
        scoreboard.check_complete()
        assert self.sink.empty(), f"extra output blocks; {knobs.describe(default_vectors)}"
