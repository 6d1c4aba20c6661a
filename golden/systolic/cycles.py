"""Closed-form cycle model of a ``rows x cols`` systolic array running ``C (M x N) = A (M x K) @ B (K x N)``.

The RTL must reproduce these counts exactly; :mod:`golden.systolic.array_sim` is a register-level
model of both schedules that the tests hold to this closed form. Conventions shared by both dataflows:

* Cycle 0 is the first cycle an operand of the first tile is present in PE(0, 0)'s input registers
  (weight stationary: the first cycle of the first weight load, so the first A operand arrives at
  cycle ``rows``); the count ends with the cycle in which the last result is on the array's output
  port, inclusive.
  Feeder and output-buffer register stages outside the array add a constant the RTL bench subtracts.
* "Present at PE(r, c) during cycle t" means held in its input registers during t. A PE with
  ``mac_latency`` L writes its result at the end of cycle ``t + L - 1`` (L = 1: same cycle).
* Tiles run one after another; ``refill_cycles`` idle cycles separate consecutive tiles (an operand
  buffer reload that is not double-buffered; 0 by default).

Output stationary (``dataflow="output_stationary"``)
---------------------------------------------------
PE(r, c) owns ``tile`` (T) accumulator slots: outputs ``C[m0 + r T + u, n0 + c]``, u = 0 .. T-1, so an
output tile is ``rows T x cols``. Operands are streamed in *beats*: beat ``b = k beat_len + u`` carries
``A[m0 + r T + u, k]`` into row r (from the left) and ``B[k, n0 + c]`` into column c (from the top);
beats with ``u >= T`` are idle. A beat enters row r / column c skewed by r / c cycles and moves one PE
per cycle, so PE(r, c) holds beat b during cycle ``start + b + r + c``::

    beat_len = max(T, acc_latency)      # cycles between MACs into one slot (accumulator recurrence)
    stream   = K * beat_len
    skew     = (rows - 1) + (cols - 1)
    compute  = stream + skew + (L - 1)  # cycle of start at which the whole tile is final
    drain    = rows * T                 # each column emits one result per cycle
    tiles    = ceil(M / (rows T)) * ceil(N / cols)

    t=0      PE(0,0) ▕b0 b1 b2 … b(stream-1)▏
    t=r+c    PE(r,c)       ▕b0 b1 … b(stream-1)▏
                           column c final at  stream + (rows-1) + c + (L-1)
    column c port:         ▕(0,0)(0,1)…(rows-1,T-1)▏  rows*T cycles, row-major, from that cycle

The first beat of a slot adds to ``d`` (or +0) instead of the slot; the last beat writes the sum
into a shadow slot, which the column's drain reads. Column c drains slot (r, u) at cycle
``start + stream + (rows-1) + c + (L-1) + r T + u``.

* ``overlap_drain=False``: tile n+1 starts when tile n has drained,
  ``period = compute + drain + refill``.
* ``overlap_drain=True`` (wavefront): tile n+1's beats follow tile n's back to back, so skew, pipeline
  latency and drain are paid once per GEMM, not per tile. The drain reads shadow slot (r, u) of
  column c at cycle ``start + stream + rows-1 + c + L-1 + r T + u``; tile n+1 rewrites it at the end of
  cycle ``start + period + (K-1) beat_len + u + r + c + L - 1``, which may be the read's own cycle (the
  read still sees the old value) but not an earlier one. The worst case is r = rows-1, so
  ``period = max(stream + refill, beat_len + (rows-1) T)``, which also keeps each column's drain
  windows (rows T cycles) apart.

In both: ``total = (tiles - 1) period + compute + drain``.

Tensor PEs (``tensor`` t > 1): each PE is a t x t tile of MAC lanes, lane (i, j) of PE(r, c) owning
``C[m0 + (r t + i) T + u, n0 + c t + j]``. Operands still hop one PE per cycle (a PE takes t A and t B
operands per cycle), so the skew stays ``(rows-1) + (cols-1)``, but every count of lanes replaces a
count of PEs: an output tile is ``rows t T x cols t``, a PE puts its ``t T`` results per lane column on
its column's drain chain lane row after lane row, so ``drain = rows t T`` and lane row ``r t + i``
slot u is drained at ``start + stream + rows-1 + c + L-1 + (r t + i) T + u``. The worst case is the
last lane row of the last PE row, so ``period = max(stream + refill, beat_len + (rows t - 1) T)``.
MAC utilisation is ``M K N / (rows cols t^2 total)``.

Weight stationary (``dataflow="weight_stationary"``)
----------------------------------------------------
``B`` is cut into ``rows x cols`` weight tiles (K by rows, N by cols); PE(r, c) holds
``B[k0 + r, n0 + c]``. Tiles run n-tile outer, k-tile inner. All M rows of ``A`` stream through
each weight tile: ``A[m, k0 + r]`` is present at PE(r, c) during ``start + m + r L + c``; the partial
sum of (m, c) enters PE(0, c) at ``start + m + c`` (``d``, or the partial of the previous k-tile from
the output buffer), gains L cycles per PE row and leaves PE(rows-1, c) at ``start + m + c + rows L``.
Rows of a ragged last k-tile pass the partial sum through unchanged (no ``+0.0``: that would
change ``-0.0``)::

    load   = rows                           # weights shift down the columns, one row per cycle
    stream = M + (cols - 1) + rows * L      # cycles from first operand to last result of a tile
    tiles  = ceil(K / rows) * ceil(N / cols)

    t=-rows  ▕load w▏
    t=0      PE(0,0)   ▕A0 A1 … A(M-1)▏
    t=r L+c  PE(r,c)         ▕A0 A1 … A(M-1)▏
    port c                   ▕C0 … C(M-1)▏  from start + c + rows L

* ``overlap_load=False``: ``period = load + stream + refill``, ``total = tiles (load + stream) +
  (tiles - 1) refill``.
* ``overlap_load=True``: the next tile's weights shift into a shadow chain (the ``load`` cycles before
  its start, after the previous swap) and every PE swaps to them at the next tile's start. The swap
  must wait until PE(rows-1, cols-1) used the current weights for A row M-1, at
  ``start + M-1 + (rows-1) L + cols-1``, and, when K spans several k-tiles, the next k-tile may read
  the partial sum of (m, c) only after it left the array at ``start + m + c + rows L``::

      chain  = rows L + 1 if ceil(K / rows) > 1 else 0
      period = max(M + (cols - 1) + (rows - 1) L,  chain,  load) + refill
      total  = load + (tiles - 1) period + stream
"""

