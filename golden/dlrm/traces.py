"""Synthetic DLRM lookup traces with the shapes of the dissertation's Table 5.1 and a Zipf law.

Table 5.1 gives, per dataset, the dense and sparse feature counts, the embedding rows in total
and the embedding dimension. The row counts of the single tables are not given, so the rows are
split evenly over the sparse features (table ``t`` holds global rows ``t * per_table`` onwards;
an assumption of ours). A sample looks up one row in each table.

Popularity follows a bounded Zipf law of exponent ``alpha``: the row of popularity rank ``k``
(1 .. ``n``, the table's rows) is drawn with a probability close to ``k ** -alpha`` (normalised).
Ranks come from the inverse of the distribution function of the continuous law on ``[1, n + 1)``,
``k = floor((((n + 1) ** (1 - alpha) - 1) * u + 1) ** (1 / (1 - alpha)))`` for ``u`` uniform in
[0, 1) (``k = floor((n + 1) ** u)`` at ``alpha = 1``): rank ``k`` gets the law's mass on
``[k, k + 1)``, which differs from ``k ** -alpha`` noticeably only for the first few ranks, and
needs no table of ``n`` probabilities (the Terabyte set has 226 M rows).
Rank ``k`` is row ``((k - 1) * 40499) mod n`` of its table (40499 is a prime, and a table size
it divides is refused, so the map is one to one), so popular rows are spread over the cache sets.
Every draw comes from ``numpy.random.default_rng(seed)``.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["Dataset", "DATASETS", "zipf_ranks", "lookup_trace"]

_SCATTER = 40499


@dataclass(frozen=True)
class Dataset:
    """One row of Table 5.1: name, dense and sparse feature counts, embedding rows, dimension."""

    name: str
    dense: int
    sparse: int
    rows: int
    dim: int

    @property
    def per_table(self):
        """Rows of each sparse feature's table (the rows split evenly)."""
        return self.rows // self.sparse


DATASETS = {
    "criteo-kaggle": Dataset("Criteo Kaggle", 13, 26, 33_800_000, 16),
    "criteo-terabyte": Dataset("Criteo Terabyte", 13, 26, 226_000_000, 64),
    "avazu": Dataset("Avazu", 1, 21, 9_300_000, 16),
}


def zipf_ranks(rng, count, *, n, alpha):
    """``count`` popularity ranks in ``1 .. n`` from the bounded Zipf law of exponent ``alpha``."""
    if n < 1:
        raise ValueError(f"n must be at least 1, not {n}")
    if alpha <= 0:
        raise ValueError(f"alpha must be positive, not {alpha}")
    u = rng.random(count)
    if abs(alpha - 1.0) < 1e-12:
        ranks = np.floor(np.power(float(n + 1), u))
    else:
        power = 1.0 - alpha
        ranks = np.floor(np.power((float(n + 1) ** power - 1.0) * u + 1.0, 1.0 / power))
    return np.clip(ranks.astype(np.int64), 1, n)


def lookup_trace(dataset, *, samples, alpha=1.05, seed=0, rows=None):
    """Global row ids looked up by ``samples`` samples, sample after sample, table after table.

    Returns an int64 array of shape ``(samples, sparse)``. ``rows`` (optional) scales the
    dataset down to that many rows in total, keeping its feature counts (for tests).
    """
    spec = DATASETS[dataset] if isinstance(dataset, str) else dataset
    per_table = (spec.rows if rows is None else rows) // spec.sparse
    if per_table < 1:
        raise ValueError(f"{spec.name}: fewer rows than its {spec.sparse} tables")
    if per_table % _SCATTER == 0:
        raise ValueError(f"{spec.name}: {per_table} rows per table is a multiple of {_SCATTER}")
    rng = np.random.default_rng(seed)
    ranks = zipf_ranks(rng, samples * spec.sparse, n=per_table, alpha=alpha).reshape(samples, spec.sparse)
    local = ((ranks - 1) * _SCATTER) % per_table
    return local + np.arange(spec.sparse, dtype=np.int64) * per_table
