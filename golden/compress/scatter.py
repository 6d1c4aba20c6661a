"""FPGA-side decompression semantics: the scatter-add the RTL must match bit for bit.

Smart-Infinity's decompressor (Section V-B) zero-fills a gradient buffer and writes every value at
its index. NearTrain defines the operation as a scatter-ADD so that duplicate indices have a meaning:

* the dense result starts as ``+0.0`` everywhere;
* pairs are applied in stream order, each as one IEEE-754 binary32 addition with round to nearest
  even, ``dense[i] = dense[i] + v``; a duplicate index therefore accumulates ``((0 + v0) + v1) + ...``;
* float16 values are first widened to float32, which is exact;
* subnormals are kept (no flush to zero) and a NaN result is the canonical quiet NaN ``0x7FC00000``;
* zero signs follow from the first point: under RNE ``+0.0 + -0.0 = +0.0`` and ``x + -x = +0.0``, so
  no element of the result is ever ``-0.0``, even one that receives only ``-0.0`` values.

:func:`scatter_checked` adds the behaviour on malformed input that the hardware implements; its
sticky :class:`ScatterStatus` bits are the RTL status register.
"""

import dataclasses
import enum

import numpy as np

from .layout import chunk_count, decode_pairs
from .values import canonicalise_nan, widen_to_f32

__all__ = ["scatter", "ScatterStatus", "ScatterErrors", "scatter_checked", "scatter_stream"]


class ScatterStatus(enum.IntFlag):
    """Sticky error bits of the decompressor status register (bit positions are part of the RTL).

    A dropped pair is counted under exactly one bit: the checks run in the order excess, out of
    range, chunk, sorted (see :func:`scatter_checked`) and the first that fails decides. A bit stays
    set for the rest of the transfer once its counter is non-zero.
    """

    #: bit 0: an index >= size; the pair is dropped, nothing is written.
    OUT_OF_RANGE = 1 << 0
    #: bit 1: the index is in range but outside the chunk whose header announced the pair; dropped.
    CHUNK_VIOLATION = 1 << 1
    #: bit 2: sorted order was promised and the index is below the last accepted index; dropped.
    UNSORTED = 1 << 2
    #: bit 3: a pair word beyond the declared count (pair-count register or chunk headers); dropped.
    EXCESS_PAIRS = 1 << 3
    #: bit 4: the stream ended before every declared header or pair word arrived.
    MISSING = 1 << 4


@dataclasses.dataclass(frozen=True)
class ScatterErrors:
    """Error counters of one decompression; ``status`` gives the matching sticky bits.

    Attributes
    ----------
    out_of_range, chunk_violation, unsorted, excess_pairs : int
        Dropped pairs, by the first check they failed (see :class:`ScatterStatus`).
    missing : int
        Declared words that never arrived: pairs, plus one per absent chunk header.
    """

    out_of_range: int = 0
    chunk_violation: int = 0
    unsorted: int = 0
    excess_pairs: int = 0
    missing: int = 0

    @property
    def status(self):
        """The :class:`ScatterStatus` bits of the non-zero counters."""
        status = ScatterStatus(0)
        for flag in ScatterStatus:
            if getattr(self, flag.name.lower()):
                status |= flag
        return status


def _check_indices(indices, length):
    indices = np.asarray(indices)
    if indices.ndim != 1 or indices.dtype.kind not in "iu" or indices.size != length:
        raise ValueError(f"indices must be a one-dimensional integer array of {length} elements "
                         f"(one per value), not {indices.dtype} of shape {indices.shape}")
    if indices.size and indices.min() < 0:
        raise ValueError(f"indices must be >= 0 (the wire carries unsigned indices), found {indices.min()}")
    return indices.astype(np.int64)


def _check_size(size):
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise ValueError(f"size must be an integer >= 0, not {size!r}")
    return int(size)


def _scatter_add(size, indices, values):
    dense = np.zeros(size, np.float32)
    # ufunc.at is unbuffered: it applies the float32 adds one pair at a time in array order, which is
    # the pair-order accumulation defined above (the tests compare it with an explicit loop).
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf and inf - inf are defined here
        np.add.at(dense, indices, values)
    return canonicalise_nan(dense)


