"""pytest runners: the optimizer updater core in cocotb on Verilator against golden.optim.

The fast suite runs each optimizer once with few lanes, SGD with 3 (a count that is not a
power of two); wider cores are slow (their Verilator builds take minutes).
"""

import pytest

from scripts.sim.runner import run_cocotb

CASES = [
    {"optimizer": "adam", "lanes": 1},
    {"optimizer": "sgd", "lanes": 3},
    {"optimizer": "adagrad", "lanes": 1},
    pytest.param({"optimizer": "adam", "lanes": 4}, marks=pytest.mark.slow),
    pytest.param({"optimizer": "sgd", "lanes": 2}, marks=pytest.mark.slow),
    pytest.param({"optimizer": "adagrad", "lanes": 4}, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items()))
def test_updater_core(params):
    run_cocotb("updater_core", "testbenches.optim.cocotb_updater_core", params=params)
