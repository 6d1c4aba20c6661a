"""The SmartNIC embedding cache: set-associative, exact LRU, write-through (dissertation Section 5.5).

Row ``r`` of the embedding table lives in set ``r mod sets`` with tag ``r // sets`` (``sets`` a
power of two). Each set keeps an *age* per way, a permutation of ``0 .. ways - 1`` (0 the most
recently used); after reset way ``w`` has age ``w`` and no way is valid.

A lookup of row ``r``, in order:

* **hit**: a valid way of the set holds tag ``r // sets``; the row comes from the cache;
* **miss**: the way of age ``ways - 1`` (the least recently used; an invalid way is always older
  than every valid one, since a way only gets younger when it is used) gets the tag and is marked
  valid; the row is read from the GPU's HBM and written into that way.

Either way the way used becomes age 0 and every way younger than it was ages by one. This is
exact LRU: the hit/miss sequence equals that of an ``OrderedDict`` of ``ways`` rows per set.

Updates (the gradient path) are **write-through**: an update of row ``r`` writes HBM, and writes
the cached copy too when ``r`` is present; it changes neither the tags nor the ages. So a lookup
always returns HBM's current row, from the cache or not.

What a cache with several outstanding misses (MSHRs) is compared on. The model answers lookups
one by one, in order; a non-blocking cache decides them in that order too, but may return the
rows in another. So what must equal this model is:

* the per-lookup hit/miss sequence (and the hit and miss counts): each lookup is told by the
  side-band tag it carries, and a lookup of a row still being fetched is a **hit** here (its
  tag was written by the miss before it), merged into that fetch;
* the multiset of returned lookups, each (tag, row, hit flag, row data) as this model predicts
  it: nothing lost, nothing duplicated;
* the order of the lookups of one row (the cache keeps it; across rows it need not);
* one HBM read per miss, none per hit.
"""

import numpy as np

__all__ = ["LruCache", "hit_rate"]


class LruCache:
    """Exact per-set LRU of ``sets`` x ``ways`` rows, with hit and miss counters.

    Parameters
    ----------
    sets : int
        Number of sets, a power of two.
    ways : int
        Ways per set (1 for direct-mapped).
    """

    def __init__(self, *, sets, ways):
        if sets < 1 or sets & (sets - 1):
            raise ValueError(f"sets must be a power of two, not {sets}")
        if ways < 1:
            raise ValueError(f"ways must be at least 1, not {ways}")
        self.sets, self.ways = sets, ways
        self._shift = sets.bit_length() - 1
        self.tags = [[0] * ways for _ in range(sets)]
        self.valid = [[False] * ways for _ in range(sets)]
        self.age = [list(range(ways)) for _ in range(sets)]
        self.hits = 0
        self.misses = 0

    def locate(self, row):
        """``(set, tag)`` of ``row``."""
        return row & (self.sets - 1), row >> self._shift

    def find(self, row):
        """The way holding ``row``, or None; touches nothing."""
        index, tag = self.locate(row)
        for way in range(self.ways):
            if self.valid[index][way] and self.tags[index][way] == tag:
                return way
        return None

    def access(self, row):
        """Look ``row`` up: ``(hit, way)``, and update the tags, ages and counters."""
        index, tag = self.locate(row)
        way = self.find(row)
        hit = way is not None
        ages = self.age[index]
        if not hit:
            way = ages.index(self.ways - 1)
            self.tags[index][way] = tag
            self.valid[index][way] = True
        old = ages[way]
        for other in range(self.ways):
            if ages[other] < old:
                ages[other] += 1
        ages[way] = 0
        self.hits += hit
        self.misses += not hit
        return hit, way

    def run(self, rows):
        """The hit flags (a bool array) of looking up every row of ``rows`` in turn."""
        return np.array([self.access(int(row))[0] for row in rows], dtype=bool)


def hit_rate(rows, *, sets, ways):
    """Share of the lookups of ``rows`` that hit a cold ``sets`` x ``ways`` cache."""
    rows = np.asarray(rows)
    return float(LruCache(sets=sets, ways=ways).run(rows).mean()) if rows.size else 0.0
