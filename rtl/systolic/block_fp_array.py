"""The block floating point systolic array (DPT's "Block16") behind streams."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import Param, Parameterized
from .block_fp_core import BlockFloatCore
from .block_fp_encoder import MAX_BLOCK
from .block_fp_pe import MAX_MANTISSA_BITS
from .os_array import CYCLE_COUNTER_BITS, OutputStationaryArray, bad_size, register_array
from .os_core import MAX_DIMENSION
from .os_pe import MAX_SLOTS

__all__ = ["BlockFloatArray", "block_format_params"]


def block_format_params(*, block):
    """The registry parameters of a block floating point format: ``block`` (default given) and
    ``mantissa_bits``."""
    return [Param("block", int, block, "elements per shared exponent along K (k)", minimum=1,
                  maximum=MAX_BLOCK),
            Param("mantissa_bits", int, 8, "signed mantissa width", minimum=2, maximum=MAX_MANTISSA_BITS)]


class BlockFloatArray(Parameterized, wiring.Component):
    """``C = A B (+ D)``, A and B in block floating point along K, as :func:`golden.systolic.block_fp_gemm`.

    Operands arrive encoded (:func:`golden.systolic.to_block_fp` along K, e.g. from
    :class:`~.block_fp_encoder.BlockFloatEncoder`): a shared exponent per ``block`` consecutive k
    and a signed ``mantissa_bits``-bit mantissa per element. Every PE multiplies mantissas and
    sums them exactly over a block (one integer MAC per cycle, a ``mantissa_bits``-square product:
    one DSP); every ``block`` PEs of a row share one converter (block sum times ``2^(scale_a +
    scale_b)``, rounded to binary32) and one f32 adder, which adds the converted block sums of each
    output in increasing block order starting from +0, or from D with ``accumulate``. So each output
    is, bit for bit::

        acc = d (or +0.0)
        for each block t:  acc = f32_add_rne(acc, f32_rne(sum_k mant_a mant_b * 2^(scale_a + scale_b)))

    The schedule is the output-stationary wavefront of :class:`~.os_array.OutputStationaryArray`
    (this block runs that array's sequencer and stall logic on a :class:`~.block_fp_core.BlockFloatCore`)
    with K padded to whole blocks: a command ``{blocks, tiles}`` runs ``tiles`` output tiles
    (``rows T x cols``) of ``blocks block`` k steps each. Per tile the caller streams

    * on ``a``, for k = 0 .. blocks block - 1 and u = 0 .. T - 1: ``[{mantissa, exponent} of
      A[m0 + r T + u, k] for r in rows]``, the exponent being the shared exponent of k's block
      (padding k past K: mantissa 0);
    * on ``b``, for each k: ``[{mantissa, exponent} of B[k, n0 + c] for c in cols]``;
    * on ``d`` (with ``accumulate``): the tile's ``rows T`` rows of D (raw binary32),
      ``[D[m0 + i, n0 + c] for c in cols]``;

    and receives the tile's ``rows T`` result rows (raw binary32) on ``c``. Without stalls the count
    from the cycle after the first ``a`` transfer to the last ``c`` transfer is
    :func:`golden.systolic.block_fp_gemm_cycles` (``gemm_cycles`` with K rounded up to whole
    blocks, ``mac_latency`` and ``acc_latency`` of this block); ``cycles`` reports it. With
    ``accumulate`` the count is the same: a tile's D is taken in the ``rows T`` cycles from
    ``fill_lead`` cycles before its first beat (after it when negative; see
    :class:`~.block_fp_core.BlockFloatCore`), and the first tile's D before cycle 0 is not counted.

    The datapath is sized for any 9-bit exponent and any mantissa, ``-2^(mantissa_bits - 1)``
    included (block sums, scales and the conversion's exponent never wrap), so no input corrupts
    a result silently; results may overflow to infinity or underflow to subnormals or zero, as in
    the golden model. The tests drive :func:`golden.systolic.to_block_fp` encodings.

    Parameters
    ----------
    rows, cols : int
        PE grid (1 to 256).
    block : int
        k, elements per shared exponent (1 to 64).
    mantissa_bits : int
        Signed mantissa width, sign included (2 to 24).
    slots : int
        T, outputs per PE (1 to 64). ``beat_len = max(T, ceil(6 / block))``: with ``block >= 6``
        every PE does one MAC per cycle from T = 1.
    accumulate : bool
        Take an initial accumulator D (binary32) on ``d``: ``C = A B + D``.
    max_blocks, max_tiles : int
        Largest block count and tile count per command.

    Attributes
    ----------
    cmd : In(stream.Signature(StructLayout(blocks, tiles)))
    a : In(stream.Signature(ArrayLayout(StructLayout(mantissa, exponent), rows)))
    b : In(stream.Signature(ArrayLayout(StructLayout(mantissa, exponent), cols)))
    d : In(stream.Signature(ArrayLayout(unsigned(32), cols)))
        Only with ``accumulate``.
    c : Out(stream.Signature(ArrayLayout(unsigned(32), cols)))
    busy : Out(1)
    cycles : Out(48)
    cmd_error : Out(1)
        The last command was rejected without running: ``blocks`` or ``tiles`` 0 or past
        ``max_blocks`` / ``max_tiles``; cleared by the next command accepted.
    mac_latency, acc_latency, beat_len : int
        The cycle model's L, A and beat length (see :class:`~.block_fp_core.BlockFloatCore`).
    fill_lead : int
        Cycles from a tile's first D row to its first beat (0 without ``accumulate``).

    Notes
    -----
    Throughput: one beat per cycle, ``rows cols`` mantissa MACs per cycle when ``T >= ceil(6 /
    block)``. Latency: the first result row leaves ``blocks block beat_len + mac_latency + rows +
    cols - 2`` cycles after the first ``a`` transfer.
    """

    PARAMS = (
        Param("rows", int, 2, "PE rows", minimum=1, maximum=MAX_DIMENSION),
        Param("cols", int, 2, "PE columns", minimum=1, maximum=MAX_DIMENSION),
        *block_format_params(block=8),
        Param("slots", int, 1, "outputs per PE (T)", minimum=1, maximum=MAX_SLOTS),
        Param("accumulate", bool, False, "add an initial accumulator D (binary32)"),
        Param("max_blocks", int, 256, "largest block count per command", minimum=1, maximum=1 << 20),
        Param("max_tiles", int, 4096, "largest tile count per command", minimum=1, maximum=1 << 24),
    )

    def __init__(self, *, rows=2, cols=2, block=8, mantissa_bits=8, slots=1, accumulate=False, max_blocks=256,
                 max_tiles=4096):
        # Every parameter is checked before any sub-component exists (a half-built one would warn).
        core = BlockFloatCore(rows=rows, cols=cols, block=block, mantissa_bits=mantissa_bits, slots=slots,
                              accumulate=accumulate)
        self._array = OutputStationaryArray(rows=rows, cols=cols, slots=slots, accumulate=accumulate,
                                            max_k=max_blocks * block, max_tiles=max_tiles, core=core)
        # Elaborated by this component's elaborate, never on their own: no unused-object warning
        # when this component is only inspected (parameter checks, the cocotb side).
        self._array._MustUse__silence = core._MustUse__silence = True
        self.mac_latency, self.acc_latency, self.beat_len = core.mac_latency, core.acc_latency, core.beat_len
        self.fill_lead = core.fill_lead
        inner = self._array.signature.members
        ports = {
            "cmd": In(stream.Signature(data.StructLayout({"blocks": range(max_blocks + 1),
                                                          "tiles": range(max_tiles + 1)}))),
            "a": inner["a"], "b": inner["b"], "c": inner["c"],
            "busy": Out(1), "cycles": Out(CYCLE_COUNTER_BITS), "cmd_error": Out(1),
        }
        if accumulate:
            ports["d"] = inner["d"]
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.array = array = self._array
        # Tiles are whole blocks, which the core's block counters rely on.
        # A block count past max_blocks could wrap k into range: it is rejected here; the array
        # rejects a bad tile count (and k = 0) itself.
        bad_blocks = bad_size(self.cmd.payload.blocks, self._max_blocks)
        rejected = Signal()
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += rejected.eq(bad_blocks)
        m.d.comb += [array.cmd.valid.eq(self.cmd.valid & ~bad_blocks), self.cmd.ready.eq(array.cmd.ready),
                     array.cmd.payload.k.eq(self.cmd.payload.blocks * self._block),
                     array.cmd.payload.tiles.eq(self.cmd.payload.tiles),
                     self.busy.eq(array.busy), self.cycles.eq(array.cycles),
                     self.cmd_error.eq(rejected | array.cmd_error)]
        for name in ("a", "b") + (("d",) if self._accumulate else ()):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(array, name))
        wiring.connect(m, array.c, wiring.flipped(self.c))
        return m



register_array(
    "block_fp_array", BlockFloatArray,
    summary="Block floating point (Block16) systolic array: integer mantissa MACs, f32 block "
            "accumulation (+ D).",
    golden="golden.systolic.block_fp:block_fp_gemm",
)
