"""The chunk parser's view of a chunked wire stream: the accepted pairs of every chunk, in order.

:func:`golden.compress.scatter_stream` gives the dense result and the error counters of a chunked
stream; the parser in front of the scatter (``rtl.compress.ChunkParser``) does the checking half
of it and hands on the accepted pairs with chunk-relative indices, chunk by chunk. This model
says which pairs those are, with the same rules (:func:`golden.compress.scatter_checked`): a pair
word is dropped and counted under the first check it fails, out of range (``index >= size``),
chunk violation (``index // chunk_size`` is not its header's chunk), unsorted (with
``sorted_within_chunk``: below the highest index accepted so far in its chunk); words after the
last chunk's pairs are ``excess_pairs``; declared pair words and headers that never arrive are
``missing``, and their chunks are still closed, empty or as far as they arrived.
"""

import numpy as np

from .layout import chunk_count
from .scatter import ScatterErrors
from .values import value_dtype

__all__ = ["parse_chunked"]

_LOW32 = (1 << 32) - 1


def parse_chunked(words, size, *, chunk_size, value_format, sorted_within_chunk=False):
    """Split a chunked stream into its chunks' accepted pairs, and count what was dropped.

    Parameters
    ----------
    words : array_like
        uint64 stream words, up to the end of the transfer.
    size : int
        Shard length, >= 0; the stream has ``ceil(size / chunk_size)`` chunks.
    chunk_size : int
        Chunk length, >= 1.
    value_format : {"f32", "f16"}
        Pair value encoding: the value is the low 32 or 16 bits of the word's upper half.
    sorted_within_chunk : bool
        Whether the sender promised non-decreasing indices within each chunk.

    Returns
    -------
    chunks : list of dict
        Per chunk, in order: ``length`` (its element count) and ``pairs``, a list of
        ``(word, offset, value)``: the accepted pair's position in ``words``, its index relative to
        the chunk's first element, and the raw value bits.
    errors : ScatterErrors
        The counters, as :func:`golden.compress.scatter_stream` reports them.
    """
    words = [int(word) for word in np.asarray(words, dtype=np.uint64).ravel()]
    value_mask = (1 << (8 * value_dtype(value_format).itemsize)) - 1
    counts = {"out_of_range": 0, "chunk_violation": 0, "unsorted": 0, "missing": 0}
    chunks = []
    position = 0
    for chunk in range(chunk_count(size, chunk_size)):
        pairs = []
        chunks.append({"length": min(chunk_size, size - chunk * chunk_size), "pairs": pairs})
        if position >= len(words):
            counts["missing"] += 1          # the header itself never arrived
            continue
        declared = words[position] & _LOW32
        position += 1
        received = min(declared, len(words) - position)
        counts["missing"] += declared - received
        highest = -1
        for at in range(position, position + received):
            index = words[at] & _LOW32
            if index >= size:
                counts["out_of_range"] += 1
            elif index // chunk_size != chunk:
                counts["chunk_violation"] += 1
            elif sorted_within_chunk and index < highest:
                counts["unsorted"] += 1
            else:
                highest = max(highest, index)
                pairs.append((at, index % chunk_size, (words[at] >> 32) & value_mask))
        position += received
    return chunks, ScatterErrors(excess_pairs=len(words) - position, **counts)
