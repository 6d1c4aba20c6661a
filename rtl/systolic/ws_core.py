"""The weight-stationary PE grid with its skew lines and partial-sum buffers (lockstep)."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..registry import check_bool, check_int
from .os_core import MAX_DIMENSION, delayed
from .ws_pe import WeightStationaryPE, weight_layout

__all__ = ["WeightStationaryCore"]


class WeightStationaryCore(wiring.Component):
    """A ``rows x cols`` weight-stationary systolic array, one row of A per cycle, no stalls inside.

    Implements the weight-stationary schedule of :func:`golden.systolic.gemm_cycles`: PE(r, c)
    holds ``B[k0 + r, n0 + c]`` of the current weight tile, row m of A streams through it, and
    the partial sum of ``C[m, n0 + c]`` gains one product per PE row on its way down column c.

    * ``load``: a weight row ``[B[k, n0 + c] for c]`` presented in cycle t is pushed into the top
      of the shadow chain at the end of t; the chain shifts every cycle. Push a tile's rows
      last row first in the ``rows`` cycles before its start s (cycle s - rows is the model's
      load start), with ``valid = 0`` for rows past K, and raise ``swap`` in cycle s - 1 with
      the last push: every PE takes its new weight at once.
    * ``row``: ``[A[m, k0 + r] for r]`` presented in cycle ``s + m - 1`` reaches PE(r, c) in
      cycle ``s + m + r L + c``. ``valid`` marks real rows; ``first`` starts the sum from ``d``
      (or +0) instead of the partial-sum buffer; ``last`` sends the sum to ``result``.
    * Column c's partial sum of row m enters PE(0, c) in cycle ``s + m + c`` and leaves the
      bottom ``rows L`` cycles later, where it is written to column c's buffer (read back by the
      next k-tile, transparently in the cycle of the write) and, on the last k-tile, de-skewed.
      Results of row m appear on ``result`` in cycle ``s + m + cols - 1 + rows L``.

    Rows must come in the same order (m = 0, 1, ..., M - 1) in every k-tile: the buffers use
    wrapping counters, not addresses from outside, and ``m_size`` sets where they wrap.

    Parameters
    ----------
    rows, cols : int
    element : {"f32", "f16", "bf16", "int8"}
    accumulate : bool
        Take ``d`` on ``row`` for the first k-tile.
    max_m : int
        Depth of each column's partial-sum buffer.

    Attributes
    ----------
    load : In(StructLayout(w: ArrayLayout(weight_layout(operand), cols), swap))
    row : In(StructLayout(valid, first, last, a: ArrayLayout(operand, rows), d: ArrayLayout(acc, cols)))
    m_size : In(range(max_m + 1))
        M of the running job (constant while it runs).
    result : Out(StructLayout(valid, data: ArrayLayout(accumulator, cols)))
    mac_latency : int
        L of the cycle model (multiplier plus adder latency).
    """

    def __init__(self, *, rows=2, cols=2, element="f16", accumulate=False, max_m=64):
        self._rows = check_int("rows", rows, 1, MAX_DIMENSION)
        self._cols = check_int("cols", cols, 1, MAX_DIMENSION)
        self._accumulate = check_bool("accumulate", accumulate)
        self._max_m = check_int("max_m", max_m, 1, 1 << 20)
        self._element = element
        probe = WeightStationaryPE(element=element)
        probe._MustUse__silence = True  # only read for its shapes and latency
        self.mac_latency = probe.mac_latency
        self.operand_shape = probe.a_in.shape()
        self.accumulator_shape = probe.psum_in.data.shape()
        row_fields = {"valid": 1, "first": 1, "last": 1, "a": data.ArrayLayout(self.operand_shape, rows)}
        if accumulate:
            row_fields["d"] = data.ArrayLayout(self.accumulator_shape, cols)
        super().__init__({
            "load": In(data.StructLayout({"w": data.ArrayLayout(weight_layout(self.operand_shape), cols),
                                          "swap": 1})),
            "row": In(data.StructLayout(row_fields)),
            "m_size": In(range(max_m + 1)),
            "result": Out(data.StructLayout({"valid": 1, "data": data.ArrayLayout(self.accumulator_shape,
                                                                                  cols)})),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols, latency = self._rows, self._cols, self.mac_latency
        grid = [[WeightStationaryPE(element=self._element) for _ in range(cols)] for _ in range(rows)]
        for r in range(rows):
            for c in range(cols):
                pe = grid[r][c]
                m.submodules[f"pe_{r}_{c}"] = pe
                m.d.comb += pe.swap.eq(self.load.swap)
                if c:
                    m.d.comb += pe.a_in.eq(grid[r][c - 1].a_out)
                if r:
                    m.d.comb += [pe.shadow_in.eq(grid[r - 1][c].shadow_out),
                                 pe.psum_in.eq(grid[r - 1][c].psum_out)]
            # Row r's operands wait r L cycles: the sums they meet spend L cycles in each row above.
            skewed = delayed(m, self.row.a[r], r * latency, f"skew_a{r}", reset_less=True)
            m.d.comb += grid[r][0].a_in.eq(skewed)

        control = Cat(self.row.valid, self.row.first, self.row.last)
        for c in range(cols):
            top, bottom = grid[0][c], grid[rows - 1][c]
            m.d.comb += top.shadow_in.eq(self.load.w[c])
            # Column c's sums start c + 1 cycles after their row was presented, with the operand
            # reaching PE(0, c). The buffer read is issued one cycle earlier.
            ahead = delayed(m, control, c, f"skew_control{c}")
            here = delayed(m, ahead, 1, f"top_control{c}")
            valid, first, last = here[0], here[1], here[2]
            m.submodules[f"psum_buffer{c}"] = buffer = Memory(shape=self.accumulator_shape, depth=self._max_m,
                                                               init=[])
            write = buffer.write_port()
            read = buffer.read_port(transparent_for=(write,))
            read_at = self._counter(m, f"read{c}", ahead[0] & ~ahead[1])
            m.d.comb += [read.addr.eq(read_at), read.en.eq(1),
                         write.addr.eq(self._counter(m, f"write{c}", bottom.psum_out.valid)),
                         write.data.eq(bottom.psum_out.data), write.en.eq(bottom.psum_out.valid)]
            start = 0  # +0.0 and integer 0 are both all-zero bits
            if self._accumulate:
                start = delayed(m, self.row.d[c], c + 1, f"skew_d{c}", reset_less=True)
            m.d.comb += [top.psum_in.valid.eq(valid), top.psum_in.last.eq(last),
                         top.psum_in.data.eq(Mux(first, start, read.data))]
            # De-skew the results of the last k-tile: column c is c cycles behind column 0.
            out = delayed(m, Cat(bottom.psum_out.valid & bottom.psum_out.last, bottom.psum_out.data),
                          cols - 1 - c, f"deskew{c}")
            m.d.comb += self.result.data[c].eq(out[1:])
            if c == cols - 1:
                m.d.comb += self.result.valid.eq(out[0])
        return m

    def _counter(self, m, name, step):
        """Row index of a column's buffer accesses: counts rows, wrapping at ``m_size``."""
        counter = Signal(range(self._max_m), name=name)
        with m.If(step):
            m.d.sync += counter.eq(Mux(counter == self.m_size - 1, 0, counter + 1))
        return counter
