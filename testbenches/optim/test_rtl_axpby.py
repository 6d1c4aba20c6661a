"""pytest runners: the SIMD AXPBY block in cocotb on Verilator against golden.optim.axpby."""

import pytest

from scripts.sim.runner import run_cocotb

CASES = [
    {"lanes": 2, "fused": False},
    {"lanes": 1, "fused": True},
    pytest.param({"lanes": 16, "fused": True}, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items()))
def test_axpby(params):
    run_cocotb("axpby", "testbenches.optim.cocotb_axpby", params=params)