from dataclasses import dataclass
from numbers import Integral

__all__ = ["CycleTerms", "gemm_cycle_terms", "gemm_cycles", "DATAFLOWS"]

DATAFLOWS = ("output_stationary", "weight_stationary")


@dataclass(frozen=True)
class CycleTerms:
    """Every named term of one GEMM's cycle count (see the module docstring).

    Attributes
    ----------
    dataflow : str
    tiles : int
    beat_len : int
        Output stationary: cycles per k step. Weight stationary: 1.
    stream : int
    skew : int
        Output stationary: ``rows - 1 + cols - 1``. Weight stationary: ``cols - 1`` (inside ``stream``).
    compute : int
        Output stationary: ``stream + skew + L - 1``. Weight stationary: ``stream``.
    drain : int
        Output stationary: ``rows * tile``. Weight stationary: 0 (results stream out).
    load : int
        Weight stationary: ``rows``. Output stationary: 0.
    period : int
        Cycles between the starts of consecutive tiles.
    total : int
    macs : int
        Useful multiply-accumulates, ``M K N``.
    utilisation : float
        ``macs / (rows cols total)``.
    """

    dataflow: str
    tiles: int
    beat_len: int
    stream: int
    skew: int
    compute: int
    drain: int
    load: int
    period: int
    total: int
    macs: int
    utilisation: float


