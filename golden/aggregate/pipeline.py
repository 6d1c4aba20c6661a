"""What the aggregation pipeline computes from a packet stream, bit for bit, and when.

Semantics (the contract ``rtl.aggregate.AggregationPipeline`` honours)
----------------------------------------------------------------------
The pipeline holds ``OUT`` (``n_rows x F`` binary32, +0.0 after a reset or a drain) in
``lanes`` banks, physical row ``r`` in bank ``r mod lanes`` at address ``r // lanes``, and ``B``
(``n_cols x F``). Packets are taken in order; in each packet:

1. **Header.** A packet whose ``task`` is not 6, whose mask has a bit at or above ``lanes``,
   or whose ``weighted`` bit differs from the pipeline's mode is dropped whole and counted
   once in ``header_errors``.
2. **Slots**, each slot ``i`` whose mask bit is set, in slot order; the first failing check
   drops the slot and counts it:

   * ``range_errors``: ``row >= n_rows`` or ``col >= n_cols``;
   * ``bank_errors``: ``row mod lanes != i`` (the slot would write another lane's OUT bank),
     or, with ``b_banks > 1``, ``col mod b_banks`` equals that of a lower slot of the packet
     that passed its checks (two reads of one B bank).

3. **Update.** Every slot that passed: ``OUT[row] = OUT[row] + B[col]`` (Boolean), or
   ``OUT[row] = OUT[row] + fl(value * B[col])`` (weighted, **two roundings**: a binary32
   multiplier, then a binary32 adder; not fused), element by element, round to nearest even,
   subnormals kept (no flushing), NaN results the canonical quiet NaN ``0x7FC00000``.

A row appears at most once per packet (slot ``i`` holds only rows of bank ``i``), so the
accumulation order of every row is simply packet order: ``OUT[r] = ((+0 + t_1) + t_2) + ...``
over the nonzeros of row ``r`` in the order of their packets. This order does not depend on
timing (gaps, backpressure or stalls).

Timing (the cycle model)
------------------------
A slot's OUT read is issued, then its adder result is written back ``HAZARD_WINDOW - 1``
cycles later; a read issued ``HAZARD_WINDOW`` or more cycles after another read of the same
row sees its result. The pipeline issues one packet per cycle and holds a packet (a stall)
while any of its rows was issued fewer than ``HAZARD_WINDOW`` cycles before:
:func:`issue_cycles` gives the issue cycle of every packet of a back-to-back stream.
"""

from dataclasses import dataclass

import numpy as np

from golden.fp.formats import F32

from .packets import MASK_BITS, TASK_AGGREGATION

__all__ = ["HAZARD_WINDOW", "Counters", "execute", "live_slots", "issue_cycles", "canonical_nan",
           "accumulate_in_order"]

# Cycles from a slot's OUT read to the first read that sees its write: 1 (read) + 1 (the read
# data registered) + 6 (the binary32 adder, rtl.fp.FloatAdder.LATENCY) + 1 (write); the RTL
# states the same as AggregationPipeline.hazard_window, and the testbench checks the two agree.
HAZARD_WINDOW = 9

_CANONICAL_NAN = np.uint32(F32.canonical_nan).view(np.float32)


@dataclass
class Counters:
    """The pipeline's counters for one stream (the status registers of the same names)."""

    packets: int = 0
    nonzeros: int = 0
    header_errors: int = 0
    range_errors: int = 0
    bank_errors: int = 0

    def __add__(self, other):
        return Counters(*(getattr(self, name) + getattr(other, name) for name in self.__dataclass_fields__))


def canonical_nan(values):
    """Every NaN replaced by the canonical quiet NaN (the FP units never propagate payloads)."""
    return np.where(np.isnan(values), _CANONICAL_NAN, values).astype(np.float32, copy=False)


