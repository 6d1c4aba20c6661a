"""pytest runners for ``topk_dram_scatter``, the paper-mode zero-fill + DRAM scatter (cocotb on Verilator)."""

import pytest

from scripts.sim.runner import run_cocotb

MODULE = "testbenches.compress.cocotb_dram_scatter"


def dram_scatter(lanes, data_width, value_format="f32", rmw_depth=16, **extra):
    return {"lanes": lanes, "data_width": data_width, "value_format": value_format, "rmw_depth": rmw_depth,
            "address_width": 32, "max_burst": 16, "max_outstanding": 4, **extra}


CONFIGS = [
    dram_scatter(1, 128, "f16", rmw_depth=4),
    dram_scatter(4, 512, "f32"),
    pytest.param(dram_scatter(8, 512, "f16"), marks=pytest.mark.slow),
    pytest.param(dram_scatter(16, 1024, "f32", rmw_depth=32), marks=pytest.mark.slow),
]


def _id(params):
    return "L{lanes}-D{data_width}-{value_format}-R{rmw_depth}".format(**params)


@pytest.mark.parametrize("params", CONFIGS, ids=_id)
@pytest.mark.parametrize("testcase", ["scatter_bit_exact", "axi_fault"])
def test_dram_scatter(params, testcase):
    run_cocotb("topk_dram_scatter", MODULE, params=params, testcase=testcase)


@pytest.mark.parametrize("params", CONFIGS, ids=_id)
def test_dram_scatter_reset(params):
    """Reset in the middle of runs, with bursts open (``reset_mid_run``)."""
    run_cocotb("topk_dram_scatter", MODULE, params=params, testcase="reset_mid_run")


@pytest.mark.filterwarnings("ignore::amaranth.hdl._ir.UnusedElaboratable")
def test_parameters_are_validated():
    import gc

    from rtl.compress.dram_scatter import DRAMScatter

    with pytest.raises(ValueError, match="lanes"):
        DRAMScatter(lanes=3)
    with pytest.raises(ValueError, match="data_width"):
        DRAMScatter(data_width=32)
    with pytest.raises(ValueError, match="data_width"):
        DRAMScatter(data_width=384)
    with pytest.raises(ValueError, match="rmw_depth"):
        DRAMScatter(rmw_depth=12)
    with pytest.raises(ValueError, match="rmw_depth"):
        DRAMScatter(rmw_depth=128)
    with pytest.raises(ValueError, match="value_format"):
        DRAMScatter(value_format="bf16")
    gc.collect()  # the half-built components warn now, inside this test's filter
