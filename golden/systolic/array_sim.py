"""Register-level, cycle-stepped models of the two schedules in :mod:`golden.systolic.cycles`.

Operands really shift one PE per cycle through input registers; MAC results land ``mac_latency``
cycles later; accumulator, shadow and partial-sum storage is tagged with the tile that wrote it.
Any violation of the schedule (two tiles at one feeder, an operand pair from different beats, an
accumulator read before its last write, a shadow slot or weight overwritten before use, a partial
sum read before it was written) raises :class:`ScheduleHazard`. The result is returned with the
cycle count, so tests can hold the closed form (cycles) and :func:`golden.systolic.numerics.gemm`
(bits) to the same machine. Small arrays only: the loops are per PE per cycle in Python.
"""

from collections import defaultdict

import numpy as np

from .cycles import gemm_cycle_terms
from .numerics import decode_to_f32, f32_bits, wrap_int32

__all__ = ["ScheduleHazard", "simulate_output_stationary", "simulate_weight_stationary"]


class ScheduleHazard(RuntimeError):
    """The schedule let two uses of one register collide."""


class _Datapath:
    """Operand decoding and the PE's multiply and add for one element type."""

    def __init__(self, a, b, d, element):
        self.is_int = element == "int8"
        if self.is_int:
            self.a, self.b = a.astype(np.int64), b.astype(np.int64)
            self.d = np.zeros((a.shape[0], b.shape[1]), np.int64) if d is None else d.astype(np.int64)
            self.zero = 0
        else:
            self.a, self.b = decode_to_f32(a, element, "a"), decode_to_f32(b, element, "b")
            shape = (a.shape[0], b.shape[1])
            self.d = np.zeros(shape, np.float32) if d is None else decode_to_f32(d, "f32", "d")
            self.zero = np.float32(0)

    def mac(self, acc, x, y):
        if self.is_int:
            return int(wrap_int32(acc + x * y))
        with np.errstate(all="ignore"):
            return np.float32(acc + np.float32(x * y))

    def operand(self, matrix, i, j):
        inside = i < matrix.shape[0] and j < matrix.shape[1]
        return matrix[i, j] if inside else self.zero

    def result(self, values):
        return wrap_int32(values) if self.is_int else f32_bits(np.asarray(values, np.float32))


