"""The dedupe kernel: each unique row of a batch is asked for once, replies fan out in input order.

A batch of lookups (rows, in input order) enters a table of at most ``capacity`` unique rows
and ``positions`` lookups. In input order, a lookup whose row is already in the table points at
that entry; a new row takes the next entry and is *issued* (asked for, once) with that entry's
number as its tag. When a lookup finds the table full (a new row with ``capacity`` entries used,
or ``positions`` lookups taken), the table **overflows**: the lookups taken so far form a
*segment*, which is issued, answered and fanned out alone, the table is cleared, and the lookup
starts the next segment. The end of the batch ends the last segment.

Within a segment the issued rows go out in order of first appearance, and the fan-out gives, for
every lookup in input order, the reply of its row. The overflow count is the number of segments
cut short by a full table.
"""

import numpy as np

__all__ = ["segments", "dedupe"]


def segments(rows, *, capacity, positions):
    """Cut ``rows`` into segments: a list of ``(unique, inverse)`` pairs, and the overflow count.

    ``unique`` lists a segment's issued rows in order of first appearance; ``inverse[k]`` is the
    entry (index into ``unique``) of the segment's ``k``-th lookup.
    """
    result = []
    overflows = 0
    unique, inverse, entry = [], [], {}
    for row in (int(r) for r in rows):
        full = row not in entry and len(unique) == capacity
        if full or len(inverse) == positions:
            result.append((unique, inverse))
            overflows += 1
            unique, inverse, entry = [], [], {}
        if row not in entry:
            entry[row] = len(unique)
            unique.append(row)
        inverse.append(entry[row])
    if inverse:
        result.append((unique, inverse))
    return result, overflows


def dedupe(rows, *, capacity, positions):
    """Issued rows (every segment's, in order) and the overflow count of a batch.

    Fan-out needs no model beyond the input: the ``k``-th output is the reply for ``rows[k]``.
    """
    cut, overflows = segments(rows, capacity=capacity, positions=positions)
    issued = [row for unique, _ in cut for row in unique]
    return np.array(issued, dtype=np.int64), overflows
