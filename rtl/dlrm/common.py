"""What the DLRM blocks share: the 512-bit line, counter width, and the row-line arithmetic."""

from amaranth.hdl import Cat

__all__ = ["LINE_BITS", "LINE_WORDS", "COUNTER_BITS", "DIM_CHOICES", "POW2_WAYS", "log2", "one_hot_index"]

# One line of the cache's data path: 16 binary32 values, the width of a 512-bit AXI beat.
LINE_BITS = 512
LINE_WORDS = 16
COUNTER_BITS = 32
# Embedding dimensions: whole lines only, so a row is 1, 2, 4 or 8 lines.
DIM_CHOICES = (16, 32, 64, 128)
POW2_WAYS = (1, 2, 4, 8)


def log2(value):
    """log2 of a power of two."""
    return value.bit_length() - 1


def one_hot_index(bits):
    """The index of the set bit of ``bits``, which has at most one (0 when none).

    An OR per index bit, one LUT level per four inputs, where a priority chain would be as deep
    as ``bits`` is wide: the CAMs' keys are unique, so a match is one-hot.
    """
    width = max(1, (len(bits) - 1).bit_length())
    return Cat(*[Cat(*[bits[k] for k in range(len(bits)) if (k >> b) & 1]).any() for b in range(width)])
