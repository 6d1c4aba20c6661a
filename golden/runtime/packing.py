"""The host's task levers for the cluster (``packing="balanced"`` of :mod:`golden.runtime.workload`).

The seed's rule (one ``block``-column range per task, slot ``row mod 4``, a new packet whenever the
slot is taken) leaves most slots empty and puts every row of a hub on one node and one bank. Here,
in three steps, keeping the runtime's packet rules (one data range per task, slot ``i`` holds a
row of output bank ``i``: ``row mod 4 == i``) and its ownership registers (home of output row
``p``: ``(p >> 2) mod N``):

1. **Hub rows split** (:func:`split_rows`). A row of ``d`` nonzeros on one bank takes at least
   ``(d - 1) * window + 1`` cycles (the pipeline's read-after-write window), and all its work
   lands on one node. A row with more than ``cap`` nonzeros, ``cap`` a ``SPLIT * window``-th of
   one bank's fair share ``nnz / (4 N)`` (never below ``window``), is cut into ``ceil(d / cap)``
   *parts* of consecutive columns, each an output row of its own (physical rows past the
   graph's). The host adds a row's parts in part order, in float32, after ``Sync_to_Host``
   (:meth:`Layout.gather`); the golden does the same, so the result stays bit-exact.
2. **Rows balanced by nonzero count** (:func:`assign_rows`). Every part (and every unsplit row)
   gets a physical row, i.e. a (node, bank) class: parts by decreasing nonzeros (ties: lower row
   first), each to the class with a free physical row that leaves its node the fewest packets
   (the sum over ranges of the range's fullest bank), ties to the least-loaded class, then the
   lower class. Banks are thus balanced range by range, not only in total (the packets of a range
   can be no fewer than its fullest bank's nonzeros), and every node gets about ``nnz / 4N`` packets.
3. **Tasks packed per range, ranges staggered** (:func:`pack`). A spawner opens the data ranges
   in turn starting at its own index (node ``s`` opens range ``s``, then ``s + 1``, ...: with
   ranges owned by ``g mod N``, the N nodes ask N different owners at each step), and keeps
   ``INTERLEAVE`` of them open. Each range gets ``max_i c_i`` packets (``c_i`` its nonzeros in
   bank ``i``), the fewest possible: in a range's next packet, bank ``i`` takes, among its rows
   not used in the last ``window`` packets, the one with the most nonzeros left in the range
   (ties: lower row, then lower column), or when every row is cooling the one that cools first
   (the aggregation spawner's cooldown greedy, :mod:`golden.aggregate.spawner`). Each packet
   comes from the first open range whose next packet waits for no cooling row, or else from the
   one that waits least; a range closes when it is empty and the next one opens.

Every part's nonzeros are spawned by one node in one fixed order, so each physical row's float32
sum order is fixed whatever the network's timing (:mod:`golden.runtime.protocol`).
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from golden.aggregate.packets import Packets
from golden.aggregate.pipeline import HAZARD_WINDOW, issue_cycles

from .packet import ITEMS, Item

__all__ = ["Layout", "split_rows", "assign_rows", "pack", "identity_layout", "balanced_layout", "fill",
           "issue_estimate", "INTERLEAVE"]

# Ranges a spawner keeps open at once, and the divisor of a hub part's size (both chosen on the
# Cora-like graph with issue_estimate: at 4 and 8 nodes, the busiest node's kernel issues in 1,256
# and 980 cycles with one open range and parts of a window-th of a bank's share; in 935 and 505
# with these, against 857 and 432 packets).
INTERLEAVE = 8
SPLIT = 3


@dataclass
class Layout:
    """Where each row of ``A`` lives: its parts' physical rows, in the order the host adds them.

    Attributes
    ----------
    rows : int
        Rows of ``A`` (of the result).
    physical_rows : int
        Output rows (and data-space lines) the cluster needs: a multiple of ``4 N`` at least ``rows``.
    part_start : numpy.ndarray of int64
        ``rows + 1`` offsets into ``part_row``: row ``r``'s parts are ``part_row[part_start[r]:
        part_start[r + 1]]`` (at least one each).
    part_row : numpy.ndarray of int64
        Physical row of every part.
    """

    rows: int
    physical_rows: int
    part_start: np.ndarray
    part_row: np.ndarray

    @property
    def split(self):
        """Whether any row has more than one part."""
        return self.part_row.size > self.rows

    def gather(self, out):
        """The result's rows (``rows x F`` uint32) from the physical rows ``out`` (uint32 bit patterns).

        A row of one part is that physical row; a row of several is their float32 sum, added left
        to right in part order (each addition one binary32 rounding, NumPy's).
        """
        out = np.asarray(out, dtype=np.uint32)
        first = out[self.part_row[self.part_start[:-1]]].view(np.float32).copy()
        counts = np.diff(self.part_start)
        with np.errstate(all="ignore"):
            for extra in range(1, int(counts.max(initial=1))):
                rows = np.flatnonzero(counts > extra)
                first[rows] = first[rows] + out[self.part_row[self.part_start[rows] + extra]].view(np.float32)
        return first.view(np.uint32)


def identity_layout(rows):
    """Row ``r`` at physical row ``r``, one part each (the seed's rule)."""
    return Layout(rows, rows, np.arange(rows + 1, dtype=np.int64), np.arange(rows, dtype=np.int64))


def split_rows(degrees, nodes, window=HAZARD_WINDOW):
    """Parts per row (step 1 of the module docstring): ``ceil(d / cap)``, at least 1."""
    degrees = np.asarray(degrees, dtype=np.int64)
    cap = max(window, int(degrees.sum()) // (ITEMS * nodes * window * SPLIT))
    return np.maximum(1, -(-degrees // cap))


def assign_rows(loads, nodes, physical_rows, ranges=None):
    """Physical row of every part (step 2): ``loads`` its nonzeros, classes (node, bank).

    Class ``c = node * 4 + bank`` holds the physical rows ``p`` with ``(p >> 2) mod N == node`` and
    ``p mod 4 == bank``, in increasing order; ``physical_rows`` a multiple of ``4 N``. With
    ``ranges`` (a parts x ranges sparse matrix of nonzero counts) a part goes to the class that
    leaves its node the fewest packets (the sum over ranges of the fullest bank), ties to the
    least-loaded class, so that banks are balanced range by range, not only in total.
    """
    loads = np.asarray(loads, dtype=np.int64)
    classes = ITEMS * nodes
    if physical_rows % classes or loads.size > physical_rows:
        raise ValueError(f"{physical_rows} physical rows do not hold {loads.size} parts in {classes} classes")
    per_class = physical_rows // classes
    order = np.lexsort((np.arange(loads.size), -loads))
    total = np.zeros(classes, np.int64)
    used = np.zeros(classes, np.int64)
    physical = np.empty(loads.size, np.int64)
    if ranges is not None:
        ranges = ranges.tocsr()
        counts = np.zeros((nodes, ITEMS, ranges.shape[1]), np.int64)
        packets = np.zeros(nodes, np.int64)
    for part in order.tolist():
        full = (used >= per_class).reshape(nodes, ITEMS)
        if ranges is None:
            cost = total.reshape(nodes, ITEMS).astype(np.float64)
        else:
            where = ranges.indices[ranges.indptr[part]:ranges.indptr[part + 1]]
            amount = ranges.data[ranges.indptr[part]:ranges.indptr[part + 1]]
            cells = counts[:, :, where]
            grow = np.maximum(cells + amount - cells.max(axis=1, keepdims=True), 0).sum(axis=2)
            cost = (packets[:, None] + grow) * float(loads.sum() + 1) + total.reshape(nodes, ITEMS)
        cost[full] = np.inf
        target = int(np.argmin(cost))
        node, bank = divmod(target, ITEMS)
        if ranges is not None:
            packets[node] += int(grow[node, bank])
            counts[node, bank, where] += amount
        # The used[target]-th physical row of the class: block k of 4 N rows, within it node, bank.
        physical[part] = int(used[target]) * classes + node * ITEMS + bank
        used[target] += 1
        total[target] += loads[part]
    return physical


def balanced_layout(rows, cols, *, n, nodes, block, split=True):
    """Steps 1 and 2 for the nonzeros ``(rows, cols)`` of an ``n x n`` matrix: ``(Layout, physical row
    of each nonzero)``. A row's parts take its nonzeros in column order, in chunks of equal size."""
    rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
    degrees = np.bincount(rows, minlength=n)
    parts = split_rows(degrees, nodes) if split else np.ones(n, np.int64)
    part_start = np.r_[0, np.cumsum(parts)]
    order = np.lexsort((cols, rows))
    rank = np.empty(rows.size, np.int64)
    rank[order] = np.arange(rows.size) - np.r_[0, np.cumsum(degrees)][rows[order]]
    part = part_start[rows] + rank * parts[rows] // degrees[rows]
    total = int(part_start[-1])
    classes = ITEMS * nodes
    physical_rows = -(-total // classes) * classes
    ranges = sp.csr_matrix((np.ones(rows.size, np.int64), (part, cols // block)),
                           shape=(total, -(-physical_rows // block)))
    physical = assign_rows(np.bincount(part, minlength=total), nodes, physical_rows, ranges)
    return Layout(n, physical_rows, part_start, physical), physical[part]


def pack(rows, cols, values, *, spawner, nodes, block, window=HAZARD_WINDOW, interleave=INTERLEAVE):
    """Each node's tasks (step 3): a list per node of ``(range, [Item or None] * 4)``.

    ``rows`` are physical rows, ``spawner`` the node that spawns each nonzero; ``interleave``
    ranges are open at a time.
    """
    rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
    ranges = cols // block
    count = max(int(ranges.max(initial=-1)) + 1, 1)
    row_of, col_of = rows.tolist(), cols.tolist()
    spawn = []
    for node in range(nodes):
        mine = np.flatnonzero(np.asarray(spawner) == node)
        mine = mine[np.lexsort((rows[mine], cols[mine], (ranges[mine] - node) % count))]
        groups = [group for group in np.split(mine, np.flatnonzero(np.diff(ranges[mine])) + 1) if group.size]
        last_use = {}  # row -> the step of its latest packet
        opened = []  # (range, items per bank, nonzeros left per row)
        packets = []
        while opened or groups:
            while len(opened) < interleave and groups:
                group = groups.pop(0).tolist()
                banks = [[] for _ in range(ITEMS)]
                left = {}
                for index in group:
                    banks[row_of[index] % ITEMS].append(index)
                    left[row_of[index]] = left.get(row_of[index], 0) + 1
                opened.append((int(ranges[group[0]]), banks, left))
            step = len(packets)
            best = None
            for position, (_, banks, left) in enumerate(opened):
                picks, stall = [], 0
                for items in banks:
                    choice, choice_key = None, None
                    for place, index in enumerate(items):
                        row = row_of[index]
                        cooling = max(last_use.get(row, -window) + window - step, 0)
                        key = (cooling, -left[row], row, col_of[index])
                        if choice_key is None or key < choice_key:
                            choice, choice_key = place, key
                    picks.append(choice)
                    stall = max(stall, 0 if choice is None else choice_key[0])
                if best is None or stall < best[0]:
                    best = (stall, position, picks)
                if stall == 0:
                    break
            _, position, picks = best
            index_range, banks, left = opened[position]
            slots = [None] * ITEMS
            for bank, place in enumerate(picks):
                if place is not None:
                    index = banks[bank].pop(place)
                    row = row_of[index]
                    last_use[row] = step
                    left[row] -= 1
                    slots[bank] = Item(row, col_of[index], values[index])
            packets.append((index_range, slots))
            if not any(banks):
                opened.pop(position)
        spawn.append(packets)
    return spawn


def issue_estimate(packets, window=HAZARD_WINDOW):
    """Cycles for one node's kernel to issue ``packets`` (``(range, slots)``) back to back, hazard
    stalls included (:func:`golden.aggregate.pipeline.issue_cycles`; no network waits)."""
    if not packets:
        return 0
    occupied = np.array([[slot is not None for slot in slots] for _, slots in packets])
    rows = np.array([[0 if slot is None else slot.row for slot in slots] for _, slots in packets])
    stream = Packets.from_slots(rows, np.zeros_like(rows), np.ones(rows.shape, np.float32), occupied,
                                weighted=True)
    return int(issue_cycles(stream, window=window)[-1]) + 1


def fill(spawn):
    """Occupied slots over all slots of the packets ``spawn`` (per node lists of ``(range, slots)``)."""
    packets = sum(len(node) for node in spawn)
    items = sum(slot is not None for node in spawn for _, slots in node for slot in slots)
    return items / (ITEMS * packets) if packets else 1.0

