"""pytest runners: the statistics unit in cocotb on Verilator against golden.optim.gradient_statistics.

Two lane counts in the fast suite; agreeing with the golden model bit for bit at both shows
the result does not depend on the lane count.
"""

import pytest

from scripts.sim.runner import run_cocotb

CASES = [{"lanes": 1}, {"lanes": 3}, pytest.param({"lanes": 16}, marks=pytest.mark.slow)]


@pytest.mark.parametrize("params", CASES, ids=lambda p: f"lanes={p['lanes']}")
def test_gradient_statistics(params):
    run_cocotb("gradient_statistics", "testbenches.optim.cocotb_gradient_statistics", params=params)
