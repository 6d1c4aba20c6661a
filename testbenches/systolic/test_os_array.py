# amaranth: UnusedElaboratable=no
"""os_array: cocotb tests of :class:`rtl.systolic.os_array.OutputStationaryArray` against golden.systolic,
and their pytest runners (at the bottom).

``test_tensor_array`` runs these cocotb tests on :class:`rtl.systolic.tensor_array.TensorArray`
(parameter ``tensor`` t): its streams are those of a ``rows t x cols t`` one-MAC array, so the bench
cuts tiles over lanes and asks ``gemm_cycles(..., tensor=t)`` for the count.

Each GEMM is cut into the array's tiles exactly as the block's docstring says, streamed in,
and every result row is checked bit for bit against :func:`golden.systolic.gemm` on the
zero-padded matrices. Without stalls the cycle count, measured here from the first ``a``
transfer to the last ``c`` transfer and reported by the block's ``cycles`` port, must equal
:func:`golden.systolic.gemm_cycles` with the documented latencies (:mod:`.schedule`), never the
block's own latency attributes; :func:`test_latency_attributes_are_the_documented_ones` holds every
dense array's latency attributes to that schedule.
"""

import gc

import cocotb
import pytest
from amaranth._unused import MustUse

from rtl.systolic.os_array import OutputStationaryArray
from rtl.systolic.sparse_array import SparseTensorArray
from rtl.systolic.tensor_array import TensorArray
from rtl.systolic.tiled_gemm import TiledGemm
from rtl.systolic.ws_array import WeightStationaryArray
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from testbenches.systolic.commands import bad_commands, reject_then_run, reset_mid_os_job, size_limits
from testbenches.systolic.schedule import array_schedule
from testbenches.systolic.tb import (
    OutputStationaryTB,
    os_shapes,
    random_accumulator,
    random_matrix,
    signed_zero_operands,
)

MODULE = __name__
DEFAULT_GEMMS = 4


async def run_test(dut, *, idle, backpressure, specials):
    tb = OutputStationaryTB(dut)
    salt = 4 * specials + 2 * idle + backpressure
    tb.stall(idle, backpressure, salt)
    await tb.reset()
    rng = knobs.rng(salt)
    fraction = 0.25 if specials else 0.0
    for m_size, k_size, n_size in os_shapes(tb, rng, knobs.vectors(DEFAULT_GEMMS, limit=40)):
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
    tb = OutputStationaryTB(dut)
    rng = knobs.rng(99)
    shape = (tb.rows * tb.slots, 2, tb.cols)
    a, b = random_matrix(rng, shape[:2], tb.element), random_matrix(rng, shape[1:], tb.element)
    d = random_accumulator(rng, (shape[0], shape[2]), tb.element) if tb.accumulate else None
    commands = bad_commands({"k": 1, "tiles": 1}, size_limits({"k": "max_k", "tiles": "max_tiles"}))
    await reject_then_run(tb, tb.cmd, commands, lambda: tb.run_gemm(a, b, d, exact_cycles=True))


@cocotb.test()
@cocotb.parametrize(when=["inputs", "outputs"])
async def reset_mid_gemm(dut, when):
    """Reset in the middle of a GEMM under random stalls: nothing leaks, a clean GEMM is exact."""
    tb = OutputStationaryTB(dut)
    await reset_mid_os_job(tb, when, tb.run_gemm, lambda rng, shape: tb.random_gemm(rng, shape, 0.25),
                           k_size=4)


CASES = [
    {"rows": 3, "cols": 4, "element": "int8", "slots": 2, "accumulate": True},
    {"rows": 2, "cols": 1, "element": "f16", "slots": 1},
    {"rows": 1, "cols": 2, "element": "f32", "slots": 7, "accumulate": True},
]
SLOW_CASES = [
    {"rows": 2, "cols": 2, "element": "f16", "slots": 1},
    {"rows": 2, "cols": 1, "element": "bf16", "slots": 6, "accumulate": True},
    {"rows": 4, "cols": 4, "element": "f16", "slots": 6, "accumulate": True},
    {"rows": 3, "cols": 4, "element": "f32", "slots": 4},
    {"rows": 4, "cols": 3, "element": "int8", "slots": 1},
]


def _id(params):
    return "-".join(f"{key}={value}" for key, value in params.items())


@pytest.mark.parametrize("params", CASES + [pytest.param(p, marks=pytest.mark.slow) for p in SLOW_CASES],
                         ids=_id)
def test_os_array(params):
    run_cocotb("os_array", MODULE, params={**params, "max_k": 64, "max_tiles": 64})


@pytest.mark.parametrize("element", ["f32", "f16", "bf16", "int8"])
def test_latency_attributes_are_the_documented_ones(element, monkeypatch):
    """Every dense array's ``mac_latency`` / ``acc_latency`` (what scripts read) equal docs/systolic.md's
    table (``schedule.array_schedule``), which the cocotb benches give the cycle model instead."""
    monkeypatch.setattr(MustUse, "_MustUse__silence", True)  # built only to read attributes
    os_schedule, ws_schedule = array_schedule(element, slots=3), array_schedule(element, "weight_stationary")
    assert os_schedule["mac_latency"] == ws_schedule["mac_latency"] + 2
    output_stationary = [OutputStationaryArray(element=element, slots=3),
                         TensorArray(element=element, slots=3, tensor=2),
                         SparseTensorArray(element=element, slots=3), TiledGemm(element=element, slots=3)]
    for array in output_stationary:
        latencies = {"tile": 3, "mac_latency": array.mac_latency, "acc_latency": array.acc_latency}
        assert latencies == os_schedule, type(array).__name__
    weight_stationary = [WeightStationaryArray(element=element),
                         TiledGemm(element=element, dataflow="weight_stationary")]
    for array in weight_stationary:
        assert array.mac_latency == ws_schedule["mac_latency"], type(array).__name__
    del array, output_stationary, weight_stationary
    gc.collect()  # while silenced: the arrays' never-elaborated parts would warn
