"""The weight-stationary PE grid with its skew lines and partial-sum buffers (lockstep)."""

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..registration import check_bool, check_int
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
    last_row_offset : int
        ``(rows - 1) L``: cycles from a row's operand at PE(0, c) to its operand at PE(rows - 1, c),
        after which the next tile's weights may be swapped in.
    chain_cycles : int
        ``rows L + 1``: the least distance between consecutive k-tiles' starts that lets a row's
        partial sum leave the bottom before the next k-tile reads it.
    """

    def __init__(self, *, rows=2, cols=2, element="f16", accumulate=False, max_m=64):
        self._check_geometry(rows, cols, accumulate, max_m)
        self._element = element
        probe = WeightStationaryPE(element=element)
        probe._MustUse__silence = True  # only read for its shapes and latency
        self.mac_latency = probe.mac_latency
        self.last_row_offset = (rows - 1) * self.mac_latency
        self.chain_cycles = rows * self.mac_latency + 1
        self._init_ports(probe.a_in.shape(), probe.psum_in.data.shape())

    def _check_geometry(self, rows, cols, accumulate, max_m):
        self._rows = check_int("rows", rows, 1, MAX_DIMENSION)
        self._cols = check_int("cols", cols, 1, MAX_DIMENSION)
        self._accumulate = check_bool("accumulate", accumulate)
        self._max_m = check_int("max_m", max_m, 1, 1 << 20)

    def _init_ports(self, operand_shape, accumulator_shape):
        rows, cols = self._rows, self._cols
        self.operand_shape, self.accumulator_shape = operand_shape, accumulator_shape
        row_fields = {"valid": 1, "first": 1, "last": 1, "a": data.ArrayLayout(operand_shape, rows)}
        if self._accumulate:
            row_fields["d"] = data.ArrayLayout(accumulator_shape, cols)
        super().__init__({
            "load": In(data.StructLayout({"w": data.ArrayLayout(weight_layout(operand_shape), cols),
                                          "swap": 1})),
            "row": In(data.StructLayout(row_fields)),
            "m_size": In(range(self._max_m + 1)),
            "result": Out(data.StructLayout({"valid": 1, "data": data.ArrayLayout(accumulator_shape, cols)})),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols, latency = self._rows, self._cols, self.mac_latency
        grid = [[self._pe(r) for _ in range(cols)] for r in range(rows)]
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
            skewed = delayed(m, Value.cast(self.row.a[r]), r * latency, f"skew_a{r}", reset_less=True)
            m.d.comb += grid[r][0].a_in.eq(skewed)

        control = Cat(self.row.valid, self.row.first, self.row.last)
        for c in range(cols):
            column = [grid[r][c] for r in range(rows)]
            m.d.comb += column[0].shadow_in.eq(self.load.w[c])
            # Column c's sums start c + 1 cycles after their row was presented, with the operand
            # reaching PE(0, c). The buffer read is issued one cycle earlier.
            ahead = delayed(m, control, c, f"skew_control{c}")
            self._column(m, c, column, ahead, delayed(m, ahead, 1, f"top_control{c}"))
        return m

    def _pe(self, row):
        return WeightStationaryPE(element=self._element)

    def _column(self, m, c, column, ahead, here):
        """Column c's partial sums: start value, buffer between k-tiles and result path.

        ``ahead`` and ``here`` are the row's ``(valid, first, last)`` one cycle before and in the
        cycle its sum enters the top PE.
        """
        top, bottom = column[0], column[-1]
        start = 0  # +0.0 and integer 0 are both all-zero bits
        if self._accumulate:
            start = delayed(m, self.row.d[c], c + 1, f"skew_d{c}", reset_less=True)
        stored = self._psum_buffer(m, c, read=ahead[0] & ~ahead[1], write=bottom.psum_out.valid,
                                   write_data=bottom.psum_out.data)
        m.d.comb += [top.psum_in.valid.eq(here[0]), top.psum_in.last.eq(here[2]),
                     top.psum_in.data.eq(Mux(here[1], start, stored))]
        self._result(m, c, bottom.psum_out.valid & bottom.psum_out.last, bottom.psum_out.data)

    def _psum_buffer(self, m, c, *, read, write, write_data):
        """Column c's buffer of partial sums between k-tiles; returns the word read after ``read``.

        Reads (issued by ``read``, one cycle before the word is used) and writes visit the rows in
        order; a read is transparent to a write of the same cycle.
        """
        m.submodules[f"psum_buffer{c}"] = buffer = Memory(shape=self.accumulator_shape, depth=self._max_m,
                                                           init=[])
        write_port = buffer.write_port()
        read_port = buffer.read_port(transparent_for=(write_port,))
        m.d.comb += [read_port.addr.eq(self._counter(m, f"read{c}", read)), read_port.en.eq(1),
                     write_port.addr.eq(self._counter(m, f"write{c}", write)),
                     write_port.data.eq(write_data), write_port.en.eq(write)]
        return read_port.data

    def _result(self, m, c, valid, value):
        """De-skew the results of the last k-tile: column c is c cycles behind column 0."""
        out = delayed(m, Cat(valid, value), self._cols - 1 - c, f"deskew{c}")
        m.d.comb += self.result.data[c].eq(out[1:])
        if c == self._cols - 1:
            m.d.comb += self.result.valid.eq(out[0])

    def _counter(self, m, name, step):
        """Row index of a column's buffer accesses: counts rows, wrapping at ``m_size``."""
        counter = Signal(range(self._max_m), name=name)
        with m.If(step):
            m.d.sync += counter.eq(Mux(counter == self.m_size - 1, 0, counter + 1))
        return counter
