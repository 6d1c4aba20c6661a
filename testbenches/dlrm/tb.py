"""Pieces the DLRM testbenches share. The embedding cache's bench (HBM model, drivers, golden LRU),
:class:`CacheTB`, is the host device's (:mod:`scripts.sim.devices.dlrm`), which ``bench_dlrm``
drives too; it is named here for the tests."""

from scripts.sim import knobs
from scripts.sim.devices.dlrm import BASE, LINE_BYTES, CacheTB, zipf_rows

__all__ = ["CacheTB", "zipf_rows", "LINE_BYTES", "BASE", "check_counters"]


def check_counters(dut, expected):
    """The DUT's counter outputs named in ``expected`` (a name-to-count dict) hold the golden counts."""
    counters = {name: int(getattr(dut, name).value) for name in expected}
    assert counters == expected, f"counters {counters} != golden {expected}; {knobs.describe()}"
