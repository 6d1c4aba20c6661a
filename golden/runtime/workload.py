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
  its block. That is ``packing="seed"``; ``packing="balanced"`` (:mod:`golden.runtime.packing`)
  instead balances rows over nodes and banks by nonzero count, splits hub rows into parts (extra
  physical output rows, added back by :meth:`Workload.gather`), packs each range into the fewest
  packets and staggers the range order per node.

Each output row's (each part's) nonzeros therefore come from one spawner, in one fixed order,
which makes the float32 results independent of the network's timing (:mod:`golden.runtime.protocol`).

:func:`build_job` is the GCN aggregation that ``neartrain demo cluster`` and ``bench_runtime
scaling`` run on the cluster (a synthetic graph of :data:`GRAPHS`, or a given adjacency; balanced
packing in ranges of :data:`BALANCED_BLOCK` lines), and :data:`TRAFFIC` the
packet counters of a node that they compare with :class:`golden.runtime.protocol.Cluster`'s.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from golden.aggregate.graphs import GraphSpec, gcn_normalise, generate

from .kernels import LINE_WORDS, words_line
from .packet import ITEMS, TASK, Item, Packet, encode
from .packing import Layout, balanced_layout, identity_layout, pack
from .protocol import Config

__all__ = ["Workload", "sparse_dense_workload", "PLACEMENTS", "PACKINGS", "GRAPHS", "DEFAULT_FEATURES",
           "TRAFFIC", "BALANCED_BLOCK", "build_job", "graph_matrix"]

PLACEMENTS = ("home", "next", "spread")
PACKINGS = ("seed", "balanced")


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
    layout : golden.runtime.packing.Layout
        Where each row of the result lives (physical rows; parts of split rows).
    """

    config: Config
    spawn: list
    memory: dict
    features: int
    layout: Layout = None

    def __post_init__(self):
        if self.layout is None:
            self.layout = identity_layout(self.config.rows)

    def node_lines(self, node):
        """``(line, value)`` of the lines node ``node`` holds before any fetch."""
        return [(line, value) for line, value in sorted(self.memory.items())
                if self.config.holds(node, line // self.config.block)]

    @property
    def packets(self):
        return sum(len(entries) for entries in self.spawn)

    def gather(self, out):
        """The result ``A B`` (``n x F`` uint32) from the physical output rows (:meth:`Layout.gather`)."""
        return self.layout.gather(out)


def sparse_dense_workload(adjacency, dense, *, nodes, block=20, home_shift=2, range_shift=0, placement="home",
                          values="float32", packing="seed", replicated=False):
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
    placement : {"home", "next", "spread"}
        Which node spawns a row's nonzeros (module docstring).
    packing : {"seed", "balanced"}
        The seed's rule (module docstring), or :mod:`golden.runtime.packing`'s levers: rows
        balanced over nodes and banks by nonzero count, tasks packed range by range, ranges
        staggered per node, and (float32 values only) hub rows split into parts that
        :meth:`Workload.gather` adds up. ``"balanced"`` needs ``home_shift=2`` (bank = row mod 4).
    replicated : bool
        Load every line of B into every node (the seed's duplicated operand, §4.4.5) instead of
        into its range's owner only: no range is fetched during the kernel.
    """
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {PLACEMENTS}, not {placement!r}")
    if packing not in PACKINGS or (packing == "balanced" and home_shift != 2):
        raise ValueError(f"packing must be one of {PACKINGS} ('balanced' with home_shift 2), not {packing!r}")
    a = sp.coo_matrix(adjacency)
    n = a.shape[0]
    if a.shape != (n, n) or np.shape(dense)[0] != n:
        raise ValueError("adjacency must be n x n and dense n x F")
    Config(nodes=nodes, rows=n, block=block, home_shift=home_shift, range_shift=range_shift)  # checks them
    if np.asarray(dense).ndim != 2:
        raise ValueError(f"dense must be n x F, not of shape {np.shape(dense)}")
    dense = np.asarray(dense)
    if dense.dtype not in (np.float32, np.uint32):
        raise ValueError(f"dense must be float32 or uint32 (32-bit words), not {dense.dtype}")
    features = dense.shape[1]
    if not 1 <= features <= LINE_WORDS:
        raise ValueError(f"a data line carries 1 to {LINE_WORDS} 32-bit words: dense has {features} columns")
    if values == "float32":
        raw = np.asarray(a.data, dtype=np.float32).view(np.uint32)
    elif values == "uint32":
        raw = np.asarray(a.data).astype(np.uint64).astype(np.uint32)
    else:
        raise ValueError(f"values must be 'float32' or 'uint32', not {values!r}")
    rows, cols = a.row.astype(np.int64), a.col.astype(np.int64)
    if packing == "balanced":
        layout, rows = balanced_layout(rows, cols, n=n, nodes=nodes, block=block, split=values == "float32")
    else:
        layout = identity_layout(n)
    config = Config(nodes=nodes, rows=layout.physical_rows, block=block, home_shift=home_shift,
                    range_shift=range_shift, replicated=replicated)
    bits = np.ascontiguousarray(dense).view(np.uint32)
    memory = {line: words_line(bits[line]) for line in range(n)}
    homes = (rows >> home_shift) & (nodes - 1)
    if placement == "home" or nodes == 1:
        spawners = homes
    elif placement == "next":
        spawners = (homes + 1) % nodes
    else:
        turn = (rows >> (home_shift + (nodes - 1).bit_length())) % (nodes - 1)
        spawners = (homes + 1 + turn) % nodes
    if packing == "balanced":
        tasks = pack(rows, cols, raw.tolist(), spawner=spawners, nodes=nodes, block=block)
    else:
        tasks = [_seed_packets(rows, cols, raw, np.flatnonzero(spawners == node), block)
                 for node in range(nodes)]
    spawn = [[encode(Packet(TASK, range=index, slots=tuple(slots)), sealed=False) for index, slots in packets]
             for packets in tasks]
    return Workload(config, spawn, memory, features, layout)


