"""pytest runners for ``topk_scatter`` (cocotb on Verilator): bit-exact chunks under stalls."""

import pytest

from scripts.sim.runner import run_cocotb

MODULE = "testbenches.compress.cocotb_scatter_engine"


def engine(lanes, banks, chunk_size, out_lanes, value_format="f32", **extra):
    return {"lanes": lanes, "banks": banks, "chunk_size": chunk_size, "out_lanes": out_lanes,
            "value_format": value_format, **extra}


@pytest.mark.parametrize("params", [
    engine(4, 8, 64, 4),
    pytest.param(engine(1, 2, 32, 2, "f16", bank_writes=1), marks=pytest.mark.slow),
    pytest.param(engine(8, 16, 128, 8, "f16"), marks=pytest.mark.slow),
    pytest.param(engine(16, 32, 256, 16), marks=pytest.mark.slow),
    pytest.param(engine(4, 4, 32, 1, queue_depth=2), marks=pytest.mark.slow),
], ids=lambda p: "L{lanes}-B{banks}-S{chunk_size}-M{out_lanes}-{value_format}".format(**p))
def test_scatter_engine(params):
    run_cocotb("topk_scatter", MODULE, params=params)
