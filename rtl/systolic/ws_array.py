"""The weight-stationary systolic array behind streams: one GEMM's weight tiles per command."""

from amaranth.hdl import Cat, EnableInserter, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import Param, Parameterized
from .arithmetic import ELEMENTS
from .os_array import CYCLE_COUNTER_BITS, bad_size, end_job, offer_results, register_array
from .os_core import MAX_DIMENSION, delayed
from .ws_core import WeightStationaryCore

__all__ = ["WeightStationaryArray"]


class WeightStationaryArray(Parameterized, wiring.Component):
    """``C = A B (+ D)`` on a weight-stationary systolic array fed by streams.

    A command ``{m, k, n_tiles}`` runs the weight tiles of B n-tile outer, k-tile inner
    (k0 = 0, rows, ... < K), on the schedule of ``golden.systolic.gemm_cycles(...,
    dataflow="weight_stationary")`` with the next tile's weights loaded during the current one.
    For each tile the caller streams:

    * on ``w``, ``rows`` weight rows, **last row first**: ``[B[k0 + rows - 1 - j, n0 + c] for c]``
      for j = 0 .. rows - 1 (rows past K are ignored, send anything);
    * on ``a``, the M rows ``[A[m, k0 + r] for r]``, m = 0 .. M - 1 (lanes past K are ignored);
    * on ``d`` (with ``accumulate``, first k-tile of each n-tile only): ``[D[m, n0 + c] for c]``;

    and receives on ``c``, once per n-tile, the M result rows ``[C[m, n0 + c] for c]``. Partial
    sums between k-tiles stay in the array's column buffers.

    Without stalls the first ``w`` transfer is cycle 0 of the cycle model and the last ``c``
    transfer happens in cycle ``gemm_cycles(...) - 1``; ``cycles`` reports the count. Missing
    operands and backpressure stop the whole array (one global enable).

    Parameters
    ----------
    rows, cols : int
    element : {"f32", "f16", "bf16", "int8"}
    accumulate : bool
    max_m, max_k, max_tiles : int
        Largest M, K and n-tile count of a command.
    core : wiring.Component, optional
        Run this core instead of a :class:`~.ws_core.WeightStationaryCore` of ``element`` (the block
        floating point array passes its own; it must have the same ports and schedule attributes,
        and ``rows``, ``cols``, ``accumulate`` and ``max_m`` must match it).

    Attributes
    ----------
    cmd : In(stream.Signature(StructLayout(m, k, n_tiles)))
    w, a : In(stream.Signature(ArrayLayout(operand, cols / rows)))
    d : In(stream.Signature(ArrayLayout(accumulator, cols)))
        Only with ``accumulate``.
    c : Out(stream.Signature(ArrayLayout(accumulator, cols)))
    busy : Out(1)
    cycles : Out(48)
    cmd_error : Out(1)
        The last command was rejected: ``m``, ``k`` or ``n_tiles`` 0 or past ``max_m`` / ``max_k`` /
        ``max_tiles`` (it is consumed without running); cleared by the next command accepted.

    Notes
    -----
    Throughput: one row of A per cycle (``rows cols`` MACs) while a tile streams; tiles start
    ``max(M + cols - 1 + (rows - 1) L, rows L + 1 if K > rows, rows)`` cycles apart.
    """

    PARAMS = (
        Param("rows", int, 2, "PE rows", minimum=1, maximum=MAX_DIMENSION),
        Param("cols", int, 2, "PE columns", minimum=1, maximum=MAX_DIMENSION),
        Param("element", str, "f16", "operand type", choices=ELEMENTS),
        Param("accumulate", bool, False, "add an initial accumulator D"),
        Param("max_m", int, 64, "largest M (partial-sum buffer depth)", minimum=1, maximum=1 << 20),
        Param("max_k", int, 64, "largest K", minimum=1, maximum=1 << 24),
        Param("max_tiles", int, 64, "largest n-tile count per command", minimum=1, maximum=1 << 24),
    )

    def __init__(self, *, rows=2, cols=2, element="f16", accumulate=False, max_m=64, max_k=64, max_tiles=64,
                 core=None):
        self._core = core if core is not None else WeightStationaryCore(
            rows=rows, cols=cols, element=element, accumulate=accumulate, max_m=max_m)
        self._rows, self._cols, self._accumulate = rows, cols, accumulate
        self._max_m, self._max_k = max_m, max_k
        core = self._core
        self.mac_latency = core.mac_latency
        ports = {
            "cmd": In(stream.Signature(data.StructLayout({"m": range(max_m + 1), "k": range(max_k + 1),
                                                          "n_tiles": range(max_tiles + 1)}))),
            "w": In(stream.Signature(data.ArrayLayout(core.operand_shape, cols))),
            "a": In(stream.Signature(data.ArrayLayout(core.operand_shape, rows))),
            "c": Out(stream.Signature(data.ArrayLayout(core.accumulator_shape, cols))),
            "busy": Out(1),
            "cycles": Out(CYCLE_COUNTER_BITS),
            "cmd_error": Out(1),
        }
        if accumulate:
            ports["d"] = In(stream.Signature(data.ArrayLayout(core.accumulator_shape, cols)))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        rows, cols, latency = self._rows, self._cols, self.mac_latency
        en = Signal()  # the global enable
        m.submodules.core = core = EnableInserter(en)(self._core)

        size_m = Signal(range(self._max_m + 1))
        size_k = Signal(range(self._max_k + 1))
        n_tiles = Signal(range(self._max_tiles + 1))
        outputs_left = Signal(range(self._max_tiles * self._max_m + 1))
        running = Signal()
        chain_cycles = self._core.chain_cycles
        period = Signal(range(self._max_m + cols + rows * latency + chain_cycles + rows + 2))
        stream_part = size_m + (cols - 1) + self._core.last_row_offset
        chain = Mux(size_k > rows, chain_cycles, 0)
        m.d.comb += [self.busy.eq(running), self.cmd.ready.eq(~running), core.m_size.eq(size_m),
                     period.eq(Mux(stream_part > chain, Mux(stream_part > rows, stream_part, rows),
                                   Mux(chain > rows, chain, rows)))]

        # Tile clock: a pulse per weight tile, every `period` cycles, k-tiles inside n-tiles.
        countdown = Signal.like(period)
        k0 = Signal(range(self._max_k + rows))
        n_tile = Signal(range(self._max_tiles + 1))
        tiling = Signal()
        pulse = Signal()
        last_k = k0 + rows >= size_k
        m.d.comb += pulse.eq(tiling & (countdown == 0))
        # A command outside the counters' and buffers' range would wrap them: consumed, not run.
        command = self.cmd.payload
        rejected = (bad_size(command.m, self._max_m) | bad_size(command.k, self._max_k)
                    | bad_size(command.n_tiles, self._max_tiles))
        with m.If(self.cmd.valid & ~running):
            m.d.sync += self.cmd_error.eq(rejected)
            with m.If(~rejected):
                m.d.sync += [size_m.eq(command.m), size_k.eq(command.k), n_tiles.eq(command.n_tiles),
                             running.eq(1), tiling.eq(1), countdown.eq(0), k0.eq(0), n_tile.eq(0),
                             outputs_left.eq(command.n_tiles * command.m)]
        with m.If(en):
            with m.If(pulse):
                m.d.sync += [countdown.eq(period - 1), k0.eq(Mux(last_k, 0, k0 + rows))]
                with m.If(last_k):
                    m.d.sync += n_tile.eq(n_tile + 1)
                    with m.If(n_tile == n_tiles - 1):
                        m.d.sync += tiling.eq(0)
            with m.Elif(countdown != 0):
                m.d.sync += countdown.eq(countdown - 1)

        # Load: `rows` pushes from the pulse, last row first; row k0 + rows - 1 - j is valid below K.
        loading = Signal()
        load_row = Signal(range(rows))
        load_k0 = Signal.like(k0)
        with m.If(en):
            with m.If(pulse):
                m.d.sync += [loading.eq(1), load_row.eq(0), load_k0.eq(k0)]
            with m.Elif(loading):
                m.d.sync += load_row.eq(load_row + 1)
                with m.If(load_row == rows - 1):
                    m.d.sync += loading.eq(0)
        weight_valid = load_k0 + (rows - 1) - load_row < size_k
        for c in range(cols):
            m.d.comb += [core.load.w[c].valid.eq(weight_valid), core.load.w[c].data.eq(self.w.payload[c])]
        m.d.comb += core.load.swap.eq(loading & (load_row == rows - 1))

        # Rows of A: M of them from rows - 1 cycles after the pulse (row 0 meets PE(0, 0) at the start).
        with m.If(en):
            start = delayed(m, Cat(pulse, k0 == 0, last_k), rows - 1, "row_start")
        streaming = Signal()
        row = Signal(range(self._max_m))
        first_tile, last_tile = Signal(), Signal()
        with m.If(en):
            with m.If(start[0]):
                m.d.sync += [streaming.eq(1), row.eq(0), first_tile.eq(start[1]), last_tile.eq(start[2])]
            with m.Elif(streaming):
                m.d.sync += row.eq(row + 1)
                with m.If(row == size_m - 1):
                    m.d.sync += streaming.eq(0)
        m.d.comb += [core.row.valid.eq(streaming), core.row.first.eq(first_tile), core.row.last.eq(last_tile),
                     core.row.a.eq(self.a.payload)]
        inputs_ready = (~loading | self.w.valid) & (~streaming | self.a.valid)
        need_d = streaming & first_tile
        if self._accumulate:
            m.d.comb += [core.row.d.eq(self.d.payload), self.d.ready.eq(en & need_d)]
            inputs_ready &= ~need_d | self.d.valid

        offer_results(m, self, core.result, en=en, running=running, inputs_ready=inputs_ready,
                      readies=[self.w.ready.eq(en & loading), self.a.ready.eq(en & streaming)])

        # Job end; cycles from the first weight push (cycle 0) to the last result, inclusive.
        end_job(m, self, start=self.cmd.valid & ~running & ~rejected, first=en & loading,
                first_name="first_push", count_first=True, running=running, left=outputs_left)
        return m


register_array(
    "ws_array", WeightStationaryArray,
    summary="Weight-stationary systolic array (f32/f16/bf16/int8) behind streams, cycle-exact to the model.",
    golden="golden.systolic.numerics:gemm",
)
