# amaranth: UnusedElaboratable=no
"""The weight-stationary block floating point array: cocotb on Verilator against golden.systolic; parameters.

The cocotb bench (``cocotb_block_fp_ws_array``) checks every result bit against ``block_fp_gemm``
and, without stalls, every count against ``block_fp_gemm_cycles(..., dataflow="weight_stationary")``.
"""

import pytest

from golden.systolic import gemm_cycles
from golden.systolic.block_fp import block_fp_gemm_cycles
from rtl.registry import get_block
from rtl.systolic.block_fp_ws_array import BlockFloatWeightStationaryArray
from scripts.sim.runner import run_cocotb
from testbenches.systolic.schedule import block_fp_schedule

MODULE = "testbenches.systolic.cocotb_block_fp_ws_array"

CASES = [
    # Two blocks per k-tile (L = 3: the accumulator must wait for the next block), with D.
    {"rows": 4, "cols": 2, "block": 2, "mantissa_bits": 8, "accumulate": True},
    # One block per k-tile, block = 1 (L = 6), a 5-bit mantissa.
    {"rows": 1, "cols": 3, "block": 1, "mantissa_bits": 5},
]
SLOW_CASES = [
    {"rows": 8, "cols": 3, "block": 4, "mantissa_bits": 12, "accumulate": True},
    {"rows": 6, "cols": 2, "block": 3, "mantissa_bits": 8},
    {"rows": 16, "cols": 2, "block": 16, "mantissa_bits": 16, "accumulate": True},
]


def _id(params):
    return "-".join(f"{key}={value}" for key, value in params.items())


@pytest.mark.parametrize("params", CASES + [pytest.param(p, marks=pytest.mark.slow) for p in SLOW_CASES],
                         ids=_id)
def test_block_fp_ws_array(params):
    run_cocotb("block_fp_ws_array", MODULE, params={**params, "max_m": 64, "max_k": 64, "max_tiles": 16})


@pytest.mark.parametrize("params, message", [
    ({"rows": 3, "block": 2}, r"rows must be a multiple of block = 2 \(whole blocks per k-tile\), not 3"),
    ({"block": 0}, "block must be in 1..64, not 0"),
    ({"mantissa_bits": 25}, "mantissa_bits must be in 2..24, not 25"),
    ({"rows": 0}, "rows must be in 1..256, not 0"),
])
def test_bad_parameters(params, message):
    """A bad geometry or format is a Python error naming the parameter and its range."""
    with pytest.raises(ValueError, match=message):
        BlockFloatWeightStationaryArray(**params)
    with pytest.raises(ValueError, match=next(iter(params))):
        get_block("block_fp_ws_array").build(params)


def test_cycle_model():
    """The dense weight-stationary count plus the converter and adder below the last block; a
    shorter chain between k-tiles because the buffer is read only for the first block's addition."""
    latency = 3  # max(2, ceil(6 / block))
    assert block_fp_schedule(rows=4, cols=2, block=2, dataflow="weight_stationary") == {
        "mac_latency": latency, "convert_latency": 4, "add_latency": 6}
    model = dict(rows=4, cols=2, block=2, dataflow="weight_stationary", mac_latency=latency,
                 convert_latency=4, add_latency=6)
    dense = dict(rows=4, cols=2, dataflow="weight_stationary", mac_latency=latency)
    # One k-tile: no chain; every tile adds 10 once, at the end.
    assert block_fp_gemm_cycles(5, 3, 4, **model) == gemm_cycles(5, 3, 4, **dense) + 10
    # M = 1, two k-tiles: load 4, then a period of chain = (rows - block) L + 7 = 13 (over
    # M + cols - 1 + (rows - 1) L = 11), then the stream 1 + 1 + rows L + 10 = 24.
    assert block_fp_gemm_cycles(1, 8, 2, **model) == 4 + 13 + 24
    with pytest.raises(ValueError, match="rows must be a multiple of block"):
        block_fp_gemm_cycles(1, 1, 1, **{**model, "rows": 3})


@pytest.mark.parametrize("params", CASES + SLOW_CASES, ids=_id)
def test_latency_attributes_are_the_documented_ones(params):
    """``mac_latency`` and ``tail_latency`` equal Section 7d's (``schedule.block_fp_schedule``), which
    the cocotb bench gives the cycle model instead of the block's own attributes."""
    array = BlockFloatWeightStationaryArray(**params)
    expected = block_fp_schedule(rows=params["rows"], cols=params["cols"], block=params["block"],
                                 dataflow="weight_stationary")
    assert array.mac_latency == expected["mac_latency"]
    assert array.tail_latency == expected["convert_latency"] + expected["add_latency"]