def _ceil_div(a, b):
    return -(-a // b)


def _check_positive(**values):
    for name, value in values.items():
        if not isinstance(value, Integral) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, not {value!r}")


def gemm_cycle_terms(M, K, N, *, rows, cols, dataflow="output_stationary", tile=1, mac_latency=1,
                     acc_latency=1, overlap_drain=None, overlap_load=None, refill_cycles=0, tensor=1):
    """Cycle count of one GEMM with every term named (see the module docstring).

    Parameters
    ----------
    M, K, N : int
        GEMM dimensions (>= 1).
    rows, cols : int
        PE grid.
    dataflow : {"output_stationary", "weight_stationary"}
    tile : int
        Output stationary only: accumulator slots per PE, interleaved to hide ``acc_latency``.
    mac_latency : int
        L: cycles from operands present to result written (>= 1).
    acc_latency : int
        Output stationary only: minimum cycles between two MACs into one accumulator slot (>= 1).
    overlap_drain : bool, optional
        Output stationary only (default True): wavefront tiles with a shadow accumulator bank.
    overlap_load : bool, optional
        Weight stationary only (default True): shadow weight chain loaded during the previous tile.
    refill_cycles : int
        Idle cycles between consecutive tiles (>= 0).
    tensor : int
        Output stationary only: t, each PE a t x t tile of MAC lanes (>= 1; 1 is the one-MAC PE).

    Returns
    -------
    CycleTerms
    """
    _check_positive(M=M, K=K, N=N, rows=rows, cols=cols, tile=tile, mac_latency=mac_latency,
                    acc_latency=acc_latency, tensor=tensor)
    if acc_latency > mac_latency:
        raise ValueError(f"acc_latency must be <= mac_latency = {mac_latency}, not {acc_latency}")
    if not isinstance(refill_cycles, Integral) or isinstance(refill_cycles, bool) or refill_cycles < 0:
        raise ValueError(f"refill_cycles must be an integer >= 0, not {refill_cycles!r}")
    if dataflow not in DATAFLOWS:
        raise ValueError(f"dataflow must be one of {DATAFLOWS}, not {dataflow!r}")
    macs = M * K * N
    if dataflow == "output_stationary":
        if overlap_load is not None:
            raise ValueError("overlap_load applies to dataflow='weight_stationary' only")
        overlap = True if overlap_drain is None else bool(overlap_drain)
        lane_rows = rows * tensor  # tensor PEs: lanes, not PEs, set the tile and the drain
        tiles = _ceil_div(M, lane_rows * tile) * _ceil_div(N, cols * tensor)
        beat_len = max(tile, acc_latency)
        stream = K * beat_len
        skew = (rows - 1) + (cols - 1)
        compute = stream + skew + mac_latency - 1
        drain = lane_rows * tile
        if overlap:
            period = max(stream + refill_cycles, beat_len + (lane_rows - 1) * tile)
        else:
            period = compute + drain + refill_cycles
        total = (tiles - 1) * period + compute + drain
        load = 0
    else:
        if overlap_drain is not None:
            raise ValueError("overlap_drain applies to dataflow='output_stationary' only")
        if tile != 1 or acc_latency != 1:
            raise ValueError("tile and acc_latency must be 1 for dataflow='weight_stationary' "
                             "(partial sums flow, so no accumulator recurrence to hide)")
        if tensor != 1:
            raise ValueError("tensor applies to dataflow='output_stationary' only")
        overlap = True if overlap_load is None else bool(overlap_load)
        tiles = _ceil_div(K, rows) * _ceil_div(N, cols)
        beat_len, skew, drain = 1, cols - 1, 0
        load = rows
        stream = compute = M + (cols - 1) + rows * mac_latency
        if overlap:
            chain = rows * mac_latency + 1 if K > rows else 0
            period = max(M + (cols - 1) + (rows - 1) * mac_latency, chain, load) + refill_cycles
            total = load + (tiles - 1) * period + stream
        else:
            period = load + stream + refill_cycles
            total = tiles * (load + stream) + (tiles - 1) * refill_cycles
    return CycleTerms(dataflow, tiles, beat_len, stream, skew, compute, drain, load, period, total, macs,
                      macs / (rows * cols * tensor * tensor * total))


def gemm_cycles(M, K, N, *, rows, cols, dataflow="output_stationary", tile=1, **schedule):
    """Total cycles of one GEMM; ``gemm_cycle_terms(...).total``.

    Parameters
    ----------
    M, K, N, rows, cols, dataflow, tile
        As for :func:`gemm_cycle_terms`.
    **schedule
        ``mac_latency``, ``acc_latency``, ``overlap_drain``, ``overlap_load``, ``refill_cycles``, ``tensor``.

    Returns
    -------
    int
    """
    return gemm_cycle_terms(M, K, N, rows=rows, cols=cols, dataflow=dataflow, tile=tile, **schedule).total
