"""The output-stationary systolic array behind streams: a job of equal-K tiles per command."""

from amaranth.hdl import EnableInserter, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import Param, Parameterized, register_block
from .arithmetic import ELEMENTS
from .os_core import MAX_DIMENSION, OutputStationaryCore, delayed
from .os_pe import MAX_SLOTS

__all__ = ["OutputStationaryArray", "bad_size", "offer_results", "end_job", "register_array", "ARRAY_PARAMS"]

CYCLE_COUNTER_BITS = 48


def bad_size(size, limit):
    """``size`` of a command field ``range(limit + 1)`` is 0 or past ``limit``.

    When ``limit + 1`` is a power of two the field cannot exceed it, and the comparison is left
    out (a constant comparison is a Verilator lint warning).
    """
    if (limit + 1).bit_length() > limit.bit_length():
        return size == 0
    return (size == 0) | (size > limit)


def offer_results(m, array, result, *, en, running, inputs_ready, readies):
    """Offer the core's ``result`` on ``array.c``, and step the core (``en``) while the job runs,
    its inputs are ready and no result waits untaken; ``readies`` drive the inputs' ``ready``."""
    # A result taken while the array is stalled must not be offered again.
    taken = Signal()
    offered = result.valid & ~taken
    m.d.comb += [en.eq(running & inputs_ready & (~offered | array.c.ready)), *readies,
                 array.c.valid.eq(offered), array.c.payload.eq(result.data)]
    m.d.sync += taken.eq(Mux(en, 0, taken | (array.c.valid & array.c.ready)))


def end_job(m, array, *, start, first, first_name, count_first, running, left):
    """The job end and the ``cycles`` counter of ``array``, a systolic array behind streams.

    ``start`` accepts a job, which clears ``cycles``; ``first`` marks the job's first input beat
    (armed by a register named ``first_name``), from which ``cycles`` counts every cycle, that
    beat's own cycle included if ``count_first``. Each ``c`` transfer takes one off ``left``; the
    last ends the job (``running`` and the count drop).
    """
    counting = Signal()
    armed = Signal(name=first_name)
    with m.If(start):
        m.d.sync += [armed.eq(1), array.cycles.eq(0)]
    begins = first & armed
    with m.If((counting | begins) if count_first else counting):
        m.d.sync += array.cycles.eq(array.cycles + 1)
    with m.If(begins):
        m.d.sync += [counting.eq(1), armed.eq(0)]
    with m.If(array.c.valid & array.c.ready):
        m.d.sync += left.eq(left - 1)
        with m.If(left == 1):
            m.d.sync += [running.eq(0), counting.eq(0)]


def register_array(name, component, *, summary, golden):
    """Register a systolic array whose one drop port is ``cmd_error``, as every array here has.

    Each array rejects a command the same way (:func:`bad_size` on its sizes), so they share the
    family and the description of what ``cmd_error`` flags; see :func:`~..registration.register_block`.
    """
    return register_block(name, component, family="systolic", summary=summary, golden=golden, drops={
        "cmd_error": ("a rejected command (a size of 0 or past its maximum), consumed without running; not"
                      " sticky: the next accepted command clears it"),
    })


ARRAY_PARAMS = [
    Param("rows", int, 2, "PE rows", minimum=1, maximum=MAX_DIMENSION),
    Param("cols", int, 2, "PE columns", minimum=1, maximum=MAX_DIMENSION),
    Param("element", str, "f16", "operand type", choices=ELEMENTS),
    Param("slots", int, 1, "accumulator slots per PE (T)", minimum=1, maximum=MAX_SLOTS),
    Param("accumulate", bool, False, "add an initial accumulator D"),
]


