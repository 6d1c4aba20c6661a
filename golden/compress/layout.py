"""Placing compressed pairs on devices and in chunks, and THE wire format the decompressor reads.

Smart-Infinity flattens the parameters and splits them evenly over the SmartSSDs (Section IV-D);
each device receives only the pairs of its own shard, with shard-relative indices. The fused update
path additionally groups a shard's pairs by chunk (the slice of parameters the updater streams at a
time) so that one sequential pass over the optimizer state can merge them in.

Wire format
-----------
Every stream is a sequence of little-endian 64-bit words (eight per 512-bit AXI beat).

Pair word
    bits [31:0]  index, unsigned, relative to the start of the shard;
    bits [63:32] value: the float32 bit pattern for ``"f32"``; for ``"f16"`` the float16 bit pattern
                 in bits [47:32], with bits [63:48] written as zero and ignored on read.
Header word (chunked streams only)
    bits [31:0]  count of pair words that follow for this chunk (0 for an empty chunk);
    bits [63:32] reserved, written as zero and ignored on read.

Flat stream (zero-fill + scatter mode)
    ``N`` pair words; ``N`` is not in the stream but in the engine's pair-count register.
Chunked stream (fused mode)
    For chunk ``j = 0 .. ceil(size / chunk_size) - 1`` in order: one header word, then that chunk's
    pair words, all with indices in ``[j * chunk_size, min((j + 1) * chunk_size, size))``. Every chunk
    has a header, empty ones included; the last chunk may be shorter than ``chunk_size``.

In both, the stream ends at the end of the transfer (AXI-Stream TLAST); words past the declared ones
and words missing before the end are the ``excess_pairs`` and ``missing`` errors of
:func:`golden.compress.scatter.scatter_checked`.
"""

import numpy as np

from .values import value_dtype

__all__ = [
    "WORD_BYTES", "even_shard_bounds", "shard_pairs", "chunk_count", "group_by_chunk",
    "encode_pairs", "decode_pairs", "encode_stream",
]

WORD_BYTES = 8
_LOW32 = np.uint64(0xFFFFFFFF)


def _check_pairs(indices, values):
    indices = np.asarray(indices)
    values = np.asarray(values)
    if indices.ndim != 1 or indices.dtype.kind not in "iu":
        raise ValueError(f"indices must be a one-dimensional integer array, not {indices.dtype} "
                         f"with {indices.ndim} dimensions")
    if values.shape != indices.shape:
        raise ValueError(f"values must have the shape of indices {indices.shape}, not {values.shape}")
    if indices.size and indices.min() < 0:
        raise ValueError(f"indices must be >= 0, found {indices.min()}")
    return indices.astype(np.int64), values