def _seed_packets(rows, cols, raw, mine, block):
    """The seed's rule for one spawner's nonzeros ``mine``: ``[(range, slots)]`` (module docstring)."""
    order = mine[np.lexsort((rows[mine], cols[mine], cols[mine] // block))]
    packets = []
    for index in order:
        row, col = int(rows[index]), int(cols[index])
        slot = row % ITEMS
        if not packets or packets[-1][0] != col // block or packets[-1][1][slot] is not None:
            packets.append((col // block, [None] * ITEMS))
        packets[-1][1][slot] = Item(row, col, int(raw[index]))
    return packets


# The cluster demo's graphs: a 400-node graph of Cora's shape, and Cora's published statistics.
GRAPHS = {"small": GraphSpec("small", 400, 800, 16, 4, 40, False), "cora": "cora"}
DEFAULT_FEATURES = 4
# Ranges of 60 lines for the balanced packing: about three times the seed's nonzeros per (node,
# range, bank), which lifts the task fill on Cora from 0.96 to 0.99 at 4 nodes and from 0.93 to
# 0.98 at 8 (golden.runtime.packing.fill).
BALANCED_BLOCK = 60
TRAFFIC = ("tx_task", "rx_task", "tx_rdma", "rx_rdma", "tx_data", "rx_data", "issued", "served")


def graph_matrix(graph, seed=1):
    """``Â`` (COO) of ``graph``, a name or :class:`~golden.aggregate.graphs.GraphSpec` (generated
    with ``seed``) or a square sparse adjacency: the GCN-normalised matrix :func:`build_job` cuts."""
    adjacency = graph if sp.issparse(graph) else generate(graph, seed=seed)
    return gcn_normalise(adjacency).tocoo()


def build_job(*, nodes, graph="small", features=DEFAULT_FEATURES, placement="next", seed=1, adjacency=None,
              packing="balanced", block=BALANCED_BLOCK, replicated=False):
    """``(adjacency, dense, workload)`` of the GCN aggregation ``Â B`` on ``nodes`` nodes: ``Â`` the
    normalised adjacency of the graph ``graph`` (:data:`GRAPHS`, or a name of
    :mod:`golden.aggregate.graphs`) or of ``adjacency`` (a square sparse matrix) when given, ``B``
    seeded random float32 ``features`` wide (in every node when ``replicated``); tasks cut with
    ``packing`` in ranges of ``block`` lines."""
    adjacency = graph_matrix(GRAPHS.get(graph, graph) if adjacency is None else adjacency, seed=seed)
    dense = np.random.default_rng(seed).standard_normal((adjacency.shape[0], features)).astype(np.float32)
    workload = sparse_dense_workload(adjacency, dense, nodes=nodes, placement=placement, packing=packing,
                                     block=block if packing == "balanced" else 20, replicated=replicated)
    return adjacency, dense, workload
