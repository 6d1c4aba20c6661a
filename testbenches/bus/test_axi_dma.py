"""pytest runners for the AXI4 DMA engines (cocotb on Verilator against cocotbext-axi's AxiRam).

The default suite runs each engine at 64 and 512 bits with short bursts and a small
outstanding limit (so that the limits and the 4 KB cuts are hit often); the slow runs
use the Vitis-like configuration and longest bursts.
"""

import pytest

from scripts.sim.runner import run_cocotb

CONFIGS = [
    {"data_width": 64, "max_burst": 16, "max_outstanding": 2},
    {"data_width": 512, "max_burst": 8, "max_outstanding": 3},
    pytest.param({"data_width": 512, "max_burst": 64, "max_outstanding": 8}, marks=pytest.mark.slow),
    pytest.param({"data_width": 64, "max_burst": 256, "max_outstanding": 4}, marks=pytest.mark.slow),
    pytest.param({"data_width": 32, "max_burst": 1, "max_outstanding": 2, "address_width": 32},
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize("params", CONFIGS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_axi_burst_reader(params):
    run_cocotb("axi_burst_reader", "testbenches.bus.cocotb_axi_burst_reader", params=params)


@pytest.mark.parametrize("params", CONFIGS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_axi_burst_writer(params):
    run_cocotb("axi_burst_writer", "testbenches.bus.cocotb_axi_burst_writer", params=params)
