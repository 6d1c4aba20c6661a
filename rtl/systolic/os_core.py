"""The output-stationary PE grid with its skew, fill and drain chains (lockstep, no flow control)."""

from amaranth.hdl import Cat, Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..registration import check_int
from .os_pe import OutputStationaryPE, delayed
from .tensor_pe import TensorPE

__all__ = ["OutputStationaryCore", "delayed", "MAX_DIMENSION"]

MAX_DIMENSION = 256


def lanes(array, start, count):
    """``array[start .. start + count - 1]`` as one value (the element itself for one lane)."""
    return array[start] if count == 1 else Cat(*(array[start + index] for index in range(count)))


class OutputStationaryCore(wiring.Component):
    """A ``rows x cols`` output-stationary systolic array, one beat per cycle, no stalls inside.

    Implements the schedule of :func:`golden.systolic.gemm_cycles` (``dataflow="output_stationary"``,
    wavefront overlap): PE(r, c) owns outputs ``C[m0 + r T + u, n0 + c]``. A beat presented on
    ``beat`` in cycle t reaches PE(r, c)'s operand registers in cycle ``t + 1 + r + c`` (row r is
    delayed r cycles on its way in, column c by c cycles; operands then move one PE per cycle).
    Beat ``b = k beat_len + u`` of a tile carries ``A[m0 + r T + u, k]`` in ``a[r]`` and
    ``B[k, n0 + c]`` in ``b[c]``; beats with ``u >= T`` are idle (``valid = 0``). ``first`` and
    ``last`` mark the beats of k = 0 and k = K - 1.

    Results leave as de-skewed rows: all of row ``(r, u)`` of a tile appear together on
    ``result`` in cycle ``t0 + K beat_len + mac_latency + rows + cols - 2 + r T + u``, where t0 is
    the cycle of the tile's first beat, one row per cycle. Every column drains through a register
    chain down its PEs; each PE puts its T results on it in a window that a token passes from
    row to row, started by the top PE's own final write of slot 0.

    With ``accumulate``, ``d`` is loaded into each PE's fill bank through a second column chain:
    row ``(r, u)`` of a tile's D, in row-major order, is presented on ``fill`` (``first`` on the
    tile's first row) in the ``rows T`` consecutive cycles from ``t0 - fill_lead``, where t0 is the
    tile's first beat. Any tile start at least ``(rows - 1) T + 1`` cycles after the previous one
    keeps this window clear of the previous tile's reads.

    The core has no enable: a wrapper that needs to stall it applies ``EnableInserter`` to it
    and holds its inputs.

    **Tensor PEs** (``tensor`` t > 1): every PE is a :class:`~.tensor_pe.TensorPE`, a t x t tile
    of MAC lanes. Seen from the ports the core is then a ``rows t x cols t`` grid of lanes, lane
    row ``r t + i`` owning outputs ``C[m0 + (r t + i) T + u, ...]``: ``a`` carries ``rows t``
    operands, ``b``, ``fill`` and ``result`` ``cols t`` values, in the same order as a
    ``rows t x cols t`` array with one MAC per PE. The skew, the operand hops and the drain and
    fill chains are per PE (t lanes move together), so the skew is ``rows + cols - 2`` and the
    result row ``j = (r t + i) T + u`` of a tile leaves in cycle ``t0 + K beat_len + mac_latency +
    rows + cols - 2 + j``, ``fill_lead = (rows t - 1) T - multiply_latency``.

    **Gather** (``gather``, the sparse array): B does not flow down the columns. ``b`` carries a
    whole B row slice per lane row (``rows t x cols t`` operands, lane row ρ's own B row, chosen
    by the column index of ρ's A operand); it reaches PE(r, c) in the same cycle as the A operand
    of the same beat.

    Parameters
    ----------
    rows, cols : int
        PE grid, 1 to 256 each.
    element : {"f32", "f16", "bf16", "int8"}
    slots : int
        T, accumulator slots per PE (1 to 64).
    accumulate : bool
        ``C = A B + D`` with D through the ``fill`` port; otherwise ``C = A B``.
    tensor : int
        t, each PE a t x t tile of lanes (1 to 16; 1 is the one-MAC PE).
    gather : bool
        One B row per lane row on ``b`` (sparse array) instead of one B row for all.

    Attributes
    ----------
    beat : In(StructLayout(valid, first, last, a: ArrayLayout(operand, rows t),
                           b: ArrayLayout(operand, cols t)))
        With ``gather``, ``b`` is ``ArrayLayout(ArrayLayout(operand, cols t), rows t)``.
    fill : In(StructLayout(first, data: ArrayLayout(accumulator, cols t)))
        Only with ``accumulate``.
    result : Out(StructLayout(valid, data: ArrayLayout(accumulator, cols)))
        Registered. Operands and results are raw bits (binary32 for the floats), int8 / int32.
    mac_latency : int
        L of the cycle model: multiplier + adder latency + 2 (shadow write and the drain
        register). The array's total is ``gemm_cycles(..., mac_latency=L, acc_latency=A)``
        counted from the cycle after the first beat to the last result, inclusive.
    acc_latency : int
        A of the cycle model: the adder latency (6 for the floats, 1 for int8).
    beat_len : int
        ``max(T, acc_latency)``.
    fill_lead : int
        ``(rows t - 1) T - multiply_latency``; negative means the fill follows the first beat.
    """

    def __init__(self, *, rows=2, cols=2, element="f16", slots=1, accumulate=False, tensor=1, gather=False):
        self._rows = check_int("rows", rows, 1, MAX_DIMENSION)
        self._cols = check_int("cols", cols, 1, MAX_DIMENSION)
        self._pe = dict(element=element, slots=slots, accumulate=accumulate)
        probe = OutputStationaryPE(**self._pe)
        probe._MustUse__silence = True  # only read for its shapes and latencies
        if tensor != 1 or gather:
            self._pe.update(tensor=tensor, gather=gather)
            TensorPE(**self._pe)._MustUse__silence = True  # validates tensor and gather
        self._tensor, self._gather = tensor, gather
        self._slots, self._accumulate = slots, accumulate
        self.operand_shape = probe.a_in.data.shape()
        self.accumulator_shape = probe.drain_in.data.shape()
        self.acc_latency = probe.add_latency
        self.mac_latency = probe.multiply_latency + probe.add_latency + 2
        self.beat_len = probe.beat_len
        self.fill_lead = (rows * tensor - 1) * slots - probe.multiply_latency
        lane_rows, lane_cols = rows * tensor, cols * tensor
        b_layout = data.ArrayLayout(self.operand_shape, lane_cols)
        if gather:
            b_layout = data.ArrayLayout(b_layout, lane_rows)
        ports = {
            "beat": In(data.StructLayout({"valid": 1, "first": 1, "last": 1,
                                          "a": data.ArrayLayout(self.operand_shape, lane_rows),
                                          "b": b_layout})),
            "result": Out(data.StructLayout({"valid": 1,
                                             "data": data.ArrayLayout(self.accumulator_shape, lane_cols)})),
        }
        if accumulate:
            lanes_d = data.ArrayLayout(self.accumulator_shape, lane_cols)
            ports["fill"] = In(data.StructLayout({"first": 1, "data": lanes_d}))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        rows, cols, t = self._rows, self._cols, self._tensor
        pe_class = TensorPE if "tensor" in self._pe else OutputStationaryPE
        grid = [[pe_class(**self._pe) for _ in range(cols)] for _ in range(rows)]
        for r in range(rows):
            for c in range(cols):
                m.submodules[f"pe_{r}_{c}"] = grid[r][c]

        beat = self.beat
        for r in range(rows):
            control = delayed(m, Cat(beat.valid, beat.first, beat.last), r, f"skew_control{r}")
            operands = lanes(beat.a, r * t, t)  # PE row r's t lane rows
            m.d.comb += [grid[r][0].a_in.as_value()[:3].eq(control),
                         grid[r][0].a_in.data.eq(delayed(m, operands, r, f"skew_a{r}", reset_less=True))]
            for c in range(1, cols):
                m.d.comb += grid[r][c].a_in.eq(grid[r][c - 1].a_out)
        for c in range(cols):
            top = grid[0][c]
            if self._gather:
                # Each PE gets its lane rows' own B operands, as late as its A operands.
                for r in range(rows):
                    own = Cat(*(beat.b[r * t + i][c * t + j] for i in range(t) for j in range(t)))
                    own = delayed(m, own, r + c, f"gather_b{r}_{c}", reset_less=True)
                    m.d.comb += grid[r][c].b_in.eq(own)
            else:
                operands = lanes(beat.b, c * t, t)
                m.d.comb += top.b_in.eq(delayed(m, operands, c, f"skew_b{c}", reset_less=True))
            # The column drain starts beat_len cycles after slot 0 of the top PE is final, which
            # is when the model's drain reads it (see docs/systolic.md for the derivation).
            m.d.comb += top.drain_token_in.eq(delayed(m, top.slot0_written, self.beat_len, f"drain_start{c}"))
            if self._accumulate:
                values = lanes(self.fill.data, c * t, t)
                column = delayed(m, Cat(self.fill.first, values), c, f"skew_d{c}")
                m.d.comb += [top.fill_token_in.eq(column[0]), top.fill_in.eq(column[1:])]
            for r in range(1, rows):
                above, pe = grid[r - 1][c], grid[r][c]
                if not self._gather:
                    m.d.comb += pe.b_in.eq(above.b_out)
                m.d.comb += [pe.drain_in.eq(above.drain_out), pe.drain_token_in.eq(above.drain_token_out)]
                if self._accumulate:
                    m.d.comb += [pe.fill_in.eq(above.fill_out), pe.fill_token_in.eq(above.fill_token_out)]
            # De-skew: column c's results are c cycles behind column 0's.
            bottom = delayed(m, grid[rows - 1][c].drain_out.as_value(), cols - 1 - c, f"deskew{c}")
            width = self.accumulator_shape.width
            for j in range(t):
                m.d.comb += self.result.data[c * t + j].eq(bottom[1 + j * width:1 + (j + 1) * width])
            if c == cols - 1:
                m.d.comb += self.result.valid.eq(bottom[0])
        return m
