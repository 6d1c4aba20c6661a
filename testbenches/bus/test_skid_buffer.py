"""skid_buffer: the generic stream tests (cocotb, from :mod:`testbenches.bus.tb`) and their runner.

Each run moves 4 x 30,000 transfers (NEARTRAIN_VECTORS per stall pattern) through the
buffer: at full rate, with random valid gaps, with random backpressure, and with both; then
resets it mid-stream. The output must equal the input, nothing lost, duplicated or reordered.
"""

import pytest

from scripts.sim.runner import run_cocotb

# cocotb runs the tests found in this module: the generic stream tests, imported by name.
from .tb import reset_mid_transfer, stream_order_under_stalls, throughput_without_stalls  # noqa: F401

MODULE = __name__


@pytest.mark.parametrize("width", [1, 32, pytest.param(512, marks=pytest.mark.slow)])
def test_skid_buffer(width):
    run_cocotb("skid_buffer", MODULE, params={"width": width})