def live_slots(packets, *, n_rows, n_cols, weighted=False, b_banks=1):
    """The slots the pipeline executes, and the error counts of the stream.

    Returns
    -------
    live : numpy.ndarray of bool, shape (n, lanes)
    counters : Counters
    """
    lanes = packets.lanes
    count = len(packets)
    header_ok = ((packets.task == TASK_AGGREGATION) & ((packets.mask.astype(np.uint16) >> lanes) == 0)
                 & (packets.weighted == int(weighted)))
    present = packets.slot_mask & header_ok[:, None]
    in_range = (packets.rows < n_rows) & (packets.cols < n_cols)
    range_bad = present & ~in_range
    bank_bad = present & in_range & (packets.rows % lanes != np.arange(lanes))
    live = present & in_range & ~bank_bad
    if b_banks > 1:
        banks = packets.cols % b_banks
        for lane in range(1, lanes):
            taken = np.zeros(count, bool)
            for lower in range(lane):
                taken |= live[:, lower] & (banks[:, lower] == banks[:, lane])
            collide = live[:, lane] & taken
            bank_bad[:, lane] |= collide
            live[:, lane] &= ~collide
    counters = Counters(packets=count, nonzeros=int(live.sum()), header_errors=int((~header_ok).sum()),
                        range_errors=int(range_bad.sum()), bank_errors=int(bank_bad.sum()))
    assert MASK_BITS >= lanes
    return live, counters


def accumulate_in_order(out, rows, addends):
    """``out[rows[k]] += addends[k]`` for k in order, in binary32, one rounding per addition.

    Vectorised over rows: the ``j``-th addition of every row is done in step ``j``.
    """
    order = np.argsort(rows, kind="stable")
    sorted_rows = rows[order]
    starts = np.flatnonzero(np.r_[True, sorted_rows[1:] != sorted_rows[:-1]])
    lengths = np.diff(np.r_[starts, rows.size])
    rank = np.arange(rows.size) - np.repeat(starts, lengths)
    with np.errstate(all="ignore"):
        for step in range(int(lengths.max()) if lengths.size else 0):
            chosen = order[rank == step]
            out[rows[chosen]] = out[rows[chosen]] + addends[chosen]
    return out


def execute(packets, features, *, n_rows, n_cols=None, weighted=False, b_banks=1, out=None):
    """Run a packet stream as the pipeline does; returns ``(OUT, Counters)``.

    Parameters
    ----------
    packets : Packets
    features : numpy.ndarray of float32, shape (n_cols, F)
        B, indexed by the slots' ``col``.
    n_rows : int
        OUT rows (physical): ``row >= n_rows`` is a range error.
    n_cols : int, optional
        Columns accepted, ``len(features)`` by default.
    weighted : bool
        The pipeline's mode.
    b_banks : int
        B banks (1: every lane reads any row in the same cycle).
    out : numpy.ndarray of float32, optional
        OUT before the stream (+0.0 by default); updated in place.

    Returns
    -------
    out : numpy.ndarray of float32, shape (n_rows, F)
        Canonical NaNs.
    counters : Counters
    """
    features = np.asarray(features)
    if features.dtype != np.float32 or features.ndim != 2:
        raise ValueError("features must be a 2-D float32 array")
    n_cols = features.shape[0] if n_cols is None else n_cols
    live, counters = live_slots(packets, n_rows=n_rows, n_cols=n_cols, weighted=weighted, b_banks=b_banks)
    if out is None:
        out = np.zeros((n_rows, features.shape[1]), np.float32)
    # Packet-major order of the executed slots: the per-row accumulation order.
    rows, cols, values = packets.rows[live], packets.cols[live], packets.values[live]
    addends = features[cols]
    if weighted:
        with np.errstate(all="ignore"):
            addends = values[:, None] * addends
    accumulate_in_order(out, rows, addends)
    return canonical_nan(out), counters


def issue_cycles(packets, *, window=HAZARD_WINDOW, live=None):
    """Cycle at which each packet of a back-to-back stream issues its OUT reads.

    Packet ``k`` issues at ``max(t[k-1] + 1, t_last(r) + window)`` over its live rows ``r``,
    where ``t_last(r)`` is the last issue of row ``r``; packet 0 at cycle 0.

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        The issue cycles; ``t[-1] + 1 - n`` is the number of stall cycles.
    """
    live = packets.slot_mask if live is None else live
    last = {}
    times = np.empty(len(packets), np.int64)
    now = -1
    for index in range(len(packets)):
        rows = packets.rows[index][live[index]].tolist()
        now += 1
        for row in rows:
            previous = last.get(row)
            if previous is not None and previous + window > now:
                now = previous + window
        for row in rows:
            last[row] = now
        times[index] = now
    return times
