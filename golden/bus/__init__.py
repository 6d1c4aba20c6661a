"""Golden models of the stream plumbing blocks.

A pipeline register or FIFO is the identity on the sequence of transfers. A width
converter keeps the element sequence and only regroups it: element 0 of a transfer is
its least significant ``element_width`` bits.
"""

import numpy as np

__all__ = ["regroup"]


def regroup(words, *, input_width, output_width, element_width):
    """Regroup a sequence of ``input_width``-bit transfers into ``output_width``-bit transfers.

    Parameters
    ----------
    words : sequence of int
        Input transfers, oldest first. When gathering, a trailing partial group is not
        emitted (the hardware waits for it to complete).
    input_width, output_width, element_width : int
        Transfer and element widths in bits, as for ``rtl.bus.StreamWidthConverter``.

    Returns
    -------
    list of int
        Output transfers, oldest first.
    """
    if input_width % element_width or output_width % element_width:
        raise ValueError("input_width and output_width must be multiples of element_width")
    mask = (1 << element_width) - 1
    per_in = input_width // element_width
    per_out = output_width // element_width
    elements = [(int(word) >> (i * element_width)) & mask for word in words for i in range(per_in)]
    usable = len(elements) - len(elements) % per_out
    out = []
    for start in range(0, usable, per_out):
        word = 0
        for i, element in enumerate(elements[start:start + per_out]):
            word |= element << (i * element_width)
        out.append(word)
    return out


def random_words(rng, count, width):
    """``count`` uniformly random ``width``-bit ints from NumPy generator ``rng``."""
    chunks = (width + 31) // 32
    raw = rng.integers(0, 1 << 32, size=(count, chunks), dtype=np.uint64)
    words = []
    for row in raw:
        word = 0
        for i, part in enumerate(row):
            word |= int(part) << (32 * i)
        words.append(word & ((1 << width) - 1))
    return words
