"""width_converter: the generic stream tests (cocotb, from :mod:`testbenches.bus.tb`), its runner and checks.

Each run moves 4 x 30,000 narrow-side transfers (NEARTRAIN_VECTORS per stall pattern)
through the converter: at full rate, with random valid gaps, with random backpressure, and
with both; then resets it mid-stream. The output must equal :func:`golden.bus.regroup` of
the input, nothing lost, duplicated or reordered.
"""

import pytest

from scripts.sim.runner import run_cocotb

# cocotb runs the tests found in this module: the generic stream tests, imported by name.
from .tb import reset_mid_transfer, stream_order_under_stalls, throughput_without_stalls  # noqa: F401

MODULE = __name__


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
    from rtl.bus.width_converter import StreamWidthConverter

    with pytest.raises(ValueError, match="input_width"):
        StreamWidthConverter(input_width=96, output_width=64, element_width=32)
