"""pytest runners: the output-stationary systolic array in cocotb on Verilator against golden.systolic."""

import pytest

from testbenches.harness import run_cocotb

MODULE = "testbenches.systolic.cocotb_os_array"

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
