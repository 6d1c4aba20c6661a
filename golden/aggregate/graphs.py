"""Seeded synthetic graphs with the published statistics of the GNN benchmark datasets.

No dataset can be downloaded here, so each benchmark graph is replaced by a Chung-Lu random
graph with the dataset's node and edge counts and a power-law degree distribution:

1. Expected degrees follow a truncated power law, ``w_i = d_max (1 + i / k) ** (-1 / (gamma - 1))``
   for ``i = 0 .. n - 1``, with ``k`` found by bisection so that ``sum(w) = 2 E``. ``d_max``
   is the dataset's published largest degree where it is known (Cora 168, Citeseer 99,
   Pubmed 171) and an assumption otherwise (:attr:`GraphSpec.max_degree_known` says which).
2. Endpoint pairs are drawn independently with probability proportional to ``w`` (Chung and
   Lu's model), in batches from ``numpy.random.default_rng(seed)``; self-pairs are dropped,
   each pair is made undirected, and the first ``E`` distinct pairs in drawing order are kept,
   so the graph has exactly ``E`` undirected edges.
3. The node labels are shuffled by the same generator, so that hubs sit at random ids as in
   the real datasets (whose ids are not sorted by degree).

:func:`generate` returns the symmetric 0/1 adjacency without self-loops (``2 E`` nonzeros);
:func:`with_self_loops` adds ``I`` and :func:`gcn_normalise` builds the GCN operator
``D^-1/2 (A + I) D^-1/2`` (Kipf and Welling; the seed's Section 2.4.1). Reddit
(114.6 M directed edges) is only ever used through :func:`degree_sequence`, for the cycle model.

The statistics are the public ones (PyG / DGL dataset cards), not the seed's: see
``/work/shared/targets.md``. The CoraFull edge count 126,842 is taken as given there (the
dataset cards count each undirected edge twice for some graphs and once for others; taking it
as undirected gives the denser graph).
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["GraphSpec", "GRAPHS", "BENCHMARK_GRAPHS", "graph_spec", "expected_degrees", "generate",
           "degree_sequence", "with_self_loops", "gcn_normalise", "graph_statistics"]


@dataclass(frozen=True)
class GraphSpec:
    """Published statistics of one benchmark graph.

    Attributes
    ----------
    name : str
    nodes, edges : int
        Node count and undirected edge count.
    features, classes : int
        Input feature width and label count (for the GCN layer sizes).
    max_degree : int
        Largest degree the generator aims at (``d_max`` above).
    max_degree_known : bool
        Whether ``max_degree`` is the dataset's published value or an assumption.
    exponent : float
        Power-law exponent ``gamma`` of the degree distribution.
    """

    name: str
    nodes: int
    edges: int
    features: int
    classes: int
    max_degree: int
    max_degree_known: bool
    exponent: float = 2.5


GRAPHS = {spec.name: spec for spec in (
    GraphSpec("cora", 2708, 5429, 1433, 7, 168, True),
    GraphSpec("citeseer", 3327, 4732, 3703, 6, 99, True),
    GraphSpec("pubmed", 19717, 44338, 500, 3, 171, True),
    GraphSpec("corafull", 19793, 126842, 8710, 70, 300, False),
    GraphSpec("coauthor_physics", 34493, 247962, 8415, 5, 400, False),
    GraphSpec("reddit", 232965, 57307946, 602, 41, 21657, True, exponent=2.2),
)}
# The five graphs an edge list is generated for (Reddit: degree sequence only).
BENCHMARK_GRAPHS = ("cora", "citeseer", "pubmed", "corafull", "coauthor_physics")


def graph_spec(graph):
    """The :class:`GraphSpec` for a name of :data:`GRAPHS` (or a spec, returned as is)."""
    if isinstance(graph, GraphSpec):
        return graph
    try:
        return GRAPHS[graph]
    except KeyError:
        raise ValueError(f"graph must be one of {', '.join(GRAPHS)}, not {graph!r}") from None


def expected_degrees(spec):
    """Chung-Lu expected degrees (float64, descending) summing to ``2 E``; see the module docstring."""
    spec = graph_spec(spec)
    n, target, top = spec.nodes, 2.0 * spec.edges, float(spec.max_degree)
    alpha = 1.0 / (spec.exponent - 1.0)
    index = np.arange(n, dtype=np.float64)

    def total(k):
        return float(np.sum(top * (1.0 + index / k) ** -alpha))

    low, high = 1e-9, 1e12
    if not total(low) <= target <= total(high):
        raise ValueError(f"{spec.name}: no power law with d_max {spec.max_degree} has {spec.edges} edges")
    for _ in range(200):
        middle = np.sqrt(low * high)
        low, high = (middle, high) if total(middle) < target else (low, middle)
    return top * (1.0 + index / high) ** -alpha


def generate(graph, seed=0):
    """Symmetric 0/1 adjacency (CSR, float32 ones, no self-loops) of a synthetic ``graph``.

    Parameters
    ----------
    graph : str or GraphSpec
        One of :data:`BENCHMARK_GRAPHS` (Reddit is refused: too large, see :func:`degree_sequence`).
    seed : int
        Seed of ``numpy.random.default_rng``; the same seed gives the same graph.

    Returns
    -------
    scipy.sparse.csr_matrix
        ``nodes x nodes``, ``2 E`` stored ones, sorted indices.
    """
    spec = graph_spec(graph)
    if spec.edges > 5_000_000:
        raise ValueError(f"{spec.name} is for the cycle model only: use degree_sequence()")
    rng = np.random.default_rng(seed)
    weights = expected_degrees(spec)
    cumulative = np.cumsum(weights)
    cumulative /= cumulative[-1]
    n = spec.nodes
    keys = np.empty(0, dtype=np.int64)
    while True:
        batch = max(1024, 2 * (spec.edges - keys.size))
        u = np.searchsorted(cumulative, rng.random(batch), side="right")
        v = np.searchsorted(cumulative, rng.random(batch), side="right")
        u, v = np.minimum(u, n - 1), np.minimum(v, n - 1)
        keep = u != v
        low, high = np.minimum(u[keep], v[keep]), np.maximum(u[keep], v[keep])
        keys = np.concatenate([keys, low.astype(np.int64) * n + high])
        _, first = np.unique(keys, return_index=True)
        if first.size >= spec.edges:
            keys = keys[np.sort(first)[:spec.edges]]
            break
        keys = keys[np.sort(first)]
    labels = rng.permutation(n)
    rows, cols = labels[keys // n], labels[keys % n]
    ones = np.ones(2 * spec.edges, dtype=np.float32)
    adjacency = sp.coo_matrix((ones, (np.concatenate([rows, cols]), np.concatenate([cols, rows]))),
                              shape=(n, n)).tocsr()
    adjacency.sort_indices()
    return adjacency


def degree_sequence(graph, seed=0):
    """Node degrees of a Chung-Lu graph without building it: a multinomial draw of ``2 E`` endpoints.

    For graphs too large to materialise (Reddit); duplicate edges are not removed, so this is
    the multigraph's degree sequence, which is what the cycle model needs (nonzeros per row).
    """
    spec = graph_spec(graph)
    rng = np.random.default_rng(seed)
    weights = expected_degrees(spec)
    degrees = rng.multinomial(2 * spec.edges, weights / weights.sum())
    return degrees[rng.permutation(spec.nodes)]


def with_self_loops(adjacency):
    """``A + I`` as float32 CSR with sorted indices (an existing diagonal entry gets + 1)."""
    result = (sp.csr_matrix(adjacency, dtype=np.float32) + sp.eye(adjacency.shape[0], dtype=np.float32,
                                                                    format="csr")).tocsr()
    result.sort_indices()
    return result


def gcn_normalise(adjacency):
    """The GCN operator ``D^-1/2 (A + I) D^-1/2`` as float32 CSR (``D`` the degrees of ``A + I``).

    The scale factors are computed in float64 and each product rounded once to float32; these
    float32 values are the inputs of every model and of the hardware.
    """
    looped = with_self_loops(adjacency).astype(np.float64)
    scale = 1.0 / np.sqrt(np.asarray(looped.sum(axis=1)).ravel())
    normalised = sp.diags(scale) @ looped @ sp.diags(scale)
    normalised = sp.csr_matrix(normalised).astype(np.float32)
    normalised.sort_indices()
    return normalised


def graph_statistics(adjacency):
    """Nodes, undirected edges, nonzeros, mean and largest degree of a symmetric adjacency."""
    degrees = np.diff(sp.csr_matrix(adjacency).indptr)
    return {"nodes": adjacency.shape[0], "edges": int(adjacency.nnz // 2), "nnz": int(adjacency.nnz),
            "mean_degree": float(degrees.mean()), "max_degree": int(degrees.max())}
