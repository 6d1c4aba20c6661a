"""pytest runners for ``topk_chunk_decompressor`` and ``topk_axi_decompressor`` (cocotb on Verilator)."""

import pytest

from scripts.sim.runner import run_cocotb

MODULE = "testbenches.compress.cocotb_chunk_decompressor"


def decompressor(lanes, banks, chunk_size, out_lanes, value_format="f32", **extra):
    return {"lanes": lanes, "banks": banks, "chunk_size": chunk_size, "out_lanes": out_lanes,
            "value_format": value_format, **extra}


@pytest.mark.parametrize("params", [
    decompressor(4, 4, 32, 4, "f16"),
    pytest.param(decompressor(1, 2, 16, 2, bank_writes=1), marks=pytest.mark.slow),
    pytest.param(decompressor(8, 16, 128, 16), marks=pytest.mark.slow),
    pytest.param(decompressor(16, 32, 256, 16, "f16"), marks=pytest.mark.slow),
], ids=lambda p: "L{lanes}-B{banks}-S{chunk_size}-M{out_lanes}-{value_format}".format(**p))
def test_chunk_decompressor(params):
    run_cocotb("topk_chunk_decompressor", MODULE, params=params)


# The 512-bit configuration of a SmartSSD/Alveo memory port; bench_compress.py measures traffic on it.
AXI_PARAMS = {"lanes": 8, "banks": 16, "chunk_size": 1024, "out_lanes": 16, "value_format": "f32",
              "max_burst": 16, "max_outstanding": 4}


@pytest.mark.parametrize("testcase", ["streams_from_memory", "read_fault"])
def test_axi_decompressor(testcase):
    run_cocotb("topk_axi_decompressor", "testbenches.compress.cocotb_axi_decompressor", params=AXI_PARAMS,
               testcase=testcase)


def test_axi_decompressor_reset():
    """Reset in the middle of transfers, with read bursts open (``reset_mid_transfer``)."""
    run_cocotb("topk_axi_decompressor", "testbenches.compress.cocotb_axi_decompressor", params=AXI_PARAMS,
               testcase="reset_mid_transfer")


@pytest.mark.filterwarnings("ignore::amaranth.hdl._ir.UnusedElaboratable")
def test_parameters_are_validated():
    import gc

    from rtl.compress.chunk_decompressor import ChunkDecompressor
    from rtl.compress.scatter_engine import ScatterEngine

    with pytest.raises(ValueError, match="lanes"):
        ScatterEngine(lanes=3)
    with pytest.raises(ValueError, match="banks must be a power of two"):
        ScatterEngine(banks=12)
    with pytest.raises(ValueError, match="chunk_size"):
        ScatterEngine(banks=16, chunk_size=16)
    with pytest.raises(ValueError, match="out_lanes"):
        ScatterEngine(banks=8, out_lanes=16)
    with pytest.raises(ValueError, match="value_format"):
        ChunkDecompressor(value_format="bf16")
    gc.collect()  # the half-built components warn now, inside this test's filter
