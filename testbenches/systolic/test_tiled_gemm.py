# amaranth: UnusedElaboratable=no
"""tiled_gemm: cocotb tests of :class:`rtl.systolic.tiled_gemm.TiledGemm` against golden.systolic, and
their pytest runners (at the bottom): arbitrary GEMMs through the tiling sequencer on both dataflows.

Each GEMM is filled row-major through ``a``, ``b`` (and ``d``), and its result rows, which
come back in tile order, are placed and compared bit for bit with :func:`golden.systolic.gemm`.
The compute phase must take exactly :func:`golden.systolic.gemm_cycles` cycles whenever ``c``
is not backpressured (gaps on the fill streams only slow the fill phase).

With ``element="block_fp"`` the operands are finite binary32 (over the whole exponent range and
with edge values in the special-value tests), encoded along K by the host device
(:func:`golden.systolic.to_block_fp`); the results are compared bit for bit with
:func:`golden.systolic.block_fp_gemm` and the compute cycles with
:func:`golden.systolic.block_fp.block_fp_gemm_cycles` (the documented latencies of
``schedule.block_fp_schedule``).

``test_large_gemm_utilisation`` (slow) runs one large GEMM (the ``large_gemm`` test) and checks
that the RTL's compute cycles equal the cycle model and that the MAC utilisation is at least 90 %.
"""


import cocotb
import numpy as np
import pytest

from golden.systolic import gemm, gemm_cycle_terms
from golden.systolic.block_fp import block_fp_gemm, block_fp_gemm_cycles
from rtl.registry import get_block
from rtl.systolic.tiled_gemm import TiledGemm
from scripts.sim import channel, knobs
from scripts.sim.devices.aggregate import GemmDevice
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.tb import ClockedTB
from testbenches.systolic.commands import bad_commands, reject_then_run, reset_then_clean
from testbenches.systolic.schedule import array_schedule, block_fp_schedule
from testbenches.systolic.tb import (
    random_accumulator,
    random_block_operands,
    random_matrix,
    signed_zero_operands,
    stall_ports,
    stalled_start,
    tie_operands,
)

MODULE = __name__
OS, WS = "output_stationary", "weight_stationary"
BLOCK_FP = "block_fp"
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
        self.block_fp = self.element == BLOCK_FP
        if self.block_fp:  # the cases name the format (the device needs it too)
            self.block, self.mantissa_bits = self.params["block"], self.params["mantissa_bits"]
        self.sources, self.c, self.drivers = self.device.sources, self.device.c, self.device.drivers

    def stall(self, idle, backpressure, salt):
        stall_ports([self.sources[port] for port in ("a", "b", "d") if port in self.sources], self.c,
                    idle, backpressure, salt)

    def operands(self, rng, shape, fraction=0.0):
        """Random ``(a, b, d)`` of an ``M x K x N`` GEMM (``d`` None without ``accumulate``), a
        ``fraction`` of them special values; block floating point: finite binary32, with
        ``fraction`` over the whole exponent range and with edge values, and D of any binary32."""
        m_size, k_size, n_size = shape
        if self.block_fp:
            a, b = random_block_operands(rng, m_size, k_size, n_size, wide=fraction > 0, edges=fraction > 0)
        else:
            a = random_matrix(rng, (m_size, k_size), self.element, fraction)
            b = random_matrix(rng, (k_size, n_size), self.element, fraction)
        d_element = "f32" if self.block_fp else self.element
        d = random_accumulator(rng, (m_size, n_size), d_element, fraction) if self.accumulate else None
        return a, b, d

    def model_cycles(self, m_size, k_size, n_size):
        """The cycle model's count of one GEMM's compute phase, with the documented latencies."""
        geometry = dict(rows=self.rows, cols=self.cols, dataflow=self.dataflow)
        if self.block_fp:
            schedule = block_fp_schedule(**geometry, block=self.block, slots=self.slots)
            return block_fp_gemm_cycles(m_size, k_size, n_size, **geometry, block=self.block, **schedule)
        schedule = array_schedule(self.element, self.dataflow, self.slots)
        return gemm_cycle_terms(m_size, k_size, n_size, **geometry, **schedule).total

    async def run_gemm(self, a, b, d=None, *, exact_cycles):
        """One GEMM through the host device: bits equal :func:`golden.systolic.gemm` (or
        :func:`golden.systolic.block_fp_gemm`), compute cycles equal (or, under backpressure, at
        least) the cycle model. Returns the measured and the model's cycles."""
        m_size, k_size = a.shape
        n_size = b.shape[1]
        if self.block_fp:
            expected = block_fp_gemm(a, b, d, block=self.block, mantissa_bits=self.mantissa_bits)
        else:
            expected = gemm(a, b, d, element=self.element).view(np.uint32)
        got = await self.device.gemm(a, b, d)
        mismatch = np.argwhere(got != expected)
        if mismatch.size:
            i, j = mismatch[0]
            raise AssertionError(
                f"tiled_gemm {self.params} GEMM {m_size}x{k_size}x{n_size}: C[{i},{j}] = {got[i, j]:#x}, "
                f"expected {expected[i, j]:#x} ({len(mismatch)} mismatches); {knobs.describe()}")
        model = self.model_cycles(m_size, k_size, n_size)
        measured = int(self.dut.cycles.value)
        if exact_cycles:
            assert measured == model, (f"GEMM {m_size}x{k_size}x{n_size}: {measured} cycles, model "
                                       f"{model}; {knobs.describe()}")
        else:
            assert measured >= model
        return measured, model

    def utilisation(self, shape, cycles):
        """MACs of the GEMM per MAC slot of the array in ``cycles``."""
        return float(np.prod(shape)) / (self.rows * self.cols * cycles)


