"""Host preprocessing (Table 4.1's ``Host_data_preprocess``): a sparse x dense job cut into runtime tasks.

``OUT = A B`` with A an n x n sparse matrix and B n x F (the GCN aggregation ``A (X W)``):

* **Data.** Line ``l`` of the global data space is row ``l`` of B, its ``F`` words packed
  low first; it is loaded into the node that owns its data range ``l // block``.
* **Tasks.** Output row ``r`` is executed by its home node; its nonzeros are spawned by one
  node, ``spawner(r)``: the home itself (``placement="home"``, no task crosses the network),
  the next node (``"next"``: every task travels one hop, the seed's circulating tasks), or
  one of the other nodes in turn (``"spread"``: node ``(home + 1 + (r >> (home_shift +
  log2 nodes)) mod (nodes - 1)) mod nodes``: every node sends tasks to every other node). Each
  spawner cuts its rows column block by column block (the seed's block tiling, Figure 4-10);
  within a block it takes the nonzeros column by column (then row by row) and puts each in
  the slot ``row mod 4`` of the current packet, opening a new packet when that slot is taken
  (so a packet never holds two rows of one output bank, the seed's rule). A packet's range is
  its block.

Each output row's nonzeros therefore come from one spawner, in column order, which makes the
float32 results independent of the network's timing (:mod:`golden.runtime.protocol`).

:func:`build_job` is the GCN aggregation that ``neartrain demo cluster`` and ``bench_runtime
scaling`` run on the cluster (a synthetic graph of :data:`GRAPHS`), and :data:`TRAFFIC` the
packet counters of a node that they compare with :class:`golden.runtime.protocol.Cluster`'s.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from golden.aggregate.graphs import GraphSpec, gcn_normalise, generate

from .kernels import LINE_WORDS, words_line
from .packet import ITEMS, TASK, Item, Packet, encode
from .protocol import Config

__all__ = ["Workload", "sparse_dense_workload", "PLACEMENTS", "GRAPHS", "DEFAULT_FEATURES", "TRAFFIC",
           "build_job"]

PLACEMENTS = ("home", "next", "spread")


@dataclass
class Workload:
    """Everything the host loads: the configuration, each node's Spawn_MEM entries and data lines.

    Attributes
    ----------
    config : Config
    spawn : list of list of int
        Per node, the Spawn_MEM entries (512-bit ints) in spawn order.
    memory : dict of int -> int
        Global data space: line -> 448-bit int (B's rows).
    features : int
    """

    config: Config
    spawn: list
    memory: dict
    features: int

    def node_lines(self, node):
        """``(line, value)`` of the lines node ``node`` holds before any fetch."""
        return [(line, value) for line, value in sorted(self.memory.items())
                if self.config.holds(node, line // self.config.block)]

    @property
    def packets(self):
        return sum(len(entries) for entries in self.spawn)


def sparse_dense_workload(adjacency, dense, *, nodes, block=20, home_shift=2, range_shift=0, placement="home",
                          values="float32", replicated=False):
    """Cut ``adjacency @ dense`` into a :class:`Workload` for ``nodes`` nodes.

    Parameters
    ----------
    adjacency : scipy.sparse matrix, n x n
        A; its values become the items' 32-bit ``value`` (float32 bit patterns when
        ``values="float32"``, unsigned integers when ``"uint32"``).
    dense : numpy.ndarray, n x F
        B, float32 or uint32 (its bit patterns are loaded), F from 1 to 14 (a line's words): any
        other F, or another dtype, is a ValueError (the data packet could not carry it).
    nodes, block, home_shift, range_shift
        See :class:`golden.runtime.protocol.Config`.
    placement : {"home", "next"}
        Which node spawns a row's nonzeros (module docstring).
    replicated : bool
        Load every line of B into every node (the seed's duplicated operand, §4.4.5) instead of
        into its range's owner only: no range is fetched during the kernel.
    """
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {PLACEMENTS}, not {placement!r}")
    a = sp.coo_matrix(adjacency)
    n = a.shape[0]
    if a.shape != (n, n) or np.shape(dense)[0] != n:
        raise ValueError("adjacency must be n x n and dense n x F")
    if np.asarray(dense).ndim != 2:
        raise ValueError(f"dense must be n x F, not of shape {np.shape(dense)}")
    dense = np.asarray(dense)
    if dense.dtype not in (np.float32, np.uint32):
        raise ValueError(f"dense must be float32 or uint32 (32-bit words), not {dense.dtype}")
    features = dense.shape[1]
    if not 1 <= features <= LINE_WORDS:
        raise ValueError(f"a data line carries 1 to {LINE_WORDS} 32-bit words: dense has {features} columns")
    config = Config(nodes=nodes, rows=n, block=block, home_shift=home_shift, range_shift=range_shift,
                    replicated=replicated)
    bits = np.ascontiguousarray(dense).view(np.uint32)
    memory = {line: words_line(bits[line]) for line in range(n)}
    if values == "float32":
        raw = np.asarray(a.data, dtype=np.float32).view(np.uint32)
    elif values == "uint32":
        raw = np.asarray(a.data).astype(np.uint64).astype(np.uint32)
    else:
        raise ValueError(f"values must be 'float32' or 'uint32', not {values!r}")
    rows, cols = a.row.astype(np.int64), a.col.astype(np.int64)
    homes = (rows >> home_shift) & (nodes - 1)
    if placement == "home" or nodes == 1:
        spawners = homes
    elif placement == "next":
        spawners = (homes + 1) % nodes
    else:
        turn = (rows >> (home_shift + (nodes - 1).bit_length())) % (nodes - 1)
        spawners = (homes + 1 + turn) % nodes
    spawn = [[] for _ in range(nodes)]
    for node in range(nodes):
        mine = np.flatnonzero(spawners == node)
        order = mine[np.lexsort((rows[mine], cols[mine], cols[mine] // block))]
        packets = []  # (range, slots)
        for index in order:
            row, col = int(rows[index]), int(cols[index])
            slot = row % ITEMS
            if not packets or packets[-1][0] != col // block or packets[-1][1][slot] is not None:
                packets.append((col // block, [None] * ITEMS))
            packets[-1][1][slot] = Item(row, col, int(raw[index]))
        spawn[node] = [encode(Packet(TASK, range=index, slots=tuple(slots)), sealed=False)
                       for index, slots in packets]
    return Workload(config, spawn, memory, features)


# The cluster demo's graphs: a 400-node graph of Cora's shape, and Cora's published statistics.
GRAPHS = {"small": GraphSpec("small", 400, 800, 16, 4, 40, False), "cora": "cora"}
DEFAULT_FEATURES = 4
TRAFFIC = ("tx_task", "rx_task", "tx_rdma", "rx_rdma", "tx_data", "rx_data", "issued", "served")


def build_job(*, nodes, graph="small", features=DEFAULT_FEATURES, placement="next", seed=1, replicated=False):
    """``(adjacency, dense, workload)`` of the GCN aggregation ``Â B`` on ``nodes`` nodes: ``Â`` the
    normalised adjacency of the graph ``graph`` (:data:`GRAPHS`, or a name of
    :mod:`golden.aggregate.graphs`), ``B`` seeded random float32 ``features`` wide (in every node
    when ``replicated``)."""
    adjacency = gcn_normalise(generate(GRAPHS.get(graph, graph), seed=seed)).tocoo()
    dense = np.random.default_rng(seed).standard_normal((adjacency.shape[0], features)).astype(np.float32)
    workload = sparse_dense_workload(adjacency, dense, nodes=nodes, placement=placement,
                                     replicated=replicated)
    return adjacency, dense, workload
