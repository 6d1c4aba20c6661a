"""pytest runners: arbitrary GEMMs through the tiling sequencer on both dataflows.

``test_large_gemm_utilisation`` (slow) runs one large GEMM and checks that the RTL's compute
cycles equal the cycle model and that the MAC utilisation is at least 90 %.
"""


import pytest

from golden.systolic import gemm_cycle_terms
from scripts.sim.runner import run_cocotb
from testbenches.systolic.schedule import array_schedule

MODULE = "testbenches.systolic.cocotb_tiled_gemm"
OS, WS = "output_stationary", "weight_stationary"

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
