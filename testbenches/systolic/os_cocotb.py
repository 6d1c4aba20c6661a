"""The output-stationary array's cocotb tests, shared by ``os_array`` and ``tensor_array``.

``test_os_array.py`` and ``test_tensor_array.py`` put :data:`OS_TESTS` in their namespace, so that
cocotb runs them on their own block. A tensor array's streams are those of a ``rows t x cols t``
one-MAC array, so the tests cut tiles over lanes and :class:`~testbenches.systolic.tb.OutputStationaryTB` asks
``gemm_cycles(..., tensor=t)`` for the count.
"""

import cocotb

from scripts.sim import knobs
from testbenches.systolic.commands import bad_commands, reject_then_run, reset_mid_os_job, size_limits
from testbenches.systolic.tb import (
    OutputStationaryTB,
    gemm_tests,
    os_shapes,
    random_accumulator,
    random_matrix,
    run_random_gemms,
    signed_zero_operands,
    stalled_start,
)

__all__ = ["OS_TESTS", "gemm_bits_and_cycles", "special_values", "gemm_under_stalls", "bad_commands_rejected",
           "reset_mid_gemm"]

DEFAULT_GEMMS = 4


async def run_test(dut, *, idle, backpressure, specials):
    """Random GEMMs (1x1x1, tall, wide, K = 1), bits against gemm and cycles against gemm_cycles; with
    ``specials`` a quarter special values in A, B and D (int8: full-range values) and signed zeros."""
    tb = OutputStationaryTB(dut)
    rng = await stalled_start(tb, idle, backpressure, 4 * specials + 2 * idle + backpressure)
    await run_random_gemms(tb, rng, os_shapes(tb, rng, knobs.vectors(DEFAULT_GEMMS, limit=40)),
                           fraction=0.25 if specials else 0.0, exact_cycles=not (idle or backpressure))
    if specials:
        shape = (tb.rows * tb.slots + 1, 3, tb.cols + 1)
        await tb.run_gemm(*signed_zero_operands(rng, shape, tb.element, tb.accumulate),
                          exact_cycles=not (idle or backpressure))


gemm_bits_and_cycles, special_values, gemm_under_stalls = gemm_tests(run_test).values()


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


# Every test above by name, for the test modules' ``globals()``.
OS_TESTS = {test.name: test for test in (gemm_bits_and_cycles, special_values, gemm_under_stalls,
                                         bad_commands_rejected, reset_mid_gemm)}