def _check_size(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, not {value!r}")
    return int(value)


def even_shard_bounds(size, devices):
    """Shard edges that split ``size`` parameters as evenly as possible over ``devices``.

    The first ``size % devices`` shards hold one parameter more, as ``numpy.array_split`` does.

    Parameters
    ----------
    size : int
        Number of parameters, >= 0.
    devices : int
        Number of devices, >= 1.

    Returns
    -------
    numpy.ndarray
        ``devices + 1`` int64 edges from 0 to ``size``; shard ``d`` is ``[edges[d], edges[d + 1])``.

    Raises
    ------
    ValueError
        If ``size`` or ``devices`` is out of range.
    """
    size = _check_size("size", size, 0)
    devices = _check_size("devices", devices, 1)
    lengths = np.full(devices, size // devices, np.int64)
    lengths[: size % devices] += 1
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def shard_pairs(indices, values, *, size=None, shard_size=None, shard_bounds=None):
    """Split a pair list over devices, making each shard's indices relative to its first parameter.

    Pass either ``shard_size`` (with ``size``: shards of ``shard_size``, the last one shorter) or
    ``shard_bounds``. The pair order within a shard is the input order.

    Parameters
    ----------
    indices : array_like
        Integer positions in ``[0, size)``.
    values : array_like
        Values, one per index, of any dtype (kept as they are).
    size : int, optional
        Total parameter count; required with ``shard_size``, checked against ``shard_bounds[-1]``.
    shard_size : int, optional
        Parameters per shard, >= 1.
    shard_bounds : array_like, optional
        Non-decreasing shard edges starting at 0; shard ``d`` is ``[bounds[d], bounds[d + 1])``.

    Returns
    -------
    list of (numpy.ndarray, numpy.ndarray)
        Per shard, int64 shard-relative indices and the matching values.

    Raises
    ------
    ValueError
        If not exactly one of ``shard_size`` and ``shard_bounds`` is given, if the bounds are
        malformed, or if an index lies outside ``[0, size)``.
    """
    indices, values = _check_pairs(indices, values)
    if (shard_size is None) == (shard_bounds is None):
        raise ValueError("pass exactly one of shard_size and shard_bounds")
    if shard_size is not None:
        if size is None:
            raise ValueError("size is required with shard_size")
        size = _check_size("size", size, 0)
        shard_size = _check_size("shard_size", shard_size, 1)
        bounds = np.append(np.arange(0, size, shard_size, dtype=np.int64), size)
    else:
        bounds = np.asarray(shard_bounds, dtype=np.int64)
        if bounds.ndim != 1 or bounds.size < 2 or bounds[0] != 0 or np.any(np.diff(bounds) < 0):
            raise ValueError(f"shard_bounds must be non-decreasing edges starting at 0, not {shard_bounds!r}")
        if size is not None and size != bounds[-1]:
            raise ValueError(f"size must equal shard_bounds[-1] = {bounds[-1]}, not {size!r}")
    if indices.size and indices.max() >= bounds[-1]:
        raise ValueError(f"indices must be < size = {bounds[-1]}, found {indices.max()}")
    owner = np.searchsorted(bounds, indices, side="right") - 1
    shards = []
    for device, start in enumerate(bounds[:-1]):
        mine = owner == device
        shards.append((indices[mine] - start, values[mine]))
    return shards


def chunk_count(size, chunk_size):
    """Number of chunks, ``ceil(size / chunk_size)``, of a shard; also its number of headers.

    Parameters
    ----------
    size : int
        Shard length, >= 0.
    chunk_size : int
        Chunk length, >= 1.

    Returns
    -------
    int
        The chunk count.

    Raises
    ------
    ValueError
        If ``size`` or ``chunk_size`` is out of range.
    """
    return -(-_check_size("size", size, 0) // _check_size("chunk_size", chunk_size, 1))


def group_by_chunk(indices, values, *, size, chunk_size, sort_within_chunk=False):
    """Order pairs by chunk ``index // chunk_size`` and count the pairs of every chunk.

    The reordering is stable: pairs of one chunk keep their input order, or with
    ``sort_within_chunk`` are ordered by index with equal indices in input order. Stability is what
    makes the scatter of the grouped list bit-identical to the scatter of the original even with
    duplicate indices.

    Parameters
    ----------
    indices : array_like
        Integer shard-relative positions in ``[0, size)``.
    values : array_like
        Values, one per index.
    size : int
        Shard length, >= 0; it fixes the number of chunks, trailing empty ones included.
    chunk_size : int
        Chunk length, >= 1.
    sort_within_chunk : bool, optional
        Also sort by index inside each chunk (what the fused merge path requires).

    Returns
    -------
    indices : numpy.ndarray
        int64 reordered indices.
    values : numpy.ndarray
        The values in the same order.
    counts : numpy.ndarray
        int64 pair count of each of the ``chunk_count(size, chunk_size)`` chunks.

    Raises
    ------
    ValueError
        On malformed pairs, out-of-range ``size``/``chunk_size``, or an index outside ``[0, size)``.
    """
    indices, values = _check_pairs(indices, values)
    chunks = chunk_count(size, chunk_size)
    if indices.size and indices.max() >= size:
        raise ValueError(f"indices must be < size = {size}, found {indices.max()}")
    key = indices if sort_within_chunk else indices // chunk_size
    order = np.argsort(key, kind="stable")
    counts = np.bincount(indices // chunk_size, minlength=chunks).astype(np.int64)
    return indices[order], values[order], counts


def encode_pairs(indices, values, *, value_format):
    """Pack pairs into pair words of the wire format.

    Parameters
    ----------
    indices : array_like
        Integer indices in ``[0, 2**32)``.
    values : array_like
        Values already in ``value_format`` (no conversion happens here).
    value_format : {"f32", "f16"}
        The value encoding.

    Returns
    -------
    numpy.ndarray
        uint64 pair words.

    Raises
    ------
    ValueError
        If an index does not fit 32 bits or ``values`` has the wrong dtype.
    """
    indices, values = _check_pairs(indices, values)
    dtype = value_dtype(value_format)
    if values.dtype != dtype:
        raise ValueError(f"values must have dtype {dtype} for value_format={value_format!r}, "
                         f"not {values.dtype}")
    if indices.size and indices.max() > 0xFFFFFFFF:
        raise ValueError(f"indices must be < 2**32 to fit the wire format, found {indices.max()}")
    bits = values.view(np.uint32 if dtype.itemsize == 4 else np.uint16).astype(np.uint64)
    return indices.astype(np.uint64) | (bits << np.uint64(32))


def decode_pairs(words, *, value_format):
    """Unpack pair words into indices and values (the inverse of :func:`encode_pairs`).

    Parameters
    ----------
    words : array_like
        uint64 pair words.
    value_format : {"f32", "f16"}
        The value encoding; for ``"f16"`` bits [63:48] are ignored.

    Returns
    -------
    indices : numpy.ndarray
        int64 indices.
    values : numpy.ndarray
        Values in ``value_format``.

    Raises
    ------
    ValueError
        If ``value_format`` is unknown.
    """
    dtype = value_dtype(value_format)
    words = np.asarray(words, dtype=np.uint64)
    high = words >> np.uint64(32)
    if dtype.itemsize == 4:
        values = high.astype(np.uint32).view(np.float32)
    else:
        values = (high & np.uint64(0xFFFF)).astype(np.uint16).view(np.float16)
    return (words & _LOW32).astype(np.int64), values


def encode_stream(indices, values, *, value_format, counts=None):
    """Build a flat stream (``counts`` is None) or a chunked stream of the wire format.

    Parameters
    ----------
    indices : array_like
        Shard-relative indices, already grouped by chunk when ``counts`` is given.
    values : array_like
        Values in ``value_format``.
    value_format : {"f32", "f16"}
        The value encoding.
    counts : array_like, optional
        Pair count per chunk, as returned by :func:`group_by_chunk`; they must sum to the pair count.

    Returns
    -------
    numpy.ndarray
        uint64 words: the pair words, each chunk preceded by its header when ``counts`` is given.

    Raises
    ------
    ValueError
        If ``counts`` is negative or does not sum to the number of pairs, or as :func:`encode_pairs`.
    """
    pair_words = encode_pairs(indices, values, value_format=value_format)
    if counts is None:
        return pair_words
    counts = np.asarray(counts, dtype=np.int64)
    if np.any(counts < 0) or counts.sum() != pair_words.size:
        raise ValueError(f"counts must be >= 0 and sum to the pair count {pair_words.size}, "
                         f"not {counts.sum()}")
    # Header j sits before the pairs of chunk j: after j earlier headers and counts[:j] pair words.
    header_positions = np.arange(counts.size) + np.concatenate([[0], np.cumsum(counts)[:-1]])
    stream = np.empty(pair_words.size + counts.size, np.uint64)
    is_header = np.zeros(stream.size, bool)
    is_header[header_positions] = True
    stream[is_header] = counts.astype(np.uint64)
    stream[~is_header] = pair_words
    return stream
