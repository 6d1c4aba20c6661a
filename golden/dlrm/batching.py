"""Graph-algorithm batching: mini-batches of similar samples (dissertation Section 5.4, Algorithm 1).

Plain batching cuts the dataset into mini-batches of consecutive samples. The graph algorithm
instead keeps a *pool* of samples (Algorithm 1's ``batch_size``, its incidence matrix) loaded in
dataset order, views it as a hypergraph whose nodes are the samples and whose hyperedges are the
embedding rows they look up (an edge's *degree*: how many pooled samples look it up), and takes
each mini-batch from the samples that meet most often on the most popular rows. The mini-batch
leaves the pool, the pool is refilled from the dataset, and the next mini-batch is chosen.

Batching only reorders samples: every sample, with all its lookups, leaves in exactly one
mini-batch. :func:`graph_batches` returns that order; mini-batch ``k`` is
``order[k * mini_batch:(k + 1) * mini_batch]`` (only the last may be shorter).
"""

import numpy as np

__all__ = ["graph_batches"]


def _edges(rows):
    """Each sample's distinct rows, flattened: ``(row, owner)`` with ``owner`` the sample's position."""
    ordered = np.sort(rows, axis=1)
    first = np.ones(ordered.shape, dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    owner = np.broadcast_to(np.arange(rows.shape[0])[:, None], rows.shape)
    return ordered[first], owner[first]


def _choose(rows, arrival, *, mini_batch, threshold):
    """Positions (into the pool) of the next mini-batch, best first: Algorithm 1, lines 12-20."""
    values, owner = _edges(rows)
    edges, degree = np.unique(values, return_counts=True)
    # Hyperedge degree sort: most samples first, ties to the lower row id (lexsort: last key first).
    popular = edges[np.lexsort((edges, -degree))[:threshold]]
    score = np.bincount(owner[np.isin(values, popular)], minlength=rows.shape[0])
    # The priority queue: most popular edges hit first, ties (score 0 included) to the oldest sample.
    return np.lexsort((arrival, -score))[:mini_batch]


def graph_batches(trace, *, mini_batch, pool, threshold, max_wait=None):
    """The order in which Algorithm 1 (Section 5.4) hands ``trace``'s samples out in mini-batches.

    What it does, step by step (a step forms one mini-batch):

    1. **Fill** (Alg. 1, lines 6-10): samples are loaded in dataset order until the pool holds
       ``pool`` samples or the dataset is exhausted.
    2. **Count** (line 9): each distinct row is a hyperedge; its degree is the number of pooled
       samples that look it up (a sample looking a row up twice counts once). The counters are
       recomputed from the pool at every step, which gives the counts Algorithm 1 keeps by
       incrementing on load and decrementing on removal (lines 9 and 24).
    3. **Sort edges** (lines 14-15): the ``threshold`` edges of highest degree (Algorithm 1's
       ``Hyperedge_Threshold`` ``n``) are kept; ties go to the lower row id.
    4. **Rank samples** (lines 13-19): each pooled sample scores the number of those edges it
       looks up (the text's "sample nodes that appear most often in these indexes", the key of
       the priority queue ``Sample_List``).
    5. **Take** (line 20): the mini-batch is the ``mini_batch`` samples of highest score, ties
       to the sample that entered the dataset first. When fewer than ``mini_batch`` samples score
       above zero, the rest are the oldest pooled samples (score 0, the same rule).
    6. **Delete** (lines 22-25): the mini-batch leaves the pool; go to 1. The last steps, once
       the dataset is exhausted, drain the pool.

    Interpretations of ours, where the seed is silent: the tie rules of steps 3 and 5; filling a
    short queue with the oldest samples (step 5); and the unit of a row id (global, so the same
    index in two tables is two edges). Section 5.4.2's *refresh batch* has two triggers; only
    the waiting-time one is modelled (``max_wait``): the similarity "downgrading factor" has no
    definition in the seed.

    Parameters
    ----------
    trace : array_like of int, shape (samples, lookups)
        Each sample's embedding rows (global row ids, as :func:`golden.dlrm.lookup_trace`
        gives).
    mini_batch : int
        Samples per mini-batch (Algorithm 1's ``mini_batch_size``).
    pool : int
        Samples pre-loaded to choose from (Algorithm 1's ``batch_size``), at least
        ``mini_batch``. ``pool == mini_batch`` is plain batching.
    threshold : int
        Popular edges the samples are ranked by (``Hyperedge_Threshold``).
    max_wait : int, optional
        Section 5.4.2's timing counter: when a pooled sample has waited ``max_wait`` steps
        (mini-batches formed since it was loaded), the pool stops being refilled until the graph
        algorithm has taken every sample in it. So no sample waits more than ``max_wait +
        ceil(pool / mini_batch) - 1`` steps. Without it a sample that shares few popular rows
        may wait until the dataset runs out.

    Returns
    -------
    order : numpy.ndarray of int64, shape (samples,)
        A permutation of ``range(samples)``: the samples in the order they leave.
    waits : numpy.ndarray of int64, shape (samples,)
        ``waits[i]``: the steps sample ``i`` spent in the pool before the one that took it
        (0 for every sample under plain batching).
    """
    trace = np.asarray(trace)
    if trace.ndim != 2 or not np.issubdtype(trace.dtype, np.integer):
        raise ValueError(f"trace must be a 2-D integer array, not {trace.dtype} of shape {trace.shape}")
    if mini_batch < 1 or threshold < 1:
        raise ValueError(f"mini_batch ({mini_batch}) and threshold ({threshold}) must be at least 1")
    if pool < mini_batch:
        raise ValueError(f"pool ({pool}) must hold at least a mini-batch ({mini_batch})")
    if max_wait is not None and max_wait < 0:
        raise ValueError(f"max_wait must be at least 0, not {max_wait}")
    samples = trace.shape[0]
    order, waits = [], np.zeros(samples, dtype=np.int64)
    entered = np.zeros(samples, dtype=np.int64)
    pooled = np.zeros(0, dtype=np.int64)  # sample ids, in order of loading
    loaded = step = 0
    draining = False
    while True:
        if not draining and loaded < samples:
            fresh = np.arange(loaded, min(samples, loaded + pool - pooled.size))
            entered[fresh] = step
            pooled = np.concatenate([pooled, fresh])
            loaded += fresh.size
        if not pooled.size:
            break
        if max_wait is not None and (step - entered[pooled]).max() >= max_wait:
            draining = True
        taken = _choose(trace[pooled], pooled, mini_batch=mini_batch, threshold=threshold)
        chosen = pooled[taken]
        waits[chosen] = step - entered[chosen]
        order.append(chosen)
        pooled = np.delete(pooled, taken)
        draining = draining and pooled.size > 0
        step += 1
    return np.concatenate(order) if order else np.zeros(0, dtype=np.int64), waits
