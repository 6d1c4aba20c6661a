"""The compress family's counters and error bits, in the order and at the positions the host reads them.

The tests decode the RTL's outputs with these tables, not with the RTL's own constants, so that a
moved bit or a reordered counter fails a test instead of moving the expectation with it;
``testbenches/test_design_constants.py`` holds the RTL's constants equal to them.

Fields are listed bit 0 first: field ``k`` of a register of ``width``-bit fields occupies bits
``[k * width, (k + 1) * width)``.
"""

__all__ = ["ERROR_NAMES", "ERROR_COUNTER_WIDTH", "error_fields", "TRAFFIC_NAMES", "TRAFFIC_COUNTER_WIDTH",
           "traffic_fields", "ERROR_PAIRS_READ", "ERROR_PAIRS_RESP_SHIFT"]

#: The error counters of every Top-K decompressor (``errors``), bit 0 first; the ``status`` output has
#: one sticky bit per counter at the same index, the bits of :class:`~golden.compress.ScatterStatus`.
ERROR_NAMES = ("out_of_range", "chunk_violation", "unsorted", "excess_pairs", "missing")
#: Bits per error counter: 2**40 words (8 TB) never saturate one, and ``missing`` alone can pass
#: 2**32 (a header may declare 2**32 - 1 pairs).
ERROR_COUNTER_WIDTH = 40

#: The run counters of ``topk_dram_scatter`` (``traffic``), bit 0 first: busy cycles, R and W beats
#: of the dense port, R beats of the pair port.
TRAFFIC_NAMES = ("cycles", "dense_reads", "dense_writes", "pair_reads")
TRAFFIC_COUNTER_WIDTH = 40

#: ``topk_updater``'s error register, beside the updater kernel's bits 0 (read) and 1 (write)
#: of :mod:`golden.optim.registers`: bit 2 is a pair-stream read error, bits [13:12] its AXI RRESP.
ERROR_PAIRS_READ = 1 << 2
ERROR_PAIRS_RESP_SHIFT = 12


def error_fields():
    """``{name: width}`` of the error counters, bit 0 first (an Amaranth ``StructLayout`` takes it as is)."""
    return dict.fromkeys(ERROR_NAMES, ERROR_COUNTER_WIDTH)


def traffic_fields():
    """``{name: width}`` of the traffic counters, bit 0 first."""
    return dict.fromkeys(TRAFFIC_NAMES, TRAFFIC_COUNTER_WIDTH)