class OutputStationaryArray(Parameterized, wiring.Component):
    """``C = A B (+ D)`` on an output-stationary systolic array fed by streams.

    A command ``{k, tiles}`` starts a job of ``tiles`` output tiles, each ``rows T x cols`` and
    each reducing over the same ``k``. Tiles run back to back on the wavefront schedule of
    :func:`golden.systolic.gemm_cycles`: tile n + 1 starts ``period = max(K beat_len,
    beat_len + (rows - 1) T)`` cycles after tile n. The caller streams, for each tile in turn:

    * on ``a``, for k = 0 .. K - 1 and u = 0 .. T - 1: ``[A[m0 + r T + u, k] for r in rows]``
      (K T transfers);
    * on ``b``, for k = 0 .. K - 1: ``[B[k, n0 + c] for c in cols]`` (K transfers);
    * on ``d`` (with ``accumulate``): the tile's ``rows T`` rows of D, ``[D[m0 + i, n0 + c] for c]``;

    and receives on ``c`` the tile's ``rows T`` result rows ``[C[m0 + i, n0 + c] for c]``. Rows
    and columns past the matrix edge are the caller's padding (zeros give zeros).

    The array is lockstep: when an operand a beat needs is not there, or a result is not taken,
    every register stops (one global enable). Without such stalls, the cycle after a job's first
    ``a`` transfer is cycle 0 of the cycle model and its last ``c`` transfer happens in cycle
    ``gemm_cycles(...) - 1``; ``cycles`` reports this count (wall-clock, stalls included). With
    ``accumulate`` the first tile's D enters ``fill_lead`` cycles before cycle 0 when
    ``fill_lead > 0``, which the model leaves out ("d reaches the PEs at no cost").

    Parameters
    ----------
    rows, cols : int
        PE grid (1 to 256).
    element : {"f32", "f16", "bf16", "int8"}
        Operand type. Floats accumulate in binary32 (RNE), int8 in int32 (wrapping).
    slots : int
        T, accumulator slots per PE (1 to 64). ``T >= acc_latency`` (6 for the floats, 1 for int8)
        keeps every PE busy on every cycle.
    accumulate : bool
        Take an initial accumulator D on ``d``.
    max_k, max_tiles : int
        Largest K and tile count a command may ask for (sizes the counters).
    core : wiring.Component, optional
        Run this core instead of an :class:`~.os_core.OutputStationaryCore` of ``element`` (the block
        floating point array does): same ``beat`` / ``result`` (and ``fill``) contract and attributes
        (``operand_shape``, ``accumulator_shape``, ``mac_latency``, ``acc_latency``, ``beat_len``,
        ``fill_lead``), built for the same ``rows``, ``cols``, ``slots`` and ``accumulate``, tensor 1.
        Not a registry parameter.
    tensor : int
        t (1 to 16): every PE a :class:`~.tensor_pe.TensorPE` of t x t MAC lanes. The streams are
        then those of a ``rows t x cols t`` one-MAC array (``rows`` and ``cols`` above read as
        ``rows t`` and ``cols t``, tiles ``rows t T x cols t``, ``period = max(K beat_len,
        beat_len + (rows t - 1) T)``) and the count is ``gemm_cycles(..., tensor=t)``.

    Attributes
    ----------
    cmd : In(stream.Signature(StructLayout(k, tiles)))
        Accepted only while no job runs. A command with ``k`` or ``tiles`` 0 or above ``max_k`` /
        ``max_tiles`` is consumed without running and raises ``cmd_error``.
    a : In(stream.Signature(ArrayLayout(operand, rows)))
    b : In(stream.Signature(ArrayLayout(operand, cols)))
    d : In(stream.Signature(ArrayLayout(accumulator, cols)))
        Only with ``accumulate``.
    c : Out(stream.Signature(ArrayLayout(accumulator, cols)))
    busy : Out(1)
        A job is running.
    cycles : Out(48)
        Cycles of the last job from cycle 0 of the cycle model to its last result.
    cmd_error : Out(1)
        The last command was rejected (a size of 0 or past its maximum); cleared by the next
        command accepted.

    Notes
    -----
    Latency: the first result row of a job leaves ``K beat_len + mac_latency + rows + cols - 2``
    cycles after its first ``a`` transfer. Throughput: one beat per cycle, i.e. ``rows cols``
    MACs per cycle whenever ``T >= acc_latency``.
    """

    PARAMS = tuple(ARRAY_PARAMS + [
        Param("max_k", int, 4096, "largest reduction length K", minimum=1, maximum=1 << 24),
        Param("max_tiles", int, 4096, "largest tile count per command", minimum=1, maximum=1 << 24),
    ])

    def __init__(self, *, rows=2, cols=2, element="f16", slots=1, accumulate=False, max_k=4096,
                 max_tiles=4096, tensor=1, core=None):
        self._core = core if core is not None else OutputStationaryCore(
            rows=rows, cols=cols, element=element, slots=slots, accumulate=accumulate, tensor=tensor)
        # Lane rows and columns: the streams see a rows t x cols t array of one-MAC PEs.
        self._rows, self._cols = rows * tensor, cols * tensor
        self._slots, self._accumulate = slots, accumulate
        self._tensor = tensor
        self._max_tiles = max_tiles
        core = self._core
        self.mac_latency, self.acc_latency, self.beat_len = core.mac_latency, core.acc_latency, core.beat_len
        self.fill_lead = core.fill_lead
        ports = {
            "cmd": In(stream.Signature(data.StructLayout({"k": range(max_k + 1),
                                                          "tiles": range(max_tiles + 1)}))),
            "a": In(stream.Signature(data.ArrayLayout(core.operand_shape, self._rows))),
            "b": In(stream.Signature(data.ArrayLayout(core.operand_shape, self._cols))),
            "c": Out(stream.Signature(data.ArrayLayout(core.accumulator_shape, self._cols))),
            "busy": Out(1),
            "cycles": Out(CYCLE_COUNTER_BITS),
            "cmd_error": Out(1),
        }
        if accumulate:
            ports["d"] = In(stream.Signature(data.ArrayLayout(core.accumulator_shape, self._cols)))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        rows, slots, bl = self._rows, self._slots, self.beat_len
        en = Signal()  # the global enable: everything below, and the core, advances on it
        m.submodules.core = core = EnableInserter(en)(self._core)

        k = Signal(range(self._max_k + 1))
        tiles_left = Signal(range(self._max_tiles + 1))
        rows_left = Signal(range(self._max_tiles * rows * slots + 1))
        running = Signal()
        period_min = bl + (rows - 1) * slots
        # The tile period, computed as the command is taken (it is first used at the first tile
        # pulse, a cycle later): K beat_len > period_min compares K with a constant, beside the
        # product, so no compare follows the multiplication.
        period = Signal(range(max(self._max_k * bl, period_min) + 1))
        countdown = Signal.like(period)
        m.d.comb += [self.busy.eq(running), self.cmd.ready.eq(~running)]
        # A command outside the counters' range would wrap them: it is consumed, not run.
        command = self.cmd.payload
        rejected = bad_size(command.k, self._max_k) | bad_size(command.tiles, self._max_tiles)
        with m.If(self.cmd.valid & ~running):
            m.d.sync += self.cmd_error.eq(rejected)
            with m.If(~rejected):
                m.d.sync += [k.eq(command.k), tiles_left.eq(command.tiles), countdown.eq(0),
                             period.eq(Mux(command.k > period_min // bl, command.k * bl, period_min)),
                             rows_left.eq(command.tiles * (rows * slots)), running.eq(1)]

        # Tile clock: one start pulse every `period` cycles, `tiles` times. The countdown is 0
        # when a command is taken (the first pulse at once), then runs from `period` to 1.
        pulse = Signal()
        m.d.comb += pulse.eq(running & (tiles_left != 0) & (countdown <= 1))
        with m.If(en):
            with m.If(pulse):
                m.d.sync += [tiles_left.eq(tiles_left - 1), countdown.eq(period)]
            with m.Elif(countdown > 1):
                m.d.sync += countdown.eq(countdown - 1)

        # The D of a tile enters fill_lead cycles before its first beat: delay whichever is later.
        lead = self.fill_lead if self._accumulate else 0
        with m.If(en):
            beat_start = delayed(m, pulse, max(lead, 0), "beat_start")
            fill_start = delayed(m, pulse, max(-lead, 0), "fill_start")

        # Beat generator: K beat_len beats per start, beats with u >= T idle.
        beating = Signal()
        step = Signal(range(self._max_k))
        u = Signal(range(bl))
        last_step = step == k - 1
        valid = beating & (u < slots)
        need_b = beating & (u == 0)
        with m.If(en):
            with m.If(beat_start):
                m.d.sync += [beating.eq(1), step.eq(0), u.eq(0)]
            with m.Elif(beating):
                m.d.sync += u.eq(Mux(u == bl - 1, 0, u + 1))
                with m.If(u == bl - 1):
                    m.d.sync += step.eq(step + 1)
                    with m.If(last_step):
                        m.d.sync += beating.eq(0)
        b_held = Signal.like(self.b.payload)
        with m.If(en & need_b):
            m.d.sync += b_held.eq(self.b.payload)
        m.d.comb += [
            core.beat.valid.eq(valid), core.beat.first.eq(step == 0), core.beat.last.eq(last_step),
            core.beat.a.eq(self.a.payload), core.beat.b.eq(Mux(need_b, self.b.payload, b_held)),
        ]

        need_d = Signal()
        if self._accumulate:
            fill_row = Signal(range(rows * slots))
            with m.If(en):
                with m.If(fill_start):
                    m.d.sync += [need_d.eq(1), fill_row.eq(0)]
                with m.Elif(need_d):
                    m.d.sync += fill_row.eq(fill_row + 1)
                    with m.If(fill_row == rows * slots - 1):
                        m.d.sync += need_d.eq(0)
            m.d.comb += [core.fill.first.eq(need_d & (fill_row == 0)), core.fill.data.eq(self.d.payload),
                         self.d.ready.eq(en & need_d)]

        inputs_ready = (~valid | self.a.valid) & (~need_b | self.b.valid)
        if self._accumulate:
            inputs_ready &= ~need_d | self.d.valid
        offer_results(m, self, core.result, en=en, running=running, inputs_ready=inputs_ready,
                      readies=[self.a.ready.eq(en & valid), self.b.ready.eq(en & need_b)])

        # Job end and the cycle counter (from the cycle after the first beat to the last result).
        end_job(m, self, start=self.cmd.valid & ~running & ~rejected, first=en & valid,
                first_name="first_beat", count_first=False, running=running, left=rows_left)
        return m


register_array(
    "os_array", OutputStationaryArray,
    summary="Output-stationary systolic array (f32/f16/bf16/int8) behind streams, cycle-exact to the model.",
    golden="golden.systolic.numerics:gemm",
)
