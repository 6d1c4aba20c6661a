"""Pieces the DLRM testbenches share. The embedding cache's bench (HBM model, drivers, golden LRU),
:class:`CacheTB`, is the host device's (:mod:`scripts.sim.devices.dlrm`), which ``bench_dlrm``
drives too; it is named here for the tests."""

from scripts.sim.devices.dlrm import BASE, LINE_BYTES, CacheTB, zipf_rows

__all__ = ["CacheTB", "zipf_rows", "LINE_BYTES", "BASE"]
