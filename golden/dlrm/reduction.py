"""Local loss reduction: the FP32 gradients of the same line of the same row, summed in arrival order.

A gradient is one 512-bit line of 16 binary32 words, keyed by ``(row, line)`` (a row of ``dim``
values spans ``dim / 16`` lines, reduced independently). Per key and per word, in arrival order::

    s = g[0]            # the first gradient is stored as it came, bits unchanged
    s = s + g[1]        # binary32, round to nearest even; a NaN result is 0x7FC00000
    ...

so the sums depend on the order of a key's gradients only, never on how the keys interleave.
The table holds ``capacity`` keys; a gradient of a new key that finds it full (an overflow) first
flushes the table. A flush (an overflow or the batch's end) emits every key's sum, in order of
the key's first gradient, and clears the table.
"""

import numpy as np

from ..collective.reduction import CANONICAL_NAN_BITS, add_lines

__all__ = ["WORDS", "CANONICAL_NAN_BITS", "reduce_gradients", "add_words"]

WORDS = 16
# The collective reduction's word-wise binary32 add (any line length), NaN results made canonical.
add_words = add_lines


def reduce_gradients(gradients, *, capacity):
    """Sum ``gradients`` (``(key, words)`` pairs, words a uint32 array of 16) as the table does.

    Returns the emitted ``(key, sum)`` pairs in output order and the overflow count.
    """
    out, table, overflows = [], {}, 0
    for key, words in gradients:
        if key not in table and len(table) == capacity:
            out.extend(table.items())
            table, overflows = {}, overflows + 1
        words = np.asarray(words, np.uint32)
        table[key] = add_words(table[key], words) if key in table else words.copy()
    out.extend(table.items())
    return out, overflows
