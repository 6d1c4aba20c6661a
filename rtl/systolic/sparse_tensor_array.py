"""The sparse systolic tensor array: A as padded CSR slots, each lane row gathering its own B rows."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..registration import Param, Parameterized
from .os_array import ARRAY_PARAMS, CYCLE_COUNTER_BITS, OutputStationaryArray, bad_size, register_array
from .os_core import OutputStationaryCore
from .tensor_array import TENSOR_PARAM

__all__ = ["SparseTensorArray", "GatherCore", "slot_layout"]


def slot_layout(operand, max_k):
    """One padded-CSR slot of one A row: the value, its column index, and 0 for a padding slot."""
    return data.StructLayout({"value": operand, "index": range(max_k), "valid": 1})


class GatherCore(wiring.Component):
    """An :class:`~.os_core.OutputStationaryCore` with ``gather`` whose A operands are padded-CSR slots.

    Has the ``beat`` / ``fill`` / ``result`` contract :class:`~.os_array.OutputStationaryArray`
    drives, with :func:`slot_layout` as the operand: lane row ρ's slot names the B row it needs
    (``lookup[ρ]``, combinational), the caller returns that row on ``rows[ρ]`` in the same cycle,
    and the core multiplies the slot's value by it. ``beat.b`` is unused. A padding slot
    (``valid = 0``) is turned into the product ``(-0.0) x (+0.0) = -0.0`` (int8: ``0 x 0``), and
    ``x + (-0.0) = x`` for every x including -0.0, so the slot leaves the accumulator as it is:
    the "skip" of :func:`golden.systolic.sparse.sparse_gemm`, with no bypass path in the PEs.
    """

    def __init__(self, *, rows, cols, tensor, element, slots, accumulate, max_k):
        self._inner = OutputStationaryCore(rows=rows, cols=cols, element=element, slots=slots,
                                           accumulate=accumulate, tensor=tensor, gather=True)
        inner = self._inner
        self._lane_rows, self._lane_cols = rows * tensor, cols * tensor
        self._element, self._accumulate = element, accumulate
        self.value_shape = inner.operand_shape
        self.operand_shape = slot_layout(inner.operand_shape, max_k)
        self.accumulator_shape = inner.accumulator_shape
        self.mac_latency, self.acc_latency = inner.mac_latency, inner.acc_latency
        self.beat_len, self.fill_lead = inner.beat_len, inner.fill_lead
        row = data.ArrayLayout(inner.operand_shape, self._lane_cols)
        lanes_c = data.ArrayLayout(self.accumulator_shape, self._lane_cols)
        ports = {
            "beat": In(data.StructLayout({"valid": 1, "first": 1, "last": 1,
                                          "a": data.ArrayLayout(self.operand_shape, self._lane_rows),
                                          "b": data.ArrayLayout(self.operand_shape, self._lane_cols)})),
            "result": Out(data.StructLayout({"valid": 1, "data": lanes_c})),
            "lookup": Out(data.ArrayLayout(range(max_k), self._lane_rows)),
            "rows": In(data.ArrayLayout(row, self._lane_rows)),
        }
        if accumulate:
            ports["fill"] = In(data.StructLayout({"first": 1, "data": lanes_c}))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = inner = self._inner
        width = self.value_shape.width
        negative_zero = 0 if self._element == "int8" else 1 << (width - 1)
        m.d.comb += [inner.beat.valid.eq(self.beat.valid), inner.beat.first.eq(self.beat.first),
                     inner.beat.last.eq(self.beat.last)]
        for lane in range(self._lane_rows):
            slot = self.beat.a[lane]
            m.d.comb += [
                self.lookup[lane].eq(slot.index),
                inner.beat.a[lane].eq(Mux(slot.valid, slot.value, negative_zero)),
                inner.beat.b[lane].eq(Mux(slot.valid, self.rows[lane], 0)),
            ]
        if self._accumulate:
            m.d.comb += inner.fill.eq(self.fill)
        m.d.comb += self.result.eq(inner.result)
        return m


class SparseTensorArray(Parameterized, wiring.Component):
    """``C = A B (+ D)`` with A in padded CSR, on ``rows x cols`` tensor PEs that gather B rows.

    The sparse PE path of H-GCN (dissertation Section 3.3): A arrives as padded-CSR slots (a value,
    its column index, a padding bit), a fixed number W of slots per row for every row of a job, and
    each lane row gathers the B row its slot names from an on-chip B buffer, so each lane multiplies
    only stored non-zeros (and padding, which it skips). A dense tile row runs on the same PEs with
    W = K slots ``(A[m, k], k, 1)``, which is exactly :func:`golden.systolic.gemm`; the host picks
    dense or sparse per tile row with :func:`golden.systolic.plan_tile_rows` (density threshold).

    Commands on ``cmd``, accepted only while idle:

    * ``load = 1``: the next ``k`` transfers on ``b`` are B rows 0 .. k - 1 of one column tile,
      ``[B[kk, n0 + c] for c in cols t]``, written into the B buffer (depth ``max_k``).
    * ``load = 0``: a job of ``tiles`` output tiles of ``rows t T x cols t`` with ``k`` = W slots per
      row, on the schedule of :class:`~.tensor_array.TensorArray` (W in place of K). For each tile,
      for s = 0 .. W - 1 and u = 0 .. T - 1, ``a`` carries slot s of rows ``m0 + ρ T + u`` for
      ρ in ``rows t``; slots of one row in increasing column order, padding (``valid = 0``) last;
      ``d`` and ``c`` as for :class:`~.os_array.OutputStationaryArray`.

    Each output sums its row's valid slots in slot order, first adding D (or +0), and a padding slot
    leaves the sum unchanged, which is :func:`golden.systolic.sparse_gemm` bit for bit. A valid slot
    whose index is at or past the K of the last load reads a stale buffer row: it sets ``error``.

    Parameters
    ----------
    rows, cols : int
        PE grid (1 to 256); lanes ``rows t x cols t``.
    tensor : int
        t, lanes per PE side (1 to 16).
    element : {"f32", "f16", "bf16", "int8"}
    slots : int
        T, accumulator slots per lane (1 to 64).
    accumulate : bool
        Take an initial accumulator D on ``d``.
    max_k : int
        B buffer depth: largest K, and largest W per job (1 to 65536).
    max_tiles : int
        Largest tile count per job.

    Attributes
    ----------
    cmd : In(stream.Signature(StructLayout(load, k, tiles)))
    a : In(stream.Signature(ArrayLayout(slot_layout(operand, max_k), rows t)))
    b : In(stream.Signature(ArrayLayout(operand, cols t)))
        B rows during a load command.
    d : In(stream.Signature(ArrayLayout(accumulator, cols t)))
        Only with ``accumulate``.
    c : Out(stream.Signature(ArrayLayout(accumulator, cols t)))
    busy : Out(1)
    error : Out(1)
        Sticky from a job's first bad slot to the next command: a valid slot's column index was at
        or past the K of the last load (that product used a stale B buffer row).
    cmd_error : Out(1)
        The last command was rejected and did nothing: ``k`` 0 or past ``max_k``, or (a job)
        ``tiles`` 0 or past ``max_tiles``; cleared by the next command accepted.
    cycles : Out(48)
        Cycles of the last job, as :class:`~.os_array.OutputStationaryArray` counts them.

    Notes
    -----
    A job of ``tiles`` tiles with W slots per row takes exactly ``gemm_cycles(tiles rows t T, W,
    cols t, rows=rows, cols=cols, tensor=t, tile=T, mac_latency=L, acc_latency=A)`` cycles without
    stalls (the schedule is the tensor array's), so a sparse tile row costs W instead of K steps.
    A load takes one cycle per B row and is not overlapped with jobs. ``rows t`` combinational read
    ports on the B buffer (LUT RAM).
    """

    PARAMS = tuple(ARRAY_PARAMS[:2] + [TENSOR_PARAM] + ARRAY_PARAMS[2:] + [
        Param("max_k", int, 256, "B buffer depth: largest K and slots per row", minimum=1, maximum=1 << 16),
        Param("max_tiles", int, 4096, "largest tile count per job", minimum=1, maximum=1 << 24),
    ])

    def __init__(self, *, rows=2, cols=2, tensor=2, element="f16", slots=1, accumulate=False, max_k=256,
                 max_tiles=4096):
        self._max_tiles = max_tiles
        core = GatherCore(rows=rows, cols=cols, tensor=tensor, element=element, slots=slots,
                          accumulate=accumulate, max_k=max_k)
        self._array = OutputStationaryArray(rows=rows, cols=cols, element=element, slots=slots,
                                            accumulate=accumulate, max_k=max_k, max_tiles=max_tiles,
                                            tensor=tensor, core=core)
        self._core, self._accumulate = core, accumulate
        self._lane_rows, self._lane_cols = rows * tensor, cols * tensor
        self.mac_latency, self.acc_latency, self.beat_len = core.mac_latency, core.acc_latency, core.beat_len
        ports = {
            "cmd": In(stream.Signature(data.StructLayout({"load": 1, "k": range(max_k + 1),
                                                          "tiles": range(max_tiles + 1)}))),
            "a": In(stream.Signature(data.ArrayLayout(core.operand_shape, self._lane_rows))),
            "b": In(stream.Signature(data.ArrayLayout(core.value_shape, self._lane_cols))),
            "c": Out(stream.Signature(data.ArrayLayout(core.accumulator_shape, self._lane_cols))),
            "busy": Out(1),
            "error": Out(1),
            "cmd_error": Out(1),
            "cycles": Out(CYCLE_COUNTER_BITS),
        }
        if accumulate:
            ports["d"] = In(stream.Signature(data.ArrayLayout(core.accumulator_shape, self._lane_cols)))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.array = array = self._array
        core = self._core

        # The B buffer: one column tile of B, a read port per lane row for the gather.
        m.submodules.b_buffer = buffer = Memory(shape=data.ArrayLayout(core.value_shape, self._lane_cols),
                                                depth=self._max_k, init=[])
        write = buffer.write_port()
        for lane in range(self._lane_rows):
            read = buffer.read_port(domain="comb")
            m.d.comb += [read.addr.eq(core.lookup[lane]), core.rows[lane].eq(read.data)]

        loading = Signal()
        load_left = Signal(range(self._max_k + 1))
        load_at = Signal(range(self._max_k))
        idle = ~loading & ~array.busy
        is_load = self.cmd.payload.load
        m.d.comb += [
            self.busy.eq(loading | array.busy), self.cycles.eq(array.cycles),
            array.cmd.valid.eq(self.cmd.valid & ~is_load & ~loading),
            array.cmd.payload.k.eq(self.cmd.payload.k), array.cmd.payload.tiles.eq(self.cmd.payload.tiles),
            self.cmd.ready.eq(idle),
            # B arrives on its own stream; the array's own B port is not used by the gather core.
            array.b.valid.eq(1),
            write.addr.eq(load_at), write.data.eq(self.b.payload), write.en.eq(self.b.valid & self.b.ready),
            self.b.ready.eq(loading),
        ]
        # A size of 0 or past the buffer / counters is consumed without running (the array rejects
        # such a job itself; a load is checked here).
        command = self.cmd.payload
        bad_k = bad_size(command.k, self._max_k)
        bad_tiles = bad_size(command.tiles, self._max_tiles)
        loaded = Signal(range(self._max_k + 1))  # K of the last load: valid indices are below it
        with m.If(self.cmd.valid & idle & is_load & ~bad_k):
            m.d.sync += [load_left.eq(command.k), load_at.eq(0), loading.eq(1), loaded.eq(command.k)]
        out_of_range = Signal()
        m.d.comb += out_of_range.eq(self.a.valid & self.a.ready & Cat(
            slot.valid & (slot.index >= loaded) for slot in self.a.payload).any())
        with m.If(self.cmd.valid & idle):
            m.d.sync += [self.error.eq(0), self.cmd_error.eq(bad_k | (~is_load & bad_tiles))]
        with m.Elif(out_of_range):
            m.d.sync += self.error.eq(1)
        with m.If(self.b.valid & self.b.ready):
            m.d.sync += [load_at.eq(load_at + 1), load_left.eq(load_left - 1)]
            with m.If(load_left == 1):
                m.d.sync += loading.eq(0)

        wiring.connect(m, wiring.flipped(self.a), array.a)
        wiring.connect(m, array.c, wiring.flipped(self.c))
        if self._accumulate:
            wiring.connect(m, wiring.flipped(self.d), array.d)
        return m


register_array(
    "sparse_tensor_array", SparseTensorArray,
    summary="Sparse systolic tensor array: padded-CSR A, gathered B rows, skip padding (f32/f16/bf16/int8).",
    golden="golden.systolic.sparse:sparse_gemm",
)
