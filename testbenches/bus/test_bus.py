"""pytest runners for the bus blocks (cocotb on Verilator).

Each run moves 4 x 30,000 transfers (NEARTRAIN_VECTORS per stall pattern) through the
block: at full rate, with random valid gaps, with random backpressure, and with both.
"""

import pytest

from scripts.sim.runner import run_cocotb

MODULE = "testbenches.bus.cocotb_stream_blocks"


@pytest.mark.parametrize("width", [1, 32, pytest.param(512, marks=pytest.mark.slow)])
def test_skid_buffer(width):
    run_cocotb("skid_buffer", MODULE, params={"width": width})


@pytest.mark.parametrize("depth", [2, 16, pytest.param(512, marks=pytest.mark.slow)])
def test_stream_fifo(depth):
    run_cocotb("stream_fifo", MODULE, params={"width": 32, "depth": depth})


@pytest.mark.parametrize("input_width,output_width", [
    (512, 512), (512, 128), (128, 512),
    pytest.param(512, 32, marks=pytest.mark.slow),
    pytest.param(64, 1024, marks=pytest.mark.slow),
])
def test_width_converter(input_width, output_width):
    run_cocotb("width_converter", MODULE,
               params={"input_width": input_width, "output_width": output_width, "element_width": 32})


@pytest.mark.filterwarnings("ignore::amaranth.hdl._ir.UnusedElaboratable")
def test_parameters_are_validated():
    from rtl.bus.stream_fifo import StreamFIFO
    from rtl.bus.width_converter import StreamWidthConverter

    with pytest.raises(ValueError, match="depth must be in 2..65536"):
        StreamFIFO(depth=1)
    with pytest.raises(ValueError, match="input_width"):
        StreamWidthConverter(input_width=96, output_width=64, element_width=32)