def simulate_output_stationary(a, b, d=None, *, element, rows, cols, tile=1, mac_latency=1, acc_latency=1,
                               overlap_drain=True, refill_cycles=0, period=None, tensor=1):
    """Run the output-stationary schedule register by register.

    Parameters
    ----------
    a, b, d, element
        As for :func:`golden.systolic.numerics.gemm`.
    rows, cols, tile, mac_latency, acc_latency, overlap_drain, refill_cycles, tensor
        As for :func:`golden.systolic.cycles.gemm_cycle_terms`. With ``tensor`` t each PE is a
        t x t tile of lanes: operand registers and feeders are per PE (t operands hop together),
        accumulators, shadow slots and MACs per lane, and a PE column drains its lane rows in turn.
    period : int, optional
        Override the tile period (to show a shorter one breaks the schedule).

    Returns
    -------
    c : numpy.ndarray
        As returned by :func:`golden.systolic.numerics.gemm`.
    cycles : int
        Cycle of the last drained result, plus one.
    """
    path = _Datapath(np.asarray(a), np.asarray(b), d, element)
    (m_size, k_size), n_size = path.a.shape, path.b.shape[1]
    terms = gemm_cycle_terms(m_size, k_size, n_size, rows=rows, cols=cols, tile=tile,
                             mac_latency=mac_latency, acc_latency=acc_latency, overlap_drain=overlap_drain,
                             refill_cycles=refill_cycles, tensor=tensor)
    period = terms.period if period is None else period
    # Lanes: lane row r t + i / lane column c t + j of PE(r, c); t = 1 is the one-MAC PE.
    lane_rows, lane_cols = rows * tensor, cols * tensor
    origins = [(m0, n0) for m0 in range(0, m_size, lane_rows * tile) for n0 in range(0, n_size, lane_cols)]
    starts = [n * period for n in range(len(origins))]
    beat_len, stream = terms.beat_len, terms.stream
    out = np.zeros((m_size, n_size), dtype=path.d.dtype)
    a_regs = [[None] * cols for _ in range(lane_rows)]  # [lane row][PE column]
    b_regs = [[None] * lane_cols for _ in range(rows)]  # [PE row][lane column]
    acc, shadow = {}, {}
    reads, writes = defaultdict(list), defaultdict(list)
    # Run past the closed form's end: the count returned is the last drain observed, not the formula.
    horizon = starts[-1] + terms.compute + terms.drain + rows + cols + 2
    last_drain, drained = -1, 0

    def feed(offset, t, pick):
        live = [n for n, start in enumerate(starts) if 0 <= t - start - offset < stream]
        if len(live) > 1:
            raise ScheduleHazard(f"cycle {t}: tiles {live} at one feeder")
        if not live:
            return None
        beat = t - starts[live[0]] - offset
        k, u = divmod(beat, beat_len)
        return None if u >= tile else ((live[0], k, u), pick(live[0], k, u))

    for t in range(horizon):
        # Drain: PE column c emits slot (r, u) of each of its lane columns from
        # stream + rows-1 + c + L-1 after its tile's start (r a lane row).
        for n, (m0, n0) in enumerate(origins):
            for pc in range(cols):
                j = t - (starts[n] + stream + rows - 1 + pc + mac_latency - 1)
                if not 0 <= j < lane_rows * tile:
                    continue
                r, u = divmod(j, tile)
                for c in range(pc * tensor, (pc + 1) * tensor):
                    slot = shadow.get((r, c, u))
                    if slot is None or slot[1] != n:
                        raise ScheduleHazard(f"cycle {t}: shadow ({r},{c},{u}) drained before tile {n} "
                                             "wrote it")
                    shadow[(r, c, u)] = (slot[0], n, True)
                    last_drain = t
                    if m0 + r * tile + u < m_size and n0 + c < n_size:
                        out[m0 + r * tile + u, n0 + c] = slot[0]
                        drained += 1
        # Operands shift one PE right / down; the edge registers take the feeders' next beat.
        for r in range(lane_rows):
            a_regs[r] = [feed(r // tensor, t, lambda n, k, u, r=r: path.operand(
                path.a, origins[n][0] + r * tile + u, k))] + a_regs[r][:-1]
        b_regs = [[feed(c // tensor, t, lambda n, k, u, c=c: path.operand(path.b, k, origins[n][1] + c))
                   for c in range(lane_cols)]] + b_regs[:-1]
        for r in range(lane_rows):
            for c in range(lane_cols):
                a_op, b_op = a_regs[r][c // tensor], b_regs[r // tensor][c]
                if a_op is None and b_op is None:
                    continue
                if a_op is None or b_op is None or a_op[0] != b_op[0]:
                    raise ScheduleHazard(f"cycle {t}: PE({r},{c}) operands from different beats")
                # The adder reads the slot L - acc_latency cycles after issue; the sum lands at L - 1.
                reads[t + mac_latency - acc_latency].append(
                    (r, c, a_op[0], a_op[1], b_op[1], t + mac_latency - 1))
        for r, c, (n, k, u), x, y, write_cycle in reads.pop(t, []):
            if k == 0:
                m0, n0 = origins[n]
                source = path.operand(path.d, m0 + r * tile + u, n0 + c)
            else:
                held = acc.get((r, c, u))
                if held is None or held[1:3] != (n, k - 1) or held[3] >= t:
                    raise ScheduleHazard(f"cycle {t}: accumulator ({r},{c},{u}) read before step {k - 1} "
                                         "landed")
                source = held[0]
            writes[write_cycle].append((r, c, u, n, k, path.mac(source, x, y)))
        for r, c, u, n, k, value in writes.pop(t, []):
            if k == k_size - 1:
                previous = shadow.get((r, c, u))
                if previous is not None and not previous[2]:
                    raise ScheduleHazard(f"cycle {t}: shadow ({r},{c},{u}) of tile {previous[1]} overwritten "
                                         "before it drained")
                shadow[(r, c, u)] = (value, n, False)
            else:
                acc[(r, c, u)] = (value, n, k, t)
    if drained != m_size * n_size or reads or writes:
        raise ScheduleHazard(f"{m_size * n_size - drained} results never drained")
    return path.result(out), last_drain + 1


def simulate_weight_stationary(a, b, d=None, *, element, rows, cols, mac_latency=1, overlap_load=True,
                               refill_cycles=0, period=None):
    """Run the weight-stationary schedule register by register.

    Parameters
    ----------
    a, b, d, element
        As for :func:`golden.systolic.numerics.gemm`.
    rows, cols, mac_latency, overlap_load, refill_cycles
        As for :func:`golden.systolic.cycles.gemm_cycle_terms`.
    period : int, optional
        Override the tile period.

    Returns
    -------
    c : numpy.ndarray
    cycles : int
        Cycle of the last result on the output port, plus one.
    """
    path = _Datapath(np.asarray(a), np.asarray(b), d, element)
    (m_size, k_size), n_size = path.a.shape, path.b.shape[1]
    terms = gemm_cycle_terms(m_size, k_size, n_size, rows=rows, cols=cols, dataflow="weight_stationary",
                             mac_latency=mac_latency, overlap_load=overlap_load, refill_cycles=refill_cycles)
    period = terms.period if period is None else period
    origins = [(k0, n0) for n0 in range(0, n_size, cols) for k0 in range(0, k_size, rows)]
    starts = [rows + n * period for n in range(len(origins))]
    chain = [[None] * cols for _ in range(rows)]
    weights = [[None] * cols for _ in range(rows)]
    a_regs = [[None] * cols for _ in range(rows)]
    partial = {}
    arrivals = defaultdict(list)
    horizon = starts[-1] + terms.stream + rows * mac_latency + cols + 2
    last_port = -1

    for t in range(horizon):
        for n, start in enumerate(starts):
            if t == start:  # every PE swaps to the shadow chain's weights at the tile's start
                if any(w is None or w[0] != n for row in chain for w in row):
                    raise ScheduleHazard(f"cycle {t}: weights of tile {n} not fully loaded")
                weights = [row[:] for row in chain]
            if start - rows <= t < start:
                if n > 0 and t < starts[n - 1]:
                    raise ScheduleHazard(f"cycle {t}: tile {n} loads while tile {n - 1} waits in the chain")
                k0, n0 = origins[n]
                # Load cycle j = t - (start - rows) pushes weight row k0 + rows-1-j in at the top.
                row = k0 + rows - 1 - (t - start + rows)
                top = [(n, path.operand(path.b, row, n0 + c)) for c in range(cols)]
                chain = [top] + chain[:-1]
        for r in range(rows):
            live = [n for n, start in enumerate(starts) if 0 <= t - start - r * mac_latency < m_size]
            if len(live) > 1:
                raise ScheduleHazard(f"cycle {t}: tiles {live} at row feeder {r}")
            edge = None
            if live:
                n, m = live[0], t - starts[live[0]] - r * mac_latency
                edge = ((n, m), path.operand(path.a, m, origins[n][0] + r))
            a_regs[r] = [edge] + a_regs[r][:-1]
        for c in range(cols):  # partial sums enter the top: d, or the previous k-tile's result
            for n, start in enumerate(starts):
                m = t - start - c
                if 0 <= m < m_size:
                    k0, n0 = origins[n]
                    if k0 == 0 or n0 + c >= n_size:
                        psum = path.operand(path.d, m, n0 + c)
                    else:
                        held = partial.get((m, n0 + c))
                        if held is None or held[1] != n - 1 or held[2] >= t:
                            raise ScheduleHazard(f"cycle {t}: partial ({m},{n0 + c}) read before tile "
                                                 f"{n - 1} wrote it")
                        psum = held[0]
                    arrivals[t].append((0, c, (n, m), psum))
        for r, c, tag, psum in arrivals.pop(t, []):
            operand = a_regs[r][c]
            if operand is None or operand[0] != tag or weights[r][c][0] != tag[0]:
                raise ScheduleHazard(f"cycle {t}: PE({r},{c}) partial sum, operand and weight from "
                                     "different tiles")
            k0 = origins[tag[0]][0]
            # Rows past K (a ragged last k-tile) pass the partial sum through untouched.
            result = path.mac(psum, operand[1], weights[r][c][1]) if k0 + r < k_size else psum
            if r + 1 < rows:
                arrivals[t + mac_latency].append((r + 1, c, tag, result))
            else:
                last_port = max(last_port, t + mac_latency)
                if origins[tag[0]][1] + c < n_size:
                    partial[(tag[1], origins[tag[0]][1] + c)] = (result, tag[0], t + mac_latency)
    if arrivals or len(partial) != m_size * n_size:
        raise ScheduleHazard("the schedule ended with partial sums in flight")
    out = np.zeros((m_size, n_size), dtype=path.d.dtype)
    for (m, column), (value, _, _) in partial.items():
        out[m, column] = value
    return path.result(out), last_port + 1
