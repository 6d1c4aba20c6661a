"""tiled_gemm: cocotb tests of :class:`rtl.systolic.tiled_gemm.TiledGemm` against golden.systolic, and
their pytest runners (at the bottom): arbitrary GEMMs through the tiling sequencer on both dataflows.

Each GEMM is filled row-major through ``a``, ``b`` (and ``d``), and its result rows, which
come back in tile order, are placed and compared bit for bit with :func:`golden.systolic.gemm`.
The compute phase must take exactly :func:`golden.systolic.gemm_cycles` cycles whenever ``c``
is not backpressured (gaps on the fill streams only slow the fill phase).

``test_large_gemm_utilisation`` (slow) runs one large GEMM (the ``large_gemm`` test) and checks
that the RTL's compute cycles equal the cycle model and that the MAC utilisation is at least 90 %.
"""


import cocotb
import numpy as np
import pytest

from golden.systolic import gemm, gemm_cycle_terms
from scripts.sim import channel, knobs
from scripts.sim.devices.aggregate import GemmDevice
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.tb import ClockedTB
from testbenches.systolic.commands import bad_commands, reject_then_run, reset_then_clean
from testbenches.systolic.schedule import array_schedule
from testbenches.systolic.tb import (
    random_accumulator,
    random_matrix,
    signed_zero_operands,
    stall_ports,
    stalled_start,
)

MODULE = __name__
OS, WS = "output_stationary", "weight_stationary"
DEFAULT_GEMMS = 4