def scatter(indices, values, size):
    """Scatter-add well-formed pairs into a dense float32 vector (see the module docstring).

    Parameters
    ----------
    indices : array_like
        Integer positions in ``[0, size)``; duplicates accumulate in pair order.
    values : array_like
        float32 or float16 values, one per index.
    size : int
        Length of the dense result, >= 0.

    Returns
    -------
    numpy.ndarray
        The float32 dense gradient.

    Raises
    ------
    ValueError
        On a malformed pair list or an index outside ``[0, size)``; use :func:`scatter_checked` for
        the hardware's behaviour on such input.
    """
    values = widen_to_f32(values)
    indices = _check_indices(indices, values.size)
    size = _check_size(size)
    if indices.size and indices.max() >= size:
        raise ValueError(f"indices must be < size = {size}, found {indices.max()}")
    return _scatter_add(size, indices, values)


def _apply_checked(size, indices, values, pair_chunk, chunk_size, sorted_within_chunk, excess, missing):
    """Run the in-stream checks on the delivered, declared pairs and scatter the accepted ones."""
    in_range = indices < size
    in_chunk = np.ones_like(in_range) if pair_chunk is None else indices // chunk_size == pair_chunk
    passed = in_range & in_chunk
    in_order = passed.copy()
    if sorted_within_chunk:
        # Compare with the highest index accepted so far. Pairs dropped as unsorted are below it, so a
        # running maximum over all pairs that passed the earlier checks is that value; it need not reset
        # at chunk starts because chunk j's indices exceed every index of chunks < j.
        running_max = np.maximum.accumulate(np.where(passed, indices, -1))
        previous_max = np.concatenate([[-1], running_max[:-1]])
        in_order &= indices >= previous_max
    errors = ScatterErrors(
        out_of_range=int(np.count_nonzero(~in_range)),
        chunk_violation=int(np.count_nonzero(in_range & ~in_chunk)),
        unsorted=int(np.count_nonzero(passed & ~in_order)),
        excess_pairs=int(excess),
        missing=int(missing),
    )
    return _scatter_add(size, indices[in_order], values[in_order]), errors


def scatter_checked(indices, values, size, *, chunk_size=None, chunk_counts=None, sorted_within_chunk=False,
                    declared_count=None):
    """Scatter-add with the hardware's handling of malformed input.

    A pair passes these checks in order; the first failure drops it and counts it once:

    1. ``excess_pairs``: it lies beyond the declared pairs (``declared_count`` for a flat stream,
       ``sum(chunk_counts)`` for a chunked one);
    2. ``out_of_range``: ``index >= size``; it is never written;
    3. ``chunk_violation`` (chunked only): ``index // chunk_size`` is not the chunk whose count the
       pair belongs to;
    4. ``unsorted`` (only with ``sorted_within_chunk``): ``index`` is below the last accepted index.
       Such a pair is dropped, not applied: a path that merges a sorted pair stream into a sequential
       pass over the state has already written that element back. Equal indices are in order and
       accumulate. Pairs dropped by checks 1-3 do not move the last accepted index.

    If fewer pairs arrive than declared, ``missing`` counts the shortfall and the received pairs are
    still applied. Empty chunks and a last chunk shorter than ``chunk_size`` are valid.

    Parameters
    ----------
    indices : array_like
        Non-negative integer indices, in stream order.
    values : array_like
        float32 or float16 values, one per index.
    size : int
        Length of the dense result (the shard), >= 0.
    chunk_size : int, optional
        Chunk length (>= 1) of a chunked stream; requires ``chunk_counts``.
    chunk_counts : array_like, optional
        Declared pair count of each of the ``ceil(size / chunk_size)`` chunks (the header words).
    sorted_within_chunk : bool, optional
        Whether the sender promised indices non-decreasing within each chunk (within the whole
        stream for a flat stream).
    declared_count : int, optional
        Flat streams only: the pair-count register, >= 0; default the number of pairs given.

    Returns
    -------
    dense : numpy.ndarray
        float32 result of the accepted pairs, as :func:`scatter`.
    errors : ScatterErrors
        The counters; ``errors.status`` holds the sticky bits.

    Raises
    ------
    ValueError
        On arguments the hardware cannot receive: mismatched lengths, negative indices, non-float32/16
        values, ``chunk_size`` without ``chunk_counts`` (or the reverse), a wrong number of
        ``chunk_counts``, negative counts, or ``declared_count`` given with a chunked stream.
    """
    values = widen_to_f32(values)
    indices = _check_indices(indices, values.size)
    size = _check_size(size)
    if (chunk_size is None) != (chunk_counts is None):
        raise ValueError("chunk_size and chunk_counts must be given together")
    if chunk_size is None:
        if declared_count is not None and (isinstance(declared_count, bool) or declared_count < 0):
            raise ValueError(f"declared_count must be an integer >= 0, not {declared_count!r}")
        declared = indices.size if declared_count is None else int(declared_count)
        pair_chunk = None
    else:
        if declared_count is not None:
            raise ValueError("declared_count applies to flat streams; a chunked stream declares its "
                             "pairs in chunk_counts")
        counts = np.asarray(chunk_counts, dtype=np.int64)
        chunks = chunk_count(size, chunk_size)
        if counts.shape != (chunks,) or np.any(counts < 0):
            raise ValueError(f"chunk_counts must hold {chunks} counts >= 0 (one per chunk), not {counts!r}")
        declared = int(counts.sum())
        pair_chunk = np.repeat(np.arange(chunks), counts)[: indices.size]
    received = min(declared, indices.size)
    return _apply_checked(size, indices[:received], values[:received], pair_chunk, chunk_size,
                          sorted_within_chunk, excess=indices.size - received, missing=declared - received)


