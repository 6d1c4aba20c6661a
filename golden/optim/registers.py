"""The optim family's register bits, as the host reads them, stated here and not read from ``rtl/``.

The tests decode the RTL's outputs with these tables; ``testbenches/test_design_constants.py``
holds the RTL's constants equal to them, so a moved bit fails a test instead of moving the
expectation with it.
"""

__all__ = ["ERROR_READ", "ERROR_WRITE", "ERROR_READ_RESP_SHIFT", "ERROR_WRITE_RESP_SHIFT",
           "STATISTICS_BUCKETS"]

#: The updater kernel's ``error`` register: bit 0 an AXI read error, bit 1 a write error, and the
#: 2-bit AXI response of the first of each at bits [9:8] (RRESP) and [11:10] (BRESP).
ERROR_READ, ERROR_WRITE = 1 << 0, 1 << 1
ERROR_READ_RESP_SHIFT, ERROR_WRITE_RESP_SHIFT = 8, 10

#: Exponent buckets of the gradient statistics unit: one per finite biased binary32 exponent
#: ``max(e, 1) - 1`` for ``e`` in 0..254 (subnormals share the lowest normal's bucket).
STATISTICS_BUCKETS = 254
