"""ws_array: cocotb tests of :class:`rtl.systolic.ws_array.WeightStationaryArray` against
golden.systolic, and their pytest runners (at the bottom).

Each GEMM is cut into the array's weight tiles as the block's docstring says and streamed in;
every result row is checked bit for bit against :func:`golden.systolic.gemm`. Without stalls
the cycles from the first ``w`` transfer to the last ``c`` transfer must equal
``gemm_cycles(..., dataflow="weight_stationary")``.

The tiling sequencer's tests (``test_tiled_gemm.py``) also run this array, but never starve
it; these add random gaps on every input stream (and backpressure on ``c``).
"""

import cocotb

from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from testbenches.systolic.commands import bad_ws_commands, reject_then_run, reset_mid_ws_job
from testbenches.systolic.tb import (
    WeightStationaryTB,
    gemm_tests,
    parametrize_cases,
    random_accumulator,
    random_gemm,
    random_matrix,
    run_random_gemms,
    signed_zero_operands,
    stalled_start,
)

MODULE = __name__
DEFAULT_GEMMS = 4


async def run_test(dut, *, idle, backpressure, specials):
    """Random GEMMs (ragged k-tiles and n-tiles), bits against gemm and cycles against gemm_cycles; with
    ``specials`` a quarter special values, and a -0.0 D that must survive the rows past K."""
    tb = WeightStationaryTB(dut)
    rng = await stalled_start(tb, idle, backpressure, 4 * specials + 2 * idle + backpressure)
    fixed = [(1, 1, 1), (1, tb.rows + 1, tb.cols), (2 * tb.rows + 3, 2 * tb.rows, 2 * tb.cols + 1)]
    randoms = [(int(rng.integers(1, 20)), int(rng.integers(1, 3 * tb.rows + 2)),
                int(rng.integers(1, 3 * tb.cols))) for _ in range(knobs.vectors(DEFAULT_GEMMS, limit=40))]
    await run_random_gemms(tb, rng, fixed + randoms, fraction=0.25 if specials else 0.0,
                           exact_cycles=not (idle or backpressure))
    if specials:  # K = rows + 1: a ragged last k-tile whose rows past K must leave -0.0 alone
        shape = (5, tb.rows + 1, tb.cols + 1)
        await tb.run_gemm(*signed_zero_operands(rng, shape, tb.element, tb.accumulate),
                          exact_cycles=not (idle or backpressure))


globals().update(gemm_tests(run_test))


@cocotb.test()
async def bad_commands_rejected(dut):
    """m, k or n_tiles 0 or past its maximum: consumed, cmd_error, nothing runs; a good GEMM clears it."""
    tb = WeightStationaryTB(dut)
    rng = knobs.rng(99)
    a = random_matrix(rng, (3, tb.rows + 1), tb.element)
    b = random_matrix(rng, (tb.rows + 1, tb.cols), tb.element)
    d = random_accumulator(rng, (3, tb.cols), tb.element) if tb.accumulate else None
    await reject_then_run(tb, tb.sources["cmd"], bad_ws_commands(),
                          lambda: tb.run_gemm(a, b, d, exact_cycles=True))


@cocotb.test()
@cocotb.parametrize(when=["inputs", "outputs"])
async def reset_mid_gemm(dut, when):
    """Reset in the middle of a GEMM under random stalls: nothing leaks, a clean GEMM is exact."""
    tb = WeightStationaryTB(dut)
    await reset_mid_ws_job(tb, when, tb.run_gemm,
                           lambda rng, shape: random_gemm(rng, shape, tb.element, tb.accumulate, 0.25))


CASES = [
    {"rows": 3, "cols": 3, "element": "int8", "accumulate": True},
    {"rows": 2, "cols": 1, "element": "f32", "accumulate": True},
]
SLOW_CASES = [
    {"rows": 2, "cols": 3, "element": "f16", "accumulate": True},
    {"rows": 3, "cols": 2, "element": "f32"},
]


@parametrize_cases(CASES, SLOW_CASES)
def test_ws_array(params):
    run_cocotb("ws_array", MODULE, params={**params, "max_m": 32, "max_k": 32, "max_tiles": 16})