def _parse_chunked(words, chunks):
    """Split a chunked stream into pair words, their chunk numbers, and the excess/missing counts."""
    position, missing = 0, 0
    pair_slices, pair_chunks = [], []
    for chunk in range(chunks):
        if position >= words.size:
            missing += chunks - chunk
            break
        count = int(words[position] & np.uint64(0xFFFFFFFF))
        position += 1
        received = min(count, words.size - position)
        missing += count - received
        pair_slices.append(words[position: position + received])
        pair_chunks.append(np.full(received, chunk, np.int64))
        position += received
    pair_words = np.concatenate(pair_slices) if pair_slices else np.zeros(0, np.uint64)
    pair_chunk = np.concatenate(pair_chunks) if pair_chunks else np.zeros(0, np.int64)
    return pair_words, pair_chunk, words.size - position, missing


def scatter_stream(words, size, *, value_format, chunk_size=None, pair_count=None, sorted_within_chunk=False):
    """Decode a wire-format stream (see :mod:`golden.compress.layout`) and scatter it as the RTL does.

    A flat stream (``chunk_size`` None) holds ``pair_count`` pair words; a chunked stream holds one
    header per chunk, each followed by its pairs. Checks and counters are those of
    :func:`scatter_checked`; additionally, in a chunked stream every absent header counts once in
    ``missing``, and every word after the last chunk's pairs counts in ``excess_pairs``.

    Parameters
    ----------
    words : array_like
        uint64 stream words, up to the end of the transfer.
    size : int
        Shard length, >= 0.
    value_format : {"f32", "f16"}
        Value encoding of the pair words.
    chunk_size : int, optional
        Chunk length, >= 1, for a chunked stream.
    pair_count : int, optional
        Flat streams only: the pair-count register; default every word is a declared pair.
    sorted_within_chunk : bool, optional
        As :func:`scatter_checked`.

    Returns
    -------
    dense : numpy.ndarray
        float32 result.
    errors : ScatterErrors
        The counters and sticky bits.

    Raises
    ------
    ValueError
        If an argument is out of range or ``pair_count`` is given with ``chunk_size``.
    """
    words = np.asarray(words, dtype=np.uint64).ravel()
    if chunk_size is None:
        indices, values = decode_pairs(words, value_format=value_format)
        return scatter_checked(indices, values, size, sorted_within_chunk=sorted_within_chunk,
                               declared_count=pair_count)
    if pair_count is not None:
        raise ValueError("pair_count applies to flat streams; a chunked stream declares its pairs in headers")
    size = _check_size(size)
    pair_words, pair_chunk, excess, missing = _parse_chunked(words, chunk_count(size, chunk_size))
    indices, values = decode_pairs(pair_words, value_format=value_format)
    return _apply_checked(size, indices, widen_to_f32(values), pair_chunk, chunk_size, sorted_within_chunk,
                          excess=excess, missing=missing)
