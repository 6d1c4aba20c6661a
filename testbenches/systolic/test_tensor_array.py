"""tensor_array (t x t tensor PEs): cocotb on Verilator against golden.systolic; its cycle model.

The cocotb tests are the output-stationary array's (:mod:`.os_cocotb`, put in this module's
namespace so that cocotb runs them here), which cut tiles over the ``rows t x cols t`` lanes and check every
bit against ``gemm`` and, without stalls, every count against ``gemm_cycles(..., tensor=t)``. The
pure-Python tests hold the tensor extension of the cycle model to the register-level simulator
(``simulate_output_stationary(..., tensor=t)``).
"""

import numpy as np
import pytest

from golden.systolic import gemm, gemm_cycle_terms, gemm_cycles
from golden.systolic.array_sim import ScheduleHazard, simulate_output_stationary
from rtl.systolic.tensor_array import TensorArray
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from testbenches.systolic.os_cocotb import OS_TESTS
from testbenches.systolic.tb import parametrize_cases

globals().update(OS_TESTS)  # the output-stationary array's cocotb tests, run on this block
MODULE = __name__

CASES = [
    {"rows": 2, "cols": 2, "tensor": 2, "element": "int8", "slots": 2, "accumulate": True},
    {"rows": 1, "cols": 1, "tensor": 2, "element": "f16", "slots": 3, "accumulate": True},
]
SLOW_CASES = [
    {"rows": 2, "cols": 1, "tensor": 2, "element": "bf16", "slots": 6, "accumulate": True},
    {"rows": 1, "cols": 2, "tensor": 2, "element": "f32", "slots": 1},
    {"rows": 3, "cols": 2, "tensor": 3, "element": "int8", "slots": 1},
]


@parametrize_cases(CASES, SLOW_CASES)
def test_tensor_array(params):
    run_cocotb("tensor_array", MODULE, params={**params, "max_k": 64, "max_tiles": 64})


def test_tensor_cycle_hand_count():
    """M = 8, K = 3, N = 4 on 2 x 1 PEs of 2 x 2 lanes, T = 1, L = A = 1.

    Tiles of 4 x 2 outputs: 2 m-tiles x 2 n-tiles. stream 3, skew 1, compute 3 + 1 + 0 = 4,
    drain 2 * 2 * 1 = 4, period max(3, 1 + 3) = 4: 3 * 4 + 4 + 4 = 20. With t = 1 the same
    GEMM on 2 x 1 PEs has 4 x 4 tiles of 2 x 1: 15 * max(3, 2) + 4 + 2 = 51.
    """
    terms = gemm_cycle_terms(8, 3, 4, rows=2, cols=1, tensor=2)
    assert (terms.tiles, terms.compute, terms.drain, terms.period, terms.total) == (4, 4, 4, 4, 20)
    assert gemm_cycles(8, 3, 4, rows=2, cols=1) == 51
    assert terms.utilisation == pytest.approx(8 * 3 * 4 / (2 * 1 * 4 * 20))


def _operands(rng, shape, element):
    if element == "int8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    values = rng.standard_normal(shape).astype(np.float32)
    return values.astype(np.float16).view(np.uint16) if element == "f16" else values.view(np.uint32)


@pytest.mark.parametrize("element", ["f16", "f32", "int8"])
def test_tensor_schedule_simulation(element):
    """Register-level simulation = gemm bit for bit, = gemm_cycles, and period - 1 raises a hazard."""
    rng = knobs.rng(31)
    for _ in range(knobs.vectors(12, limit=120)):
        rows, cols, tensor, slots = (int(x) for x in rng.integers(1, 4, 4))
        acc_latency = int(rng.integers(1, 4))
        schedule = dict(rows=rows, cols=cols, tensor=tensor, tile=slots, acc_latency=acc_latency,
                        mac_latency=acc_latency + int(rng.integers(0, 4)))
        m_size, k_size, n_size = (int(x) for x in rng.integers(1, 12, 3))
        a, b = _operands(rng, (m_size, k_size), element), _operands(rng, (k_size, n_size), element)
        c, cycles = simulate_output_stationary(a, b, element=element, **schedule)
        where = f"{schedule} GEMM {m_size}x{k_size}x{n_size}; {knobs.describe()}"
        assert np.array_equal(c, gemm(a, b, element=element)), where
        terms = gemm_cycle_terms(m_size, k_size, n_size, **schedule)
        assert cycles == terms.total, where
        if terms.tiles > 1:
            with pytest.raises(ScheduleHazard):
                simulate_output_stationary(a, b, element=element, period=terms.period - 1, **schedule)


@pytest.mark.parametrize("kwargs, match", [
    ({"tensor": 0}, "tensor"), ({"tensor": 17}, "tensor"), ({"tensor": "2"}, "tensor"),
    ({"rows": 0}, "rows"), ({"slots": 65}, "slots"), ({"element": "f64"}, "element"),
])
def test_tensor_array_rejects_bad_parameters(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        TensorArray(**kwargs)


def test_cycle_model_rejects_bad_tensor():
    with pytest.raises(ValueError, match="tensor"):
        gemm_cycles(4, 4, 4, rows=2, cols=2, tensor=0)
    with pytest.raises(ValueError, match="tensor"):
        gemm_cycles(4, 4, 4, rows=2, cols=2, tensor=2, dataflow="weight_stationary")
