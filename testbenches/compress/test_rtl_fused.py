"""pytest runner for ``topk_fused_updater_core`` (cocotb on Verilator): Top-K pairs -> optimizer step."""

import pytest

from scripts.sim.runner import run_cocotb

MODULE = "testbenches.compress.cocotb_fused_updater_core"


@pytest.mark.parametrize("params", [
    {"optimizer": "adam", "lanes": 1, "wire_lanes": 4, "chunk_size": 32, "banks": 4, "value_format": "f16"},
    pytest.param({"optimizer": "sgd", "lanes": 2, "wire_lanes": 8, "chunk_size": 64, "banks": 8,
                  "value_format": "f32"}, marks=pytest.mark.slow),
], ids=lambda p: "{optimizer}-M{lanes}-L{wire_lanes}-S{chunk_size}-{value_format}".format(**p))
def test_fused_updater_core(params):
    run_cocotb("topk_fused_updater_core", MODULE, params=params)
