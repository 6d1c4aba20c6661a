"""pytest runners: the block floating point encoder in cocotb on Verilator against golden.systolic."""

import pytest

from scripts.sim.runner import run_cocotb

MODULE = "testbenches.systolic.cocotb_block_fp_encoder"


@pytest.mark.parametrize("params", [{"block": 4, "mantissa_bits": 8}, {"block": 3, "mantissa_bits": 16},
                                    {"block": 1, "mantissa_bits": 2}],
                         ids=lambda p: f"block={p['block']}-mantissa_bits={p['mantissa_bits']}")
def test_block_fp_encoder(params):
    run_cocotb("block_fp_encoder", MODULE, params=params)
