"""The SmartNIC's embedding-bag step: pooled lookups forward, per-row gradients and the row update back.

The input is a batch of lookups in the layout of TorchRec's ``KeyedJaggedTensor``
(:class:`JaggedBatch`): the row ids of ``tables`` tables concatenated table-major in ``values``,
and ``offsets`` (``tables * batch + 1`` entries) marking bag ``b`` of table ``t`` as
``values[offsets[t * batch + b]:offsets[t * batch + b + 1]]``. A bag's rows are summed into one
pooled vector per (table, sample), as ``torch.nn.EmbeddingBag(mode="sum")`` does.

Every step below is binary32 with round to nearest even, one operation at a time, in this order
(the order the SmartNIC kernel follows; a NaN result is the canonical ``0x7FC00000``):

* **Pooling** (:func:`pool`): per bag, in the order of its lookups, ``s = row[0]`` (the first row's
  bits unchanged), then ``s = s + row[k]``; an empty bag pools to ``+0.0``. A lookup whose row is
  not below the table's ``rows`` (or is negative) contributes nothing and is counted
  (``bad_index``); the rest of the bag pools as if it were absent.
* **Per-row gradients** (:func:`row_gradients`): the gradient of a bag's pooled vector flows to
  every row the bag looked up (the fan-out). Samples are split over ``nodes`` data-parallel nodes in
  contiguous, even shards (:func:`shards`). On each node the *local loss reduction*
  (:func:`golden.dlrm.reduce_gradients`, keys ``(row, line)`` of 16 words, ``capacity`` keys) sums
  the node's contributions in lookup order; the *global reduction* then sums, per key, the partial
  sums every node emitted, in node order and within a node in emission order, ``s = p[0]`` then
  ``s = s + p[j]``. A key emitted twice by one node (an overflow flushed it) simply adds twice.
* **Row update**, applied to the rows the batch touched, in ascending row order (the order does not
  change the result: rows are independent):

  - SGD (:func:`sgd_rows`): ``w = w - (lr * g)``;
  - row-wise AdaGrad as FBGEMM's table-batched embedding does it (:func:`rowwise_adagrad_rows`),
    with one accumulator ``h`` per row: ``q = g[0] * g[0]``, ``q = q + g[i] * g[i]`` (each product
    rounded) over the row's words in order, ``h = h + q / dim``, ``m = lr / (sqrt(h) + eps)``, and
    ``w = w - (m * g)``.

  A row whose summed gradient holds a NaN or an infinity is not updated (neither ``w`` nor ``h``)
  and is counted (``bad_gradient``); every other row is updated as usual.

The bounds against independent oracles are :func:`pool_bound` (any float32 summation order of the
same terms) and :func:`update_bound`.
"""

from dataclasses import dataclass

import numpy as np

from ..optim._float32 import canonical_nan
from .reduction import WORDS, add_words, reduce_gradients

__all__ = ["JaggedBatch", "shards", "interleaved_lookups", "pool", "pool_bound", "row_gradients",
           "row_gradient_bound", "sgd_rows", "rowwise_adagrad_rows", "update_bound",
           "rowwise_multiplier_error", "UNIT_ROUNDOFF", "gamma"]

UNIT_ROUNDOFF = 2.0 ** -24
_SMALLEST = 2.0 ** -149


def gamma(n):
    """Higham's ``gamma_n = n u / (1 - n u)`` for binary32 (``u = 2^-24``)."""
    n = np.asarray(n, np.float64)
    return n * UNIT_ROUNDOFF / (1.0 - n * UNIT_ROUNDOFF)