def shapes(tb, rng, count):
    """1x1x1, the full buffers, one element short of whole tiles, then random shapes."""
    max_m, max_k, max_n = tb.limits
    tile_m = tb.rows * tb.slots
    fixed = [(1, 1, 1), (max_m, max_k, max_n), (min(max_m, 2 * tile_m - 1), 3, min(max_n, 2 * tb.cols - 1))]
    if tb.block_fp:  # K just past a block boundary
        fixed.append((min(max_m, tile_m), min(max_k, tb.block + 1), min(max_n, tb.cols)))
    randoms = [tuple(int(rng.integers(1, limit + 1)) for limit in tb.limits) for _ in range(count)]
    return fixed + randoms


async def run_test(dut, *, idle, backpressure, specials):
    tb = TB(dut)
    rng = await stalled_start(tb, idle, backpressure, 4 * specials + 2 * idle + backpressure)
    fraction = 0.25 if specials else 0.0
    for shape in shapes(tb, rng, knobs.vectors(DEFAULT_GEMMS, limit=40)):
        measured, model = await tb.run_gemm(*tb.operands(rng, shape, fraction), exact_cycles=not backpressure)
        dut._log.info("GEMM %dx%dx%d: %d cycles (model %d), utilisation %.3f", *shape, measured, model,
                      tb.utilisation(shape, model))
    if specials:  # K = rows + 1: weight stationary has a ragged k-tile whose rows must leave -0.0 alone
        max_m, max_k, max_n = tb.limits
        shape = (min(max_m, 5), min(max_k, tb.rows + 1), min(max_n, tb.cols + 1))
        if tb.block_fp:
            # Block sums that are exact ties below the smallest subnormal (round half to even),
            # then the ragged k-tile over the whole exponent range.
            a, b = tie_operands(rng, shape[0], shape[2], min(max_k, tb.block))
            d = random_accumulator(rng, (shape[0], shape[2]), "f32", 0.25) if tb.accumulate else None
            await tb.run_gemm(a, b, d, exact_cycles=not backpressure)
            await tb.run_gemm(*tb.operands(rng, shape, 0.25), exact_cycles=not backpressure)
        else:
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
    a, b, d = tb.operands(rng, shape)
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
    measured, model = await tb.run_gemm(*tb.operands(rng, (m_size, k_size, n_size)), exact_cycles=True)
    result = {"M": m_size, "K": k_size, "N": n_size, "cycles": measured, "model": model,
              "utilisation": tb.utilisation((m_size, k_size, n_size), measured)}
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
    operands = [tb.operands(rng, shape, 0.25) for shape in shapes]
    m_size, k_size, n_size = shapes[0]
    model = tb.model_cycles(*shapes[0])
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
    # Block floating point, output stationary (a build of about 1.5 dense ones: CI's fast suite
    # cannot spare it): K padded to whole blocks of 2 (odd K), two groups of
    # PEs per row (2 + 1), T = 2, D.
    {"rows": 2, "cols": 3, "element": BLOCK_FP, "block": 2, "mantissa_bits": 6, "slots": 2,
     "accumulate": True, "max_m": 9, "max_k": 7, "max_n": 8},
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
    # Block floating point at 8 x 8 (DPT's Block16 with blocks of 8), both dataflows, up to three
    # k-tiles or blocks of K and three tiles of M and N; and a small weight-stationary one.
    {"rows": 8, "cols": 8, "element": BLOCK_FP, "block": 8, "mantissa_bits": 8, "accumulate": True,
     "max_m": 20, "max_k": 20, "max_n": 20},
    {"rows": 8, "cols": 8, "element": BLOCK_FP, "block": 8, "mantissa_bits": 8, "dataflow": WS,
     "accumulate": True, "max_m": 20, "max_k": 20, "max_n": 20},
    {"rows": 2, "cols": 2, "element": BLOCK_FP, "block": 2, "mantissa_bits": 6, "dataflow": WS,
     "accumulate": True, "max_m": 7, "max_k": 7, "max_n": 5},
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


@pytest.mark.parametrize("params, message", [
    ({"element": "f16", "block": 4}, "block applies to element='block_fp' only, not to element='f16'"),
    ({"element": "int8", "mantissa_bits": 12}, "mantissa_bits applies to element='block_fp' only"),
    ({"element": BLOCK_FP, "dataflow": WS, "rows": 3, "block": 2}, "rows must be a multiple of block = 2"),
    ({"element": BLOCK_FP, "dataflow": WS, "rows": 2, "block": 2, "slots": 2}, "slots must be 1"),
    ({"element": BLOCK_FP, "block": 65}, "block must be in 1..64, not 65"),
])
def test_bad_parameters(params, message):
    """A block format without ``element="block_fp"``, or one the dataflow cannot run, is an
    elaboration error naming the parameter."""
    with pytest.raises(ValueError, match=message):
        TiledGemm(**params)
    with pytest.raises(ValueError, match=message):
        get_block("tiled_gemm").build(params)


def test_block_fp_ports():
    """Block floating point: encoded operands in, binary32 D and results, the dense command."""
    gemm_unit = TiledGemm(element=BLOCK_FP, rows=2, cols=3, block=2, mantissa_bits=6, accumulate=True)
    members = gemm_unit.signature.members
    operand = members["a"].signature.members["payload"].shape
    assert set(operand.members) == {"mantissa", "exponent"} and operand.size == 6 + 9
    assert members["d"].signature.members["payload"].shape.width == 32
    assert members["c"].signature.members["payload"].shape.size == 3 * 32 + 1
    assert set(members["cmd"].signature.members["payload"].shape.members) == {"m", "k", "n"}

