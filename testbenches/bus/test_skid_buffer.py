"""skid_buffer: the generic stream tests (cocotb, from :mod:`testbenches.bus.tb`) and their runner.

What they move and check (4 x 30,000 transfers, a reset mid-stream; nothing lost, duplicated
or reordered) is said once, in :mod:`testbenches.bus.tb`.
"""

import pytest

from scripts.sim.runner import run_cocotb

# cocotb runs the tests found in this module: the generic stream tests, imported by name.
from .tb import reset_mid_transfer, stream_order_under_stalls, throughput_without_stalls  # noqa: F401

MODULE = __name__


@pytest.mark.parametrize("width", [1, 32, pytest.param(512, marks=pytest.mark.slow)])
def test_skid_buffer(width):
    run_cocotb("skid_buffer", MODULE, params={"width": width})
