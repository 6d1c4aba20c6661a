"""What the DLRM blocks share: the 512-bit line, the row-line arithmetic and the row parameters.

The line is named ``CACHE_LINE_BITS`` because it is not the network's: a DLRM line is one 512-bit AXI
beat of 16 binary32 values, where a network data packet (``rtl.net.packet.LINE_BITS``) carries 448
bits. The counter width is :data:`rtl.lib.counters.COUNTER_BITS`; the CAM is :mod:`rtl.lib.cam`.
"""

from ..registration import Param

__all__ = ["CACHE_LINE_BITS", "CACHE_LINE_WORDS", "DIM_CHOICES", "POW2_WAYS", "DIM_PARAM", "INDEX_BITS_PARAM",
           "log2", "table_bits", "check_table_cache"]

# One line of the cache's data path: 16 binary32 values, the width of a 512-bit AXI beat.
CACHE_LINE_BITS = 512
CACHE_LINE_WORDS = 16
# Embedding dimensions: whole lines only, so a row is 1, 2, 4 or 8 lines.
DIM_CHOICES = (16, 32, 64, 128)
POW2_WAYS = (1, 2, 4, 8)
# The row parameters, the same in every DLRM block.
DIM_PARAM = Param("dim", int, 16, "embedding dimension (binary32 values per row)", choices=DIM_CHOICES)
INDEX_BITS_PARAM = Param("index_bits", int, 24, "row index width", minimum=4, maximum=32)


def log2(value):
    """log2 of a power of two."""
    return value.bit_length() - 1


def table_bits(count):
    """Bits of a field that holds 0 to ``count - 1`` (at least one): a table number of ``count`` tables."""
    return max(1, (count - 1).bit_length())


def check_table_cache(values):
    """The cache shape of a block of ``tables`` tables of ``2**row_bits`` rows: ``sets`` a power of two,
    indexed by fewer bits than a cache row id (``row_bits`` + the table number) has."""
    if values["sets"] & (values["sets"] - 1):
        raise ValueError(f"sets must be a power of two, not {values['sets']}")
    index_bits = values["row_bits"] + table_bits(values["tables"])
    if index_bits <= log2(values["sets"]):
        raise ValueError(f"row_bits + table bits ({index_bits}) must exceed log2(sets)")
