"""Arbitrary M x K x N GEMMs on a systolic array (dense or block floating point), from on-chip
operand buffers."""

from dataclasses import replace

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..registration import Param, Parameterized
from .arithmetic import ELEMENTS
from .block_fp_array import BlockFloatArray, block_format_params
from .block_fp_ws_array import BlockFloatWeightStationaryArray
from .block_fp_ws_core import check_block_parameters
from .buffer_walk import counters, reader, row_major
from .os_array import ARRAY_PARAMS, CYCLE_COUNTER_BITS, OutputStationaryArray, bad_size, register_array
from .ws_array import WeightStationaryArray

__all__ = ["TiledGemm", "DATAFLOWS", "BLOCK_FP"]

DATAFLOWS = ("output_stationary", "weight_stationary")
BLOCK_FP = "block_fp"
_BLOCK_FORMAT = block_format_params(block=8)


def _ceil_div(a, b):
    return -(-a // b)


class TiledGemm(Parameterized, wiring.Component):
    """``C = A B (+ D)`` for any ``M x K x N`` within the buffers, tiled onto a systolic array.

    A command ``{m, k, n}`` starts a GEMM in two phases:

    1. **Fill.** ``a`` takes A (M x K), ``b`` takes B (K x N) and, with ``accumulate``, ``d``
       takes D (M x N), each row-major, one element per transfer, all three concurrently. Each
       operand has its own memory (:class:`amaranth.lib.memory.Memory`) of array-wide words, laid
       out so that the compute phase reads one word per cycle:

       * B as ``[B[k, n0 + c] for c]`` at ``n-tile k_stride + k`` and D as ``[D[m, n0 + c] for c]``
         at ``m n_tiles_max + n-tile``, for both dataflows;
       * A, output stationary: ``[A[m0 + r T + u, k] for r]`` at ``(m-tile T + u) max_k + k``;
         weight stationary: ``[A[m, k0 + r] for r]`` at ``m k_tiles_max + k-tile``.
    2. **Compute.** All tiles run back to back as one job of the array, fed by prefetching readers
       that walk the buffers in the array's tile order: :class:`~.os_array.OutputStationaryArray`
       (m-tile outer, n-tile inner) or :class:`~.ws_array.WeightStationaryArray` (n-tile outer,
       k-tile inner). ``c`` returns result rows ``[C[m, n0 + c] for c]`` (rows past M dropped,
       lanes past N zero, ``last`` on the final one): per tile in row order (output stationary),
       or per n-tile, m = 0 .. M - 1 (weight stationary).

    The readers never let the array wait, so the compute phase takes exactly
    :func:`golden.systolic.gemm_cycles` cycles (with this ``dataflow``) when ``c`` is not
    backpressured; ``cycles`` reports it.

    **Block floating point** (``element="block_fp"``): the array is
    :class:`~.block_fp_array.BlockFloatArray` (output stationary) or
    :class:`~.block_fp_ws_array.BlockFloatWeightStationaryArray`, and ``a`` and ``b`` take encoded
    elements ``{mantissa, exponent}`` (:func:`golden.systolic.to_block_fp` along K: A per row, B
    per column, the exponent of an element being its block's shared exponent), in the same
    row-major order; ``d`` and ``c`` are binary32. Each output tile runs all of K on the array
    (output stationary) or its k-tiles in increasing order through the array's partial-sum
    buffer, whole blocks each (weight stationary: ``rows`` a multiple of ``block``), so every
    output is :func:`golden.systolic.block_fp_gemm`'s, bit for bit: from ``d`` (or +0.0), one
    conversion and one f32 addition per block, in increasing block order. Output stationary
    pads K to whole blocks: the readers walk ``ceil(K / block) block`` k per tile and a k past K
    reads the last k < K with its mantissas zeroed (the exponent it keeps is the block's, which
    the PE takes from the block's last beat). The compute phase takes
    :func:`golden.systolic.block_fp.block_fp_gemm_cycles` cycles.

    Parameters
    ----------
    rows, cols, accumulate
        As for the arrays.
    element : {"f32", "f16", "bf16", "int8", "block_fp"}
        The dense arrays' elements, or block floating point.
    slots : int
        T, output stationary only (must be 1 for weight stationary).
    dataflow : {"output_stationary", "weight_stationary"}
        Which array to build. The fill, the buffers of B and D, the readers' structure and the
        result path are shared; the arrays are not (see docs/systolic.md).
    max_m, max_k, max_n : int
        Buffer capacity: any GEMM with ``M <= max_m``, ``K <= max_k``, ``N <= max_n``.
    block, mantissa_bits : int
        ``element="block_fp"`` only (any other element takes the defaults): elements per shared
        exponent along K and the signed mantissa width, as for the block floating point arrays.

    Attributes
    ----------
    cmd : In(stream.Signature(StructLayout(m, k, n)))
        Accepted while idle. A command with a dimension outside 1 .. its maximum is consumed
        without running and raises ``cmd_error``.
    a, b : In(stream.Signature(operand))
        The element's raw bits, or ``{mantissa: signed(mantissa_bits), exponent: signed(9)}``.
    d : In(stream.Signature(accumulator))
        Only with ``accumulate``.
    c : Out(stream.Signature(StructLayout(data: ArrayLayout(accumulator, cols), last)))
    busy : Out(1)
    cycles : Out(48)
        Compute cycles of the last GEMM, as counted by the cycle model.
    cmd_error : Out(1)
        The last command was rejected; cleared by the next command accepted.

    Notes
    -----
    Fill takes ``max(M K, K N, M N)`` cycles at one element per cycle per stream; compute
    ``gemm_cycles(M, K, N, ...)`` plus a few cycles of reader warm-up before cycle 0 (and, output
    stationary, the first tile's D lead, see :class:`~.os_array.OutputStationaryArray`).
    """

    PARAMS = tuple([replace(param, choices=ELEMENTS + (BLOCK_FP,)) if param.name == "element" else param
                    for param in ARRAY_PARAMS] + [
        Param("dataflow", str, "output_stationary", "systolic dataflow", choices=DATAFLOWS),
        Param("max_m", int, 64, "buffer capacity: largest M", minimum=1, maximum=1 << 20),
        Param("max_k", int, 64, "buffer capacity: largest K", minimum=1, maximum=1 << 20),
        Param("max_n", int, 64, "buffer capacity: largest N", minimum=1, maximum=1 << 20),
    ] + _BLOCK_FORMAT)

    @classmethod
    def check_params(cls, values):
        if values["element"] != BLOCK_FP:
            for param in _BLOCK_FORMAT:
                if values[param.name] != param.default:
                    raise ValueError(f"{param.name} applies to element={BLOCK_FP!r} only, not to "
                                     f"element={values['element']!r}")
        elif values["dataflow"] == "weight_stationary":
            check_block_parameters(rows=values["rows"], block=values["block"],
                                   mantissa_bits=values["mantissa_bits"])

    def __init__(self, *, rows=2, cols=2, element="f16", slots=1, accumulate=False,
                 dataflow="output_stationary", max_m=64, max_k=64, max_n=64, block=8, mantissa_bits=8):
        self._dataflow = dataflow
        self._block_fp = element == BLOCK_FP
        self._tiles_m = _ceil_div(max_m, rows * slots)
        self._tiles_n = _ceil_div(max_n, cols)
        self._tiles_k = _ceil_div(max_k, rows)
        block_format = dict(block=block, mantissa_bits=mantissa_bits)
        if dataflow == "output_stationary":
            if self._block_fp:
                self._array = BlockFloatArray(rows=rows, cols=cols, **block_format, slots=slots,
                                              accumulate=accumulate, max_blocks=_ceil_div(max_k, block),
                                              max_tiles=self._tiles_m * self._tiles_n)
            else:
                self._array = OutputStationaryArray(rows=rows, cols=cols, element=element, slots=slots,
                                                    accumulate=accumulate, max_k=max_k,
                                                    max_tiles=self._tiles_m * self._tiles_n)
            self.acc_latency = self._array.acc_latency
        else:
            if slots != 1:
                raise ValueError(f"slots must be 1 for dataflow='weight_stationary', not {slots!r}")
            geometry = dict(rows=rows, cols=cols, accumulate=accumulate, max_m=max_m, max_k=max_k,
                            max_tiles=self._tiles_n)
            if self._block_fp:
                self._array = BlockFloatWeightStationaryArray(**geometry, **block_format)
            else:
                self._array = WeightStationaryArray(**geometry, element=element)
            self.acc_latency = 1
        self._rows, self._cols, self._slots, self._accumulate = rows, cols, slots, accumulate
        array = self._array
        self.mac_latency = array.mac_latency
        self.operand_shape = array.a.payload.shape().elem_shape
        self.accumulator_shape = array.c.payload.shape().elem_shape
        ports = {
            "cmd": In(stream.Signature(data.StructLayout({"m": range(max_m + 1), "k": range(max_k + 1),
                                                          "n": range(max_n + 1)}))),
            "a": In(stream.Signature(self.operand_shape)),
            "b": In(stream.Signature(self.operand_shape)),
            "c": Out(stream.Signature(data.StructLayout({
                "data": data.ArrayLayout(self.accumulator_shape, cols), "last": 1}))),
            "busy": Out(1),
            "cycles": Out(CYCLE_COUNTER_BITS),
            "cmd_error": Out(1),
        }
        if accumulate:
            ports["d"] = In(stream.Signature(self.accumulator_shape))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._rows, self._cols
        max_m, max_k, max_n = self._max_m, self._max_k, self._max_n
        m.submodules.array = array = self._array
        self._m, self._fills_done = m, []
        self._size_m, self._size_k, self._size_n = (
            Signal(range(limit + 1), name=name) for name, limit in (("size_m", max_m), ("size_k", max_k),
                                                                     ("size_n", max_n)))
        self._tiles_n_now = Signal(range(self._tiles_n + 1))
        filling, computing = Signal(), Signal()
        m.d.comb += [self.busy.eq(filling | computing), self.cmd.ready.eq(~self.busy),
                     self.cycles.eq(array.cycles)]
        # A dimension of 0 or past the buffers would wrap the fill and read counters: such a
        # command is consumed without running.
        command = self.cmd.payload
        rejected = bad_size(command.m, max_m) | bad_size(command.k, max_k) | bad_size(command.n, max_n)
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += self.cmd_error.eq(rejected)
        self._start = start = self.cmd.valid & self.cmd.ready & ~rejected
        with m.If(start):
            m.d.sync += [self._size_m.eq(self.cmd.payload.m), self._size_k.eq(self.cmd.payload.k),
                         self._size_n.eq(self.cmd.payload.n), filling.eq(1)]

        # ---- Fill: one element per transfer into its lane of an array-wide word. ----
        # Weight stationary reads B in whole k-tiles, so its stride rounds K up to them; output
        # stationary block floating point reads whole blocks.
        if self._dataflow == "output_stationary":
            self._k_stride = _ceil_div(max_k, self._block) * self._block if self._block_fp else max_k
        else:
            self._k_stride = self._tiles_k * rows
        m.submodules.b_buffer = b_memory = Memory(
            shape=data.ArrayLayout(self.operand_shape, cols), depth=self._tiles_n * self._k_stride, init=[])
        b_step = self.b.valid & self.b.ready
        b_lane, b_tile, b_k, b_last = row_major(m, "b_fill", b_step, start, self._size_n, self._size_k, cols,
                                                self._tiles_n)
        self._fill(self.b, b_memory, "b_fill", b_tile * self._k_stride + b_k, b_lane, b_last)
        # The n-tile count is where the last element of B's first row lands.
        with m.If(b_step & (b_k == 0)):
            m.d.sync += self._tiles_n_now.eq(b_tile + 1)
        d_memory = None
        if self._accumulate:
            m.submodules.d_buffer = d_memory = Memory(
                shape=data.ArrayLayout(self.accumulator_shape, cols),
                depth=self._tiles_m * rows * self._slots * self._tiles_n, init=[])
            d_step = self.d.valid & self.d.ready
            d_lane, d_tile, d_m, d_last = row_major(m, "d_fill", d_step, start, self._size_n, self._size_m,
                                                    cols, self._tiles_n)
            self._fill(self.d, d_memory, "d_fill", d_m * self._tiles_n + d_tile, d_lane, d_last)
        output_stationary = self._dataflow == "output_stationary"
        compute = self._output_stationary if output_stationary else self._weight_stationary
        launch = Signal()
        row_m, tile_n, last, finished = compute(b_memory, d_memory, launch)
        fills_complete = filling
        for done in self._fills_done:
            fills_complete &= done
        m.d.comb += [launch.eq(fills_complete & array.cmd.ready), array.cmd.valid.eq(launch)]
        with m.If(launch):
            m.d.sync += [filling.eq(0), computing.eq(1)]

        # ---- Results: drop the padding rows, zero the padding lanes, mark the last row. ----
        keep = row_m < self._size_m
        m.d.comb += [self.c.valid.eq(array.c.valid & keep), array.c.ready.eq(self.c.ready | ~keep),
                     self.c.payload.last.eq(last & (row_m == self._size_m - 1))]
        for lane in range(cols):
            m.d.comb += self.c.payload.data[lane].eq(
                Mux(tile_n * cols + lane < self._size_n, array.c.payload[lane], 0))
        with m.If(finished):
            m.d.sync += computing.eq(0)
        return m

    def _fill(self, port, memory, name, address, lane, last):
        """Accept ``port`` until its ``last`` element, writing each into its ``lane`` at ``address``."""
        m = self._m
        write = memory.write_port(granularity=1)
        busy = Signal(name=f"{name}_filling")
        m.d.comb += [port.ready.eq(busy), write.addr.eq(address),
                     write.en.eq(Mux(port.valid & busy, Const(1, len(write.en)) << lane, 0))]
        for index in range(len(write.en)):
            m.d.comb += write.data[index].eq(port.payload)
        with m.If(self._start):
            m.d.sync += busy.eq(1)
        with m.If(port.valid & port.ready & last):
            m.d.sync += busy.eq(0)
        self._fills_done.append(~busy)

    def _output_stationary(self, b_memory, d_memory, launch):
        """A's buffer and the readers of the output-stationary array; returns the result-row tracker."""
        m, array = self._m, self._array
        rows, slots, max_k, k_stride = self._rows, self._slots, self._max_k, self._k_stride
        tile_m, tiles_m_max = rows * slots, self._tiles_m
        size_m, size_k = self._size_m, self._size_k
        m.submodules.a_buffer = a_memory = Memory(
            shape=data.ArrayLayout(self.operand_shape, rows), depth=tiles_m_max * slots * k_stride, init=[])
        # A: k innermost, then the row m as (u, r, m-tile).
        a_step = self.a.valid & self.a.ready
        (a_k, a_u, a_r, a_tile), _ = counters(
            m, "a_fill", a_step, [(size_k, max_k), (slots, slots), (rows, rows), (tiles_m_max, tiles_m_max)],
            self._start)
        a_last = (a_k == size_k - 1) & (a_tile * tile_m + a_r * slots + a_u == size_m - 1)
        self._fill(self.a, a_memory, "a_fill", (a_tile * slots + a_u) * k_stride + a_k, a_r, a_last)
        tiles_m = Signal(range(tiles_m_max + 1))
        with m.If(a_step):  # the m-tile count is where A's last element lands
            m.d.sync += tiles_m.eq(a_tile + 1)
        if self._block_fp:
            blocks, padded_k = self._whole_blocks()
            k_walk = (padded_k, k_stride)
            m.d.comb += array.cmd.payload.blocks.eq(blocks)
        else:
            k_walk = (size_k, max_k)
            m.d.comb += array.cmd.payload.k.eq(size_k)
        m.d.comb += array.cmd.payload.tiles.eq(tiles_m * self._tiles_n_now)

        tiles = [(self._tiles_n_now, self._tiles_n), (tiles_m, tiles_m_max)]

        def a_address(step):
            (u, k, _, tile), done = counters(m, "a_read", step, [(slots, slots), k_walk] + tiles)
            k, pad = self._k_read(k)
            return (tile * slots + u) * k_stride + k, done, *pad

        def b_address(step):
            (k, tile, _), done = counters(m, "b_read", step, [k_walk] + tiles)
            k, pad = self._k_read(k)
            return tile * k_stride + k, done, *pad

        def d_address(step):
            (i, tile_n, tile), done = counters(m, "d_read", step, [(tile_m, tile_m)] + tiles)
            return (tile * tile_m + i) * self._tiles_n + tile_n, done

        self._readers(launch, a=(a_memory, a_address), b=(b_memory, b_address), d=(d_memory, d_address))
        transfer = array.c.valid & array.c.ready
        (row, tile_n, tile_m_index), finished = counters(m, "c_out", transfer, [(tile_m, tile_m)] + tiles)
        last = (tile_n == self._tiles_n_now - 1) & (tile_m_index == tiles_m - 1)
        return tile_m_index * tile_m + row, tile_n, last, finished

    def _whole_blocks(self):
        """Output stationary block floating point: ``(ceil(K / block), ceil(K / block) block)``.

        Counted in the K cycles after the command, while A fills (M K transfers at least), so the
        count is ready before the compute phase and never delays it.
        """
        m, block = self._m, self._block
        blocks = Signal(range(_ceil_div(self._max_k, block) + 1), name="k_blocks")
        padded = Signal(range(self._k_stride + 1), name="k_padded")
        k = Signal(range(max(self._max_k, 2)), name="k_count")
        in_block = Signal(range(max(block, 2)), name="k_in_block")
        counting = Signal(name="k_counting")
        with m.If(self._start):
            m.d.sync += [blocks.eq(0), padded.eq(0), k.eq(0), in_block.eq(0), counting.eq(1)]
        with m.Elif(counting):
            m.d.sync += [k.eq(k + 1), in_block.eq(Mux(in_block == block - 1, 0, in_block + 1))]
            with m.If(in_block == 0):
                m.d.sync += [blocks.eq(blocks + 1), padded.eq(padded + block)]
            with m.If(k == self._size_k - 1):
                m.d.sync += counting.eq(0)
        self._fills_done.append(~counting)
        return blocks, padded

    def _k_read(self, k):
        """The k a reader reads for step ``k`` and its pad flag (block floating point only).

        A k past K (output stationary block floating point pads K to whole blocks) reads the
        last k < K, in the same block, and is padded: mantissa 0, the block's exponent.
        """
        if not self._block_fp:
            return k, ()
        past = k >= self._size_k
        return Mux(past, self._size_k - 1, k), (past,)

    def _weight_stationary(self, b_memory, d_memory, launch):
        """A's buffer and the readers of the weight-stationary array; returns the result-row tracker."""
        m, array = self._m, self._array
        rows, max_m, tiles_k_max = self._rows, self._max_m, self._tiles_k
        size_m, size_k = self._size_m, self._size_k
        m.submodules.a_buffer = a_memory = Memory(
            shape=data.ArrayLayout(self.operand_shape, rows), depth=max_m * tiles_k_max, init=[])
        a_step = self.a.valid & self.a.ready
        a_lane, a_tile, a_m, a_last = row_major(m, "a_fill", a_step, self._start, size_k, size_m, rows,
                                                tiles_k_max)
        self._fill(self.a, a_memory, "a_fill", a_m * tiles_k_max + a_tile, a_lane, a_last)
        tiles_k = Signal(range(tiles_k_max + 1))
        with m.If(a_step & (a_m == 0)):  # the k-tile count is where A's first row ends
            m.d.sync += tiles_k.eq(a_tile + 1)
        m.d.comb += [array.cmd.payload.m.eq(size_m), array.cmd.payload.k.eq(size_k),
                     array.cmd.payload.n_tiles.eq(self._tiles_n_now)]
        n_tiles = (self._tiles_n_now, self._tiles_n)

        def w_address(step):
            # Each k-tile's weight rows go in last row first.
            (j, k_tile, n_tile), done = counters(m, "w_read", step,
                                                 [(rows, rows), (tiles_k, tiles_k_max), n_tiles])
            return n_tile * self._k_stride + k_tile * rows + (rows - 1) - j, done

        def a_address(step):
            (row, k_tile, _), done = counters(m, "a_read", step,
                                              [(size_m, max_m), (tiles_k, tiles_k_max), n_tiles])
            return row * tiles_k_max + k_tile, done

        def d_address(step):
            (row, n_tile), done = counters(m, "d_read", step, [(size_m, max_m), n_tiles])
            return row * self._tiles_n + n_tile, done

        self._readers(launch, w=(b_memory, w_address), a=(a_memory, a_address), d=(d_memory, d_address))
        transfer = array.c.valid & array.c.ready
        (row, n_tile), finished = counters(m, "c_out", transfer, [(size_m, max_m), n_tiles])
        return row, n_tile, n_tile == self._tiles_n_now - 1, finished

    def _readers(self, launch, **streams):
        """Connect a prefetching reader per array input stream: ``name=(memory, address)``."""
        for name, (memory, address) in streams.items():
            if memory is not None:
                wiring.connect(self._m, reader(self._m, f"{name}_read", memory, address, launch),
                               getattr(self._array, name))


register_array(
    "tiled_gemm", TiledGemm,
    summary="Any M x K x N GEMM from on-chip buffers on an OS or WS systolic array, dense or block "
            "floating point (cycle-exact).",
    golden="golden.systolic.numerics:gemm",
)