class TB(ClockedTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.params = params_from_env()
        self.device = GemmDevice(dut, component_from_env(), self.clock, self.params)
        self.rows, self.cols = self.params["rows"], self.params["cols"]
        self.slots = self.params.get("slots", 1)
        self.element = self.params["element"]
        self.accumulate = self.params.get("accumulate", False)
        self.dataflow = self.params.get("dataflow", "output_stationary")
        self.limits = (self.params["max_m"], self.params["max_k"], self.params["max_n"])
        self.sources, self.c, self.drivers = self.device.sources, self.device.c, self.device.drivers

    def stall(self, idle, backpressure, salt):
        stall_ports([self.sources[port] for port in ("a", "b", "d") if port in self.sources], self.c,
                    idle, backpressure, salt)

    async def run_gemm(self, a, b, d=None, *, exact_cycles):
        """One GEMM through the host device: bits equal :func:`golden.systolic.gemm`, compute
        cycles equal (or, under backpressure, at least) the cycle model."""
        m_size, k_size = a.shape
        n_size = b.shape[1]
        expected = gemm(a, b, d, element=self.element).view(np.uint32)
        got = await self.device.gemm(a, b, d)
        mismatch = np.argwhere(got != expected)
        if mismatch.size:
            i, j = mismatch[0]
            raise AssertionError(
                f"tiled_gemm {self.params} GEMM {m_size}x{k_size}x{n_size}: C[{i},{j}] = {got[i, j]:#x}, "
                f"expected {expected[i, j]:#x} ({len(mismatch)} mismatches); {knobs.describe()}")
        schedule = array_schedule(self.element, self.dataflow, self.slots)
        terms = gemm_cycle_terms(m_size, k_size, n_size, rows=self.rows, cols=self.cols,
                                 dataflow=self.dataflow, **schedule)
        measured = int(self.dut.cycles.value)
        if exact_cycles:
            assert measured == terms.total, (f"GEMM {m_size}x{k_size}x{n_size}: {measured} cycles, model "
                                             f"{terms.total}; {knobs.describe()}")
        else:
            assert measured >= terms.total
        return measured, terms


def shapes(tb, rng, count):
    """1x1x1, the full buffers, one element short of whole tiles, then random shapes."""
    max_m, max_k, max_n = tb.limits
    tile_m = tb.rows * tb.slots
    fixed = [(1, 1, 1), (max_m, max_k, max_n), (min(max_m, 2 * tile_m - 1), 3, min(max_n, 2 * tb.cols - 1))]
    randoms = [tuple(int(rng.integers(1, limit + 1)) for limit in tb.limits) for _ in range(count)]
    return fixed + randoms


async def run_test(dut, *, idle, backpressure, specials):
    tb = TB(dut)
    rng = await stalled_start(tb, idle, backpressure, 4 * specials + 2 * idle + backpressure)
    fraction = 0.25 if specials else 0.0
    for m_size, k_size, n_size in shapes(tb, rng, knobs.vectors(DEFAULT_GEMMS, limit=40)):
        a = random_matrix(rng, (m_size, k_size), tb.element, fraction)
        b = random_matrix(rng, (k_size, n_size), tb.element, fraction)
        d = random_accumulator(rng, (m_size, n_size), tb.element, fraction) if tb.accumulate else None
        measured, terms = await tb.run_gemm(a, b, d, exact_cycles=not backpressure)
        dut._log.info("GEMM %dx%dx%d: %d cycles (model %d), utilisation %.3f", m_size, k_size, n_size,
                      measured, terms.total, terms.utilisation)
    if specials:  # K = rows + 1: weight stationary has a ragged k-tile whose rows must leave -0.0 alone
        max_m, max_k, max_n = tb.limits
        shape = (min(max_m, 5), min(max_k, tb.rows + 1), min(max_n, tb.cols + 1))
        await tb.run_gemm(*signed_zero_operands(rng, shape, tb.element, tb.accumulate),
                          exact_cycles=not backpressure)


@cocotb.test()
async def gemm_bits_and_cycles(dut):
    """Random shapes with random gaps on the fill streams: bits equal gemm, cycles equal gemm_cycles."""
    await run_test(dut, idle=True, backpressure=False, specials=False)


@cocotb.test()
async def special_values_under_backpressure(dut):
    """NaN, infinities, subnormals, signed zeros; random fill gaps and random backpressure on c."""
    await run_test(dut, idle=True, backpressure=True, specials=True)


@cocotb.test()
async def bad_commands_rejected(dut):
    """m, k or n 0 or past the buffers: consumed, cmd_error, nothing runs; a good GEMM clears it."""
    tb = TB(dut)
    rng = knobs.rng(99)
    shape = (min(tb.limits[0], 3), min(tb.limits[1], tb.rows + 1), min(tb.limits[2], tb.cols + 1))
    a, b = random_matrix(rng, shape[:2], tb.element), random_matrix(rng, shape[1:], tb.element)
    d = random_accumulator(rng, (shape[0], shape[2]), tb.element) if tb.accumulate else None
    commands = bad_commands({"m": 1, "k": 1, "n": 1}, dict(zip(("m", "k", "n"), tb.limits, strict=True)))
    await reject_then_run(tb, tb.sources["cmd"], commands, lambda: tb.run_gemm(a, b, d, exact_cycles=True))


@cocotb.test(skip=not channel.has_job())
async def large_gemm(dut):
    """One GEMM of the shape ``(M, K, N)`` the caller passes as the job (the utilisation
    benchmark): bits and cycles exact; replies with the cycles and the utilisation."""
    tb = TB(dut)
    await tb.reset()
    m_size, k_size, n_size = channel.job()
    rng = knobs.rng(99)
    a = random_matrix(rng, (m_size, k_size), tb.element)
    b = random_matrix(rng, (k_size, n_size), tb.element)
    d = random_accumulator(rng, (m_size, n_size), tb.element) if tb.accumulate else None
    measured, terms = await tb.run_gemm(a, b, d, exact_cycles=True)
    result = {"M": m_size, "K": k_size, "N": n_size, "cycles": measured, "model": terms.total,
              "utilisation": terms.macs / (tb.rows * tb.cols * measured)}
    dut._log.info("large GEMM: %s", result)
    channel.reply(result)


@cocotb.test()
@cocotb.parametrize(when=["inputs", "outputs"])
async def reset_mid_gemm(dut, when):
    """Reset at a random cycle while a GEMM fills the buffers or computes (``inputs``) or while its
    rows stream out (``outputs``), under random stalls; then nothing comes out, and a clean GEMM
    equals gemm bit for bit in gemm_cycles."""
    tb = TB(dut)
    salt = 500 + (when == "outputs")
    rng = knobs.rng(salt + 10)
    max_m, max_k, max_n = tb.limits
    shapes = [(min(max_m, 2 * tb.rows * tb.slots + 1), min(max_k, 4), min(max_n, 2 * tb.cols)),
              (min(max_m, 3), min(max_k, tb.rows + 1), min(max_n, tb.cols + 1))]
    operands = []
    for m_size, k_size, n_size in shapes:
        a = random_matrix(rng, (m_size, k_size), tb.element, 0.25)
        b = random_matrix(rng, (k_size, n_size), tb.element, 0.25)
        d = random_accumulator(rng, (m_size, n_size), tb.element, 0.25) if tb.accumulate else None
        operands.append((a, b, d))
    (m_size, k_size, n_size), schedule = shapes[0], array_schedule(tb.element, tb.dataflow, tb.slots)
    model = gemm_cycle_terms(*shapes[0], rows=tb.rows, cols=tb.cols, dataflow=tb.dataflow, **schedule).total
    # After the first element of A, the rest of the fill takes M K - 1 cycles at least and the
    # compute phase the model: a reset in that window cuts the fill or the compute phase. The
    # result rows, M per column tile, leave one per cycle at most.
    if when == "inputs":
        watch, window = tb.sources["a"], m_size * k_size - 2 + model
    else:
        watch, window = tb.c, m_size * -(-n_size // tb.cols) - 2
    await reset_then_clean(
        tb, interrupted=lambda: tb.run_gemm(*operands[0], exact_cycles=False),
        clean=lambda: tb.run_gemm(*operands[1], exact_cycles=True), drivers=tb.drivers, sink=tb.c,
        watch=watch, window=window, quiet=model + m_size * k_size + 20, salt=salt)


CASES = [
    {"rows": 2, "cols": 3, "element": "int8", "slots": 2, "accumulate": True, "max_m": 13, "max_k": 9,
     "max_n": 10},
    {"rows": 2, "cols": 2, "element": "bf16", "dataflow": WS, "accumulate": True, "max_m": 7, "max_k": 5,
     "max_n": 5},
    {"rows": 2, "cols": 1, "element": "bf16", "slots": 3, "accumulate": True, "max_m": 9, "max_k": 5,
     "max_n": 4},
]
SLOW_CASES = [
    {"rows": 3, "cols": 2, "element": "int8", "dataflow": WS, "accumulate": True, "max_m": 11, "max_k": 10,
     "max_n": 7},
    {"rows": 4, "cols": 4, "element": "f16", "slots": 6, "accumulate": True, "max_m": 40, "max_k": 12,
     "max_n": 13},
    {"rows": 3, "cols": 2, "element": "f32", "slots": 8, "max_m": 30, "max_k": 7, "max_n": 9},
    {"rows": 3, "cols": 4, "element": "f16", "dataflow": WS, "accumulate": True, "max_m": 20, "max_k": 11,
     "max_n": 9},
    {"rows": 2, "cols": 2, "element": "f32", "dataflow": WS, "max_m": 9, "max_k": 7, "max_n": 5},
    {"rows": 2, "cols": 3, "element": "bf16", "dataflow": WS, "accumulate": True, "max_m": 9, "max_k": 7,
     "max_n": 7},
]


def _id(params):
    return "-".join(f"{key}={value}" for key, value in params.items() if not key.startswith("max"))


@pytest.mark.parametrize("params", CASES + [pytest.param(p, marks=pytest.mark.slow) for p in SLOW_CASES],
                         ids=_id)
def test_tiled_gemm(params):
    run_cocotb("tiled_gemm", MODULE, params=params)


@pytest.mark.slow
@pytest.mark.parametrize("dataflow", [OS, WS])
def test_large_gemm_utilisation(dataflow):
    """A 4 x 4 f16 array on a 384 x 64 x 96 GEMM: cycles equal the model, utilisation >= 90 %."""
    shape = (384, 64, 96)
    slots = 6 if dataflow == OS else 1
    params = {"rows": 4, "cols": 4, "element": "f16", "slots": slots, "dataflow": dataflow,
              "max_m": shape[0], "max_k": shape[1], "max_n": shape[2]}
    result = run_cocotb("tiled_gemm", MODULE, params=params, testcase="large_gemm", job=shape).reply
    schedule = array_schedule("f16", dataflow, slots)
    terms = gemm_cycle_terms(*shape, rows=4, cols=4, dataflow=dataflow, **schedule)
    assert result["cycles"] == terms.total
    assert result["utilisation"] >= 0.9
