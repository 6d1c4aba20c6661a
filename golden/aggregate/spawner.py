"""The task spawner: a sparse adjacency matrix cut into aggregation task packets.

Two packers, both deterministic (so the accumulation order of every row is known):

:func:`spawn` (ours), in three steps:

1. **Bank balancing.** Every row of A gets a physical OUT row; lane (bank) ``i`` owns the
   physical rows ``i, i + P, i + 2P, ...``. Rows are taken by decreasing nonzero count (ties:
   lower row first) and each goes to the least-loaded lane that still has a free physical
   row (ties: lower lane), the longest-processing-time rule, so that every lane gets about
   ``nnz / P`` nonzeros even when a few hubs hold many. ``balance=False`` keeps row ``r`` at
   physical row ``r``.
2. **Hazard-aware scheduling.** Time advances one packet per step. In step ``k`` lane ``i``
   takes, among its rows not used in steps ``k - window + 1 .. k - 1``, the one with the
   most nonzeros left (ties: lower physical row), and from it the nonzero of lowest column
   (with ``b_banks > 1``: the lowest column whose B bank no lower lane of this packet reads).
   A row is thus never in flight twice, so a stream of these packets never stalls the
   pipeline. This is the task-scheduler-with-cooldown greedy, optimal for one lane.
3. **Packets.** Each step with at least one nonzero becomes a packet (slot ``i`` from lane
   ``i``). A step where every lane waits emits nothing: the pipeline's scoreboard then
   stalls for exactly that cycle.

:func:`seed_rule` is the seed's packer (Section 4.4.5, Figure 4-10), for comparison: A is cut
into blocks of ``block`` (20) columns; within a block, nonzeros are taken column by column
(then by row) and a packet holds at most one nonzero per ``row mod P`` class, with slot
``i`` for class ``i`` (so its packets run on the same pipeline, with stalls where rows repeat).
"""

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .packets import Packets
from .pipeline import HAZARD_WINDOW

__all__ = ["Spawned", "balance_rows", "spawn", "seed_rule", "coo_of", "cycle_estimate"]

_KEY = 1 << 32


@dataclass
class Spawned:
    """A packet stream and the row mapping it uses.

    Attributes
    ----------
    packets : Packets
    physical_of_row : numpy.ndarray of int64
        Physical OUT row of every row of A.
    n_rows : int
        Physical rows the pipeline must hold and drain (a multiple of ``lanes``).
    n_cols : int
        Rows of B (columns of A).
    steps : int
        Cycles the stream takes at one packet per cycle, stalls included (the packer's time).
    """

    packets: Packets
    physical_of_row: np.ndarray
    n_rows: int
    n_cols: int
    steps: int

    def unpermute(self, out):
        """OUT in physical rows to the rows of A."""
        return out[self.physical_of_row]


def coo_of(adjacency, weighted):
    """Rows, cols and float32 values of ``adjacency`` in row-major order (cols ascending).

    Duplicates are summed. A Boolean matrix keeps every nonzero value as an edge (explicit
    zeros are removed); a weighted one keeps its stored entries as given.
    """
    csr = sp.csr_matrix(adjacency, copy=True)
    csr.sum_duplicates()
    if not weighted:
        csr.eliminate_zeros()
    csr.sort_indices()
    rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))
    values = csr.data.astype(np.float32) if weighted else np.ones(csr.nnz, np.float32)
    return rows, csr.indices.astype(np.int64), values, csr.shape