@dataclass(frozen=True)
class JaggedBatch:
    """Lookups of ``tables`` tables for a batch of samples, in ``KeyedJaggedTensor`` layout.

    Parameters
    ----------
    values : array of int
        Row ids of every table, table-major, bag by bag.
    offsets : array of int
        ``tables * batch + 1`` nondecreasing offsets into ``values``, from 0 to ``len(values)``.
    tables : int
        Number of tables (the KJT's keys).
    """

    values: np.ndarray
    offsets: np.ndarray
    tables: int

    def __post_init__(self):
        values = np.asarray(self.values)
        offsets = np.asarray(self.offsets)
        if values.ndim != 1 or offsets.ndim != 1:
            raise ValueError("values and offsets must be one-dimensional")
        if values.size and not np.issubdtype(values.dtype, np.integer):
            raise ValueError(f"values must be integers, not {values.dtype}")
        if not np.issubdtype(offsets.dtype, np.integer):
            raise ValueError(f"offsets must be integers, not {offsets.dtype}")
        if self.tables < 1:
            raise ValueError(f"tables must be at least 1, not {self.tables}")
        if offsets.size < 1 or (offsets.size - 1) % self.tables:
            raise ValueError(f"offsets must hold tables * batch + 1 entries; {offsets.size} is not 1 more "
                             f"than a multiple of {self.tables} tables")
        if offsets[0] != 0 or offsets[-1] != values.size or np.any(np.diff(offsets) < 0):
            raise ValueError(f"offsets must rise from 0 to len(values) = {values.size}")
        object.__setattr__(self, "values", values.astype(np.int64))
        object.__setattr__(self, "offsets", offsets.astype(np.int64))

    @property
    def batch(self):
        """Samples in the batch (bags per table)."""
        return (self.offsets.size - 1) // self.tables

    def table(self, table):
        """One table's ``(values, offsets)``: its bags as a 1-D ``EmbeddingBag`` input, offsets from 0."""
        lo, hi = table * self.batch, (table + 1) * self.batch
        return (self.values[self.offsets[lo]:self.offsets[hi]],
                self.offsets[lo:hi + 1] - self.offsets[lo])

    def bag(self, table, sample):
        """The row ids of one bag, in lookup order."""
        slot = table * self.batch + sample
        return self.values[self.offsets[slot]:self.offsets[slot + 1]]

    @classmethod
    def from_bags(cls, bags):
        """A batch from ``bags[table][sample]`` (lists of row ids)."""
        tables = len(bags)
        lengths = [len(bag) for per_table in bags for bag in per_table]
        if len({len(per_table) for per_table in bags}) > 1:
            raise ValueError("every table needs the same number of bags")
        values = np.array([row for per_table in bags for bag in per_table for row in bag], np.int64)
        return cls(values, np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]), tables)


