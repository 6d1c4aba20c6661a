"""pytest runners: the weight-stationary systolic array in cocotb on Verilator against golden.systolic.

The tiling sequencer's tests (``test_rtl_tiled_gemm.py``) also run this array, but never starve
it; these add random gaps on every input stream (and backpressure on ``c``).
"""

import pytest

from scripts.sim.runner import run_cocotb

MODULE = "testbenches.systolic.cocotb_ws_array"

CASES = [
    {"rows": 3, "cols": 3, "element": "int8", "accumulate": True},
    {"rows": 2, "cols": 1, "element": "f32", "accumulate": True},
]
SLOW_CASES = [
    {"rows": 2, "cols": 3, "element": "f16", "accumulate": True},
    {"rows": 3, "cols": 2, "element": "f32"},
]


def _id(params):
    return "-".join(f"{key}={value}" for key, value in params.items())


@pytest.mark.parametrize("params", CASES + [pytest.param(p, marks=pytest.mark.slow) for p in SLOW_CASES],
                         ids=_id)
def test_ws_array(params):
    run_cocotb("ws_array", MODULE, params={**params, "max_m": 32, "max_k": 32, "max_tiles": 16})