def balance_rows(degrees, lanes, balance=True):
    """Physical row of every row: longest-processing-time over ``lanes`` banks (see the module docstring)."""
    n = degrees.size
    per_lane = -(-n // lanes)
    if not balance:
        return np.arange(n, dtype=np.int64)
    order = np.lexsort((np.arange(n), -degrees))
    heap = [(0, lane) for lane in range(lanes)]
    used = [0] * lanes
    physical = np.empty(n, np.int64)
    for row in order.tolist():
        load, lane = heapq.heappop(heap)
        physical[row] = lane + lanes * used[lane]
        used[lane] += 1
        if used[lane] < per_lane:
            heapq.heappush(heap, (load + int(degrees[row]), lane))
    return physical


def spawn(adjacency, *, lanes=4, weighted=False, window=HAZARD_WINDOW, b_banks=1, balance=True):
    """Packets of ``lanes`` slots for ``OUT = A B``; see the module docstring.

    Parameters
    ----------
    adjacency : scipy.sparse matrix
        A (``n_rows x n_cols``); its values are the weights when ``weighted``.
    lanes : int
        P, slots per packet.
    weighted : bool
        Weighted packets (value per slot) rather than Boolean.
    window : int
        The pipeline's hazard window (cycles between two issues of one row).
    b_banks : int
        B banks of the pipeline; > 1 adds the one-read-per-bank rule.
    balance : bool
        Bank balancing (step 1); False maps row r to physical row r.

    Returns
    -------
    Spawned
    """
    rows, cols, values, (n_rows, n_cols) = coo_of(adjacency, weighted)
    degrees = np.bincount(rows, minlength=n_rows)
    physical = balance_rows(degrees, lanes, balance)
    starts = np.r_[0, np.cumsum(degrees)].tolist()
    # Heap keys are ints ordering (most nonzeros left, lowest physical row) first:
    # -left * _KEY + physical row.
    row_of_physical = {int(physical[row]): row for row in np.flatnonzero(degrees).tolist()}
    heaps = [[] for _ in range(lanes)]
    for row in np.flatnonzero(degrees).tolist():
        heaps[physical[row] % lanes].append(-int(degrees[row]) * _KEY + int(physical[row]))
    for heap in heaps:
        heapq.heapify(heap)
    cooling = [deque() for _ in range(lanes)]
    # Per row, the indices of its nonzeros left, highest column first (the next one at the end).
    pending = {} if b_banks > 1 else None
    taken = starts[:-1]
    chosen_nnz = []
    left, step = rows.size, 0
    col_list = cols.tolist()
    pop, push = heapq.heappop, heapq.heappush
    while left:
        slot_nnz = [-1] * lanes
        banks = set()
        filled = False
        for lane in range(lanes):
            waiting, heap = cooling[lane], heaps[lane]
            while waiting and waiting[0][0] <= step:
                push(heap, waiting.popleft()[1])
            if not heap:
                continue
            if pending is None:
                key = pop(heap)
                row = row_of_physical[key % _KEY]
                index = taken[row]
                taken[row] = index + 1
            else:
                key, index, skipped = None, -1, []
                while heap:
                    candidate = pop(heap)
                    row = row_of_physical[candidate % _KEY]
                    nonzeros = pending.get(row)
                    if nonzeros is None:
                        nonzeros = pending[row] = list(range(starts[row + 1] - 1, starts[row] - 1, -1))
                    for position in range(len(nonzeros) - 1, -1, -1):
                        if col_list[nonzeros[position]] % b_banks not in banks:
                            index = nonzeros.pop(position)
                            break
                    if index >= 0:
                        key = candidate
                        break
                    skipped.append(candidate)
                for candidate in skipped:
                    push(heap, candidate)
                if key is None:
                    continue
                banks.add(col_list[index] % b_banks)
            slot_nnz[lane] = index
            filled = True
            left -= 1
            if key < -_KEY:  # nonzeros left after this one
                waiting.append((step + window, key + _KEY))
        if filled:
            chosen_nnz.append(slot_nnz)
        step += 1
    chosen = np.array(chosen_nnz, dtype=np.int64).reshape(-1, lanes)
    occupied = chosen >= 0
    safe = np.where(occupied, chosen, 0)
    packets = Packets.from_slots(np.where(occupied, physical[rows[safe]], 0), cols[safe],
                                 values[safe], occupied, weighted=weighted)
    return Spawned(packets, physical, lanes * -(-n_rows // lanes), n_cols, step)


def seed_rule(adjacency, *, lanes=4, block=20, weighted=False):
    """The seed's packer (block-``block`` column tiles, one nonzero per ``row mod lanes``); identity rows."""
    rows, cols, values, (n_rows, n_cols) = coo_of(adjacency, weighted)
    order = np.lexsort((rows, cols))
    rows, cols, values = rows[order], cols[order], values[order]
    tile, residue = cols // block, rows % lanes
    group = tile * lanes + residue
    # Rank of each nonzero within its (tile, residue) group, in (col, row) order.
    group_order = np.argsort(group, kind="stable")
    counts = np.bincount(group, minlength=(n_cols // block + 1) * lanes)
    group_start = np.r_[0, np.cumsum(counts)[:-1]]
    rank = np.empty(rows.size, np.int64)
    rank[group_order] = np.arange(rows.size) - group_start[group[group_order]]
    tile_packets = counts.reshape(-1, lanes).max(axis=1)
    tile_offset = np.r_[0, np.cumsum(tile_packets)[:-1]]
    packet = tile_offset[tile] + rank
    total = int(tile_packets.sum())
    shape = (total, lanes)
    out_rows, out_cols = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
    out_values, occupied = np.ones(shape, np.float32), np.zeros(shape, bool)
    out_rows[packet, residue], out_cols[packet, residue] = rows, cols
    out_values[packet, residue], occupied[packet, residue] = values, True
    packets = Packets.from_slots(out_rows, out_cols, out_values, occupied, weighted=weighted)
    return Spawned(packets, np.arange(n_rows, dtype=np.int64), lanes * -(-n_rows // lanes), n_cols, total)


def cycle_estimate(degrees, lanes, window=HAZARD_WINDOW):
    """Cycles of :func:`spawn`'s stream from the row degrees alone (for graphs too large to pack).

    The larger of two lower bounds: the heaviest lane's nonzeros after bank balancing, and the
    busiest row's ``(d_max - 1) * window + 1`` (one issue per window). On the five benchmark
    graphs it equals the spawner's cycle count (docs/aggregate.md).
    """
    degrees = np.asarray(degrees, dtype=np.int64)
    physical = balance_rows(degrees, lanes)
    loads = np.bincount(physical % lanes, weights=degrees, minlength=lanes)
    return int(max(loads.max(), (int(degrees.max()) - 1) * window + 1 if degrees.size else 0))
