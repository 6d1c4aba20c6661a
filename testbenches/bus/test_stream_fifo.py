"""stream_fifo: the generic stream tests (cocotb, from :mod:`testbenches.bus.tb`), its runner and checks.

What they move and check (4 x 30,000 transfers, a reset mid-stream; nothing lost, duplicated
or reordered) is said once, in :mod:`testbenches.bus.tb`.
"""

import pytest

from scripts.sim.runner import run_cocotb

# cocotb runs the tests found in this module: the generic stream tests, imported by name.
from .tb import reset_mid_transfer, stream_order_under_stalls, throughput_without_stalls  # noqa: F401

MODULE = __name__


@pytest.mark.parametrize("depth", [2, 16, pytest.param(512, marks=pytest.mark.slow)])
def test_stream_fifo(depth):
    run_cocotb("stream_fifo", MODULE, params={"width": 32, "depth": depth})


@pytest.mark.filterwarnings("ignore::amaranth.hdl._ir.UnusedElaboratable")
def test_parameters_are_validated():
    from rtl.bus.stream_fifo import StreamFIFO

    with pytest.raises(ValueError, match="depth must be in 2..65536"):
        StreamFIFO(depth=1)