def shards(batch, nodes):
    """The sample ranges ``[(start, stop), ...]`` of ``nodes`` data-parallel nodes: contiguous, even.

    Node ``k`` takes samples ``k * batch // nodes`` up to ``(k + 1) * batch // nodes``.
    """
    if nodes < 1:
        raise ValueError(f"nodes must be at least 1, not {nodes}")
    return [(k * batch // nodes, (k + 1) * batch // nodes) for k in range(nodes)]


def interleaved_lookups(batch, *, group):
    """The kernel's issue order: ``(slot, row)`` pairs, ``slot = table * batch + sample`` naming the bag.

    Bags are taken ``group`` at a time in slot order; within a group, the ``k``-th lookup of every
    bag of the group, in slot order, then the ``k + 1``-th, and so on (a bag that has run out is
    skipped). Each bag's lookups keep their order, so :func:`pool`'s sums do not change; what does
    is the order the cache sees. The point: a pooling adder of latency ``L`` is never waiting on its
    own previous sum when ``group >= L`` bags are in flight, as it would be with one bag at a time.
    A group's sums are complete after its last lookup, so a reduction table of ``group`` keys per
    line, flushed at the end of every group, pools the batch exactly.
    """
    if group < 1:
        raise ValueError(f"group must be at least 1, not {group}")
    slots = batch.offsets.size - 1
    for first in range(0, slots, group):
        members = range(first, min(first + group, slots))
        longest = max(int(batch.offsets[s + 1] - batch.offsets[s]) for s in members)
        for k in range(longest):
            for slot in members:
                if batch.offsets[slot] + k < batch.offsets[slot + 1]:
                    yield slot, int(batch.values[batch.offsets[slot] + k])


def _bits(values):
    return np.asarray(values, np.float32).view(np.uint32)


def _add(a, b):
    # The reductions' word-wise add (canonical NaN), on float32 views.
    return add_words(_bits(a), _bits(b)).view(np.float32)


def _check_weights(weights, tables):
    if len(weights) != tables:
        raise ValueError(f"{len(weights)} weight tables for a batch of {tables} tables")
    for table, w in enumerate(weights):
        w = np.asarray(w)
        if w.dtype != np.float32 or w.ndim != 2 or w.shape[1] % WORDS:
            raise ValueError(f"table {table}: weights must be a float32 (rows, dim) array with dim a "
                             f"multiple of {WORDS}, not {w.dtype} {w.shape}")


def pool(weights, batch):
    """Pooled sums ``(tables, batch, dim)`` float32 and the ``bad_index`` count, in the order above.

    ``weights[t]`` is table ``t`` as a float32 ``(rows, dim)`` array (every table the same ``dim``).
    """
    _check_weights(weights, batch.tables)
    dim = weights[0].shape[1]
    pooled = np.zeros((batch.tables, batch.batch, dim), np.float32)
    bad = 0
    for table in range(batch.tables):
        w = weights[table]
        for sample in range(batch.batch):
            total = None
            for row in batch.bag(table, sample):
                if not 0 <= row < w.shape[0]:
                    bad += 1
                    continue
                total = w[row].copy() if total is None else _add(total, w[row])
            if total is not None:
                pooled[table, sample] = total
    return pooled, bad


def pool_bound(weights, batch):
    """Per element, how far two float32 sums of a bag in any orders may differ: ``2 gamma_(n-1) sum|x|``.

    Each recursive float32 summation of ``n`` terms is within ``gamma_(n-1) sum |x_k|`` of the exact
    sum (Higham, *Accuracy and Stability of Numerical Algorithms*, eq. 4.4), whatever the order, so
    :func:`pool` and ``torch.nn.EmbeddingBag`` differ by at most twice that. Bad lookups are left out.
    """
    _check_weights(weights, batch.tables)
    dim = weights[0].shape[1]
    bound = np.zeros((batch.tables, batch.batch, dim))
    for table in range(batch.tables):
        w = np.asarray(weights[table], np.float64)
        for sample in range(batch.batch):
            rows = [row for row in batch.bag(table, sample) if 0 <= row < w.shape[0]]
            if rows:
                bound[table, sample] = 2 * gamma(len(rows) - 1) * np.abs(w[rows]).sum(axis=0)
    return bound


def row_gradients(batch, grad_pooled, table, *, rows, nodes=1, capacity=None):
    """The summed gradient of every row of ``table`` the batch looked up: ``{row: float32 (dim,)}``.

    ``grad_pooled`` is the ``(tables, batch, dim)`` gradient of the pooled outputs; ``rows`` is the
    table's size (a lookup at or past it contributes nothing, as in :func:`pool`). ``capacity``
    (None: unbounded) is the local loss reduction's key capacity. The keys come back in ascending
    row order; the sums are in the order of the module docstring.
    """
    grad_pooled = np.asarray(grad_pooled, np.float32)
    if grad_pooled.shape[:2] != (batch.tables, batch.batch) or grad_pooled.shape[2] % WORDS:
        raise ValueError(f"grad_pooled must be ({batch.tables}, {batch.batch}, dim) with dim a multiple of "
                         f"{WORDS}, not {grad_pooled.shape}")
    lines = grad_pooled.shape[2] // WORDS
    partials = {}
    for start, stop in shards(batch.batch, nodes):
        contributions = []
        for sample in range(start, stop):
            words = _bits(grad_pooled[table, sample]).reshape(lines, WORDS)
            for row in batch.bag(table, sample):
                if 0 <= row < rows:
                    contributions.extend(((int(row), line), words[line]) for line in range(lines))
        emitted, _ = reduce_gradients(contributions, capacity=capacity or max(len(contributions), 1))
        for key, words in emitted:
            partials.setdefault(key, []).append(words.view(np.float32))
    result = {}
    for (row, line), parts in sorted(partials.items()):
        total = parts[0].copy()
        for part in parts[1:]:
            total = _add(total, part)
        result.setdefault(row, np.zeros(lines * WORDS, np.float32))[line * WORDS:(line + 1) * WORDS] = total
    return result


def row_gradient_bound(batch, grad_pooled, table, *, rows):
    """Per row and element, how far two float32 fan-out sums in any orders may differ: ``{row: (dim,)}``.

    A row's gradient sums its ``m`` contributions (one per lookup) along some tree of additions,
    each sum within ``gamma_(m-1) sum |x|`` of the exact one (as in :func:`pool_bound`), so two differ
    by at most twice that.
    """
    grad_pooled = np.abs(np.asarray(grad_pooled, np.float64))
    terms = {}
    for sample in range(batch.batch):
        for row in batch.bag(table, sample):
            if 0 <= row < rows:
                count, total = terms.get(int(row), (0, 0.0))
                terms[int(row)] = (count + 1, total + grad_pooled[table, sample])
    return {row: 2 * gamma(count - 1) * total for row, (count, total) in sorted(terms.items())}


def _finite(g):
    return bool(np.all(np.isfinite(g)))


def sgd_rows(weights, gradients, *, lr):
    """SGD on the rows of ``gradients``: a new float32 table and the ``bad_gradient`` count."""
    weights, lr, bad = np.array(weights, np.float32), np.float32(lr), 0
    for row, g in sorted(gradients.items()):
        if not _finite(g):
            bad += 1
            continue
        with np.errstate(all="ignore"):
            weights[row] = canonical_nan(weights[row] - lr * np.asarray(g, np.float32))
    return weights, bad


def rowwise_adagrad_rows(weights, accumulator, gradients, *, lr, eps):
    """Row-wise AdaGrad on the rows of ``gradients``: new weights, new accumulators, ``bad_gradient``."""
    weights, accumulator = np.array(weights, np.float32), np.array(accumulator, np.float32)
    lr, eps, bad = np.float32(lr), np.float32(eps), 0
    dim = np.float32(weights.shape[1])
    for row, g in sorted(gradients.items()):
        g = np.asarray(g, np.float32)
        if not _finite(g):
            bad += 1
            continue
        with np.errstate(all="ignore"):
            squares = g * g
            q = squares[0]
            for square in squares[1:]:
                q = np.float32(q + square)
            h = np.float32(accumulator[row] + np.float32(q / dim))
            m = np.float32(lr / np.float32(np.sqrt(h) + eps))
            accumulator[row] = h
            weights[row] = canonical_nan(weights[row] - m * g)
    return weights, accumulator, bad


def update_bound(new_weights, gradient, gradient_bound, *, multiplier, multiplier_error=0.0):
    """Per element, how far two float32 updates ``w' = w - m g`` of one row may differ.

    ``new_weights`` is one update's result, ``gradient`` its row gradient and ``gradient_bound`` a
    bound on how far the other's gradient may differ (:func:`pool_bound`'s argument, applied to the
    fan-out sums); ``multiplier`` is ``m`` (``lr`` for SGD) and ``multiplier_error`` a bound on the
    relative difference of the two ``m`` (0 for SGD; :func:`rowwise_multiplier_error`). Each update
    rounds ``m g`` (and, in torch's AdaGrad, ``g / std`` before it: two roundings) and the subtraction,
    so they differ by at most ``m |dg| (1 + e) + m |g| (e + 2u (1 + e)) + u (|w'| + |w''|)``, with
    ``|w''| <= |w'| +`` the rest; ``(1 + 4u)`` covers the second-order terms and the smallest
    subnormal an underflow.
    """
    m = np.float64(multiplier)
    u, e = UNIT_ROUNDOFF, float(multiplier_error)
    g = np.abs(np.asarray(gradient, np.float64))
    term = m * np.asarray(gradient_bound, np.float64) * (1 + e) + m * g * (e + 2 * u * (1 + e))
    w_new = np.abs(np.asarray(new_weights, np.float64))
    return (term * (1 + u) + u * (2 * w_new + term)) * (1 + 4 * u) + _SMALLEST


def rowwise_multiplier_error(gradient, gradient_bound, accumulator):
    """A bound on the relative difference of two row-wise AdaGrad multipliers ``lr / (sqrt(h) + eps)``.

    ``gradient`` is one update's row gradient, ``gradient_bound`` how far the other's may differ, and
    ``accumulator`` this update's new ``h``. The mean square ``q / dim`` differs by at most
    ``(sum(2 |g| dg + dg^2) + 2 gamma_dim sum g^2) / dim`` (the gradients' difference, and each side's
    summation of ``dim`` rounded squares), relative ``dh`` to ``h`` after one more rounding each;
    the square root halves it and adds ``u`` each, ``+ eps`` and the division ``u`` each:
    ``e = dh / 2 + 6u``, with ``(1 + 4u)`` for the second-order terms.
    """
    g = np.abs(np.asarray(gradient, np.float64))
    dg = np.asarray(gradient_bound, np.float64)
    dim = g.size
    dq = (np.sum(2 * g * dg + dg * dg) + 2 * gamma(dim) * np.sum(g * g)) / dim
    h = float(accumulator)
    dh = dq / h + 2 * UNIT_ROUNDOFF if h > 0 else np.inf
    return (dh / 2 + 6 * UNIT_ROUNDOFF) * (1 + 4 * UNIT_ROUNDOFF)
