"""pytest runners: the block floating point decoder in cocotb on Verilator against golden.systolic."""

import pytest

from scripts.sim.runner import run_cocotb

MODULE = "testbenches.systolic.cocotb_block_fp_decoder"


@pytest.mark.parametrize("params", [{"block": 4, "mantissa_bits": 8}, {"block": 3, "mantissa_bits": 24},
                                    {"block": 2, "mantissa_bits": 2}],
                         ids=lambda p: f"block={p['block']}-mantissa_bits={p['mantissa_bits']}")
def test_block_fp_decoder(params):
    run_cocotb("block_fp_decoder", MODULE, params=params)
