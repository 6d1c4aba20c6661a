"""Index patterns that stress a banked scatter engine, shared by the golden and RTL tests.

A scatter engine with ``banks`` memory banks is assumed to interleave on the low index bits:
element ``i`` lives in bank ``i % banks``. Under that mapping the patterns below are the worst and
the corner cases for bank conflicts, read-after-write hazards and duplicate accumulation.
"""

import numpy as np

__all__ = ["ADVERSARIAL_KINDS", "adversarial_indices"]

ADVERSARIAL_KINDS = ("random", "same_bank", "same_index", "consecutive")


def _check_count(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, not {value!r}")
    return int(value)


def adversarial_indices(kind, n, size, banks, rng):
    """Generate ``n`` indices in ``[0, size)`` following one adversarial pattern, in ascending order.

    ``"random"``
        ``n`` distinct indices drawn uniformly (the targets' "random indices" case).
    ``"same_bank"``
        ``n`` distinct indices all in one randomly chosen bank: every access conflicts.
    ``"same_index"``
        ``n`` copies of one random index: every add depends on the previous one (RAW chain).
    ``"consecutive"``
        A run ``start, start + 1, ...`` of ``n`` indices: round-robin over the banks.

    The result is non-decreasing, as Top-K produces it; reverse or shuffle it for unsorted streams.

    Parameters
    ----------
    kind : str
        One of :data:`ADVERSARIAL_KINDS`.
    n : int
        Number of indices, >= 0; at most ``size`` (``size // banks`` for ``"same_bank"``) for the
        kinds with distinct indices.
    size : int
        Index range, >= 1.
    banks : int
        Number of banks, >= 1.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    numpy.ndarray
        int64 indices.

    Raises
    ------
    ValueError
        If ``kind`` is unknown, a count is out of range, or ``rng`` is not a Generator.
    """
    if kind not in ADVERSARIAL_KINDS:
        raise ValueError(f"kind must be one of {ADVERSARIAL_KINDS}, not {kind!r}")
    n = _check_count("n", n, 0)
    size = _check_count("size", size, 1)
    banks = _check_count("banks", banks, 1)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, not {type(rng).__name__}")
    if kind == "same_index":
        return np.full(n, rng.integers(size), np.int64)
    # Every bank below size // banks * banks holds at least size // banks indices, so that is the
    # capacity for "same_bank" whichever bank is drawn.
    capacity = size // banks if kind == "same_bank" else size
    if n > capacity:
        raise ValueError(f"n must be <= {capacity} for kind={kind!r}, size={size}, banks={banks}; not {n}")
    if kind == "consecutive":
        start = rng.integers(size - n + 1)
        return np.arange(start, start + n, dtype=np.int64)
    if kind == "random":
        return np.sort(rng.choice(size, n, replace=False)).astype(np.int64)
    bank = rng.integers(banks)
    return np.sort(rng.choice(capacity, n, replace=False)).astype(np.int64) * banks + bank
