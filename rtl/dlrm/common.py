"""What the DLRM blocks share: the 512-bit line, the row-line arithmetic and the row parameters.

The line is named ``CACHE_LINE_BITS`` because it is not the network's: a DLRM line is one 512-bit AXI
beat of 16 binary32 values, where a network data packet (``rtl.net.packet.LINE_BITS``) carries 448
bits. The counter width is :data:`rtl.lib.counters.COUNTER_BITS`; the CAM is :mod:`rtl.lib.cam`.
"""

from ..registration import Param

__all__ = ["CACHE_LINE_BITS", "CACHE_LINE_WORDS", "DIM_CHOICES", "POW2_WAYS", "DIM_PARAM", "INDEX_BITS_PARAM",
           "log2"]

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
