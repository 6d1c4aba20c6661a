"""The pair-by-pair oracle of ``golden.compress``'s scatter, and the checks its golden tests share.

:func:`reference_scatter` applies the documented rules one pair at a time with scalar float32 adds,
so that the vectorised golden models (``np.add.at``, running maxima) are never trusted on their
own: ``test_golden_scatter.py`` holds ``scatter``, ``scatter_checked`` and ``scatter_stream`` to
it, and ``test_golden_flat_scatter.py`` the flat-stream call that ``test_dram_scatter`` compares
the RTL with.
"""

import numpy as np

from scripts.sim import knobs

__all__ = ["COUNTERS", "reference_scatter", "assert_same_bits", "assert_errors", "random_values"]

COUNTERS = ("out_of_range", "chunk_violation", "unsorted", "excess_pairs", "missing")


def reference_scatter(indices, values, size, *, chunk_size=None, counts=None, promised_sorted=False,
                      declared=None):
    """The documented rules applied one pair at a time, with float32 scalar adds."""
    dense = np.zeros(size, np.float32)
    found = dict.fromkeys(COUNTERS, 0)
    declared = len(indices) if declared is None else declared
    chunk_of_pair = None
    if counts is not None:
        declared = int(np.sum(counts))
        chunk_of_pair = np.repeat(np.arange(len(counts)), counts)
    current_chunk, last_accepted = None, None
    pairs = zip(np.asarray(indices).tolist(), values.astype(np.float32), strict=True)
    for position, (index, value) in enumerate(pairs):
        chunk = 0 if chunk_of_pair is None or position >= declared else chunk_of_pair[position]
        if chunk != current_chunk:
            current_chunk, last_accepted = chunk, None
        if position >= declared:
            found["excess_pairs"] += 1
        elif index >= size:
            found["out_of_range"] += 1
        elif chunk_of_pair is not None and index // chunk_size != chunk:
            found["chunk_violation"] += 1
        elif promised_sorted and last_accepted is not None and index < last_accepted:
            found["unsorted"] += 1
        else:
            last_accepted = index
            dense[index] = dense[index] + value
    found["missing"] = max(0, declared - len(indices))
    return dense, found


def assert_same_bits(actual, expected, what):
    mismatch = np.flatnonzero(actual.view(np.uint32) != expected.view(np.uint32))
    assert actual.dtype == np.float32 and mismatch.size == 0, (
        f"{what}: bits differ at {mismatch[:5]}: {actual[mismatch[:5]]} vs {expected[mismatch[:5]]} "
        f"({knobs.describe()})")


def assert_errors(errors, expected, what):
    found = {name: getattr(errors, name) for name in COUNTERS}
    assert found == expected, f"{what}: {found} != {expected} ({knobs.describe()})"


def random_values(rng, count, value_format):
    """Values over a wide exponent range, in float32 or float16 (kept inside the float16 range)."""
    spread = 20 if value_format == "f32" else 6
    values = rng.standard_normal(count) * 2.0 ** rng.integers(-spread, spread + 1, count)
    return values.astype(np.float32 if value_format == "f32" else np.float16)
