"""The weight-stationary block floating point systolic array behind streams."""

from ..registration import Param
from .block_fp_array import block_format_params
from .block_fp_ws_core import BlockFloatWeightStationaryCore, check_block_parameters
from .os_array import register_array
from .os_core import MAX_DIMENSION
from .ws_array import WeightStationaryArray

__all__ = ["BlockFloatWeightStationaryArray"]


class BlockFloatWeightStationaryArray(WeightStationaryArray):
    """``C = A B (+ D)`` with A and B in block floating point along K, weight stationary.

    Bit for bit :func:`golden.systolic.block_fp_gemm`: each output is ``d`` (or +0.0) plus, in
    increasing block order, one f32 RNE addition of each block's exact integer mantissa dot
    product rounded once to binary32 at ``2^(scale_a + scale_b)``. The PE grid is
    :class:`~.block_fp_ws_core.BlockFloatWeightStationaryCore` (integer MACs down the columns,
    a converter and an f32 adder below every ``block`` PE rows); the command, the streams, the
    tile clock, the weight prefetch and the stall scheme are
    :class:`~.ws_array.WeightStationaryArray`'s. A command ``{m, k, n_tiles}`` runs the weight
    tiles n-tile outer, k-tile inner; per tile the caller streams

    * on ``w``, ``rows`` weight rows, last row first: ``[{mantissa, exponent} of B[k0 + rows - 1 - j,
      n0 + c] for c]``, the exponent being the shared exponent of k's block of column ``n0 + c``
      (rows past K are ignored);
    * on ``a``, the M rows ``[{mantissa, exponent} of A[m, k0 + r] for r]`` (lanes past K are
      ignored);
    * on ``d`` (with ``accumulate``, first k-tile of each n-tile only): ``[D[m, n0 + c] for c]``, binary32;

    and receives the M result rows (binary32) on ``c`` once per n-tile. A short last block is
    padded with zero mantissas and a block wholly past K is not added, as in the golden model.
    Without stalls the cycles from the first ``w`` transfer to the last ``c`` transfer are
    ``block_fp_gemm_cycles(..., dataflow="weight_stationary")``; ``cycles`` reports the count.

    Parameters
    ----------
    rows : int
        PE rows (1 to 256), a multiple of ``block``.
    cols : int
        PE columns (1 to 256).
    block : int
        Elements per shared exponent along K (1 to 64).
    mantissa_bits : int
        Signed mantissa width, sign included (2 to 24).
    accumulate : bool
        Add an initial accumulator D.
    max_m, max_k, max_tiles : int
        Largest M, K and n-tile count of a command.

    Attributes
    ----------
    cmd, w, a, d, c, busy, cycles
        As :class:`~.ws_array.WeightStationaryArray`'s, with operands ``{mantissa: signed(mantissa_bits),
        exponent: signed(9)}`` and binary32 ``d`` and ``c``.
    mac_latency, tail_latency : int
        Cycles per PE row (``max(2, ceil(6 / block))``) and from the last PE row to the result (10).

    Notes
    -----
    Throughput: one row of A per cycle (``rows cols`` mantissa MACs) while a tile streams.
    Latency: the first result row leaves ``cols - 1 + rows L + 10`` cycles after the first row of
    A reaches PE(0, 0).
    """

    PARAMS = (
        Param("rows", int, 2, "PE rows (a multiple of block)", minimum=1, maximum=MAX_DIMENSION),
        Param("cols", int, 2, "PE columns", minimum=1, maximum=MAX_DIMENSION),
        *block_format_params(block=2),
        Param("accumulate", bool, False, "add an initial accumulator D"),
        Param("max_m", int, 64, "largest M (partial-sum buffer depth)", minimum=1, maximum=1 << 20),
        Param("max_k", int, 64, "largest K", minimum=1, maximum=1 << 24),
        Param("max_tiles", int, 64, "largest n-tile count per command", minimum=1, maximum=1 << 24),
    )

    def __init__(self, *, rows=2, cols=2, block=2, mantissa_bits=8, accumulate=False, max_m=64, max_k=64,
                 max_tiles=64):
        # Every parameter is checked before any sub-component exists (a half-built one would warn).
        check_block_parameters(rows=rows, block=block, mantissa_bits=mantissa_bits)
        core = BlockFloatWeightStationaryCore(rows=rows, cols=cols, block=block, mantissa_bits=mantissa_bits,
                                              accumulate=accumulate, max_m=max_m)
        core._MustUse__silence = True  # elaborated by this component only
        self.tail_latency = core.tail_latency
        super().__init__(rows=rows, cols=cols, accumulate=accumulate, max_m=max_m, max_k=max_k,
                         max_tiles=max_tiles, core=core)


register_array(
    "block_fp_ws_array", BlockFloatWeightStationaryArray,
    summary="Weight-stationary block floating point (Block16) systolic array: integer column sums, "
            "an f32 adder per block of rows.",
    golden="golden.systolic.block_fp:block_fp_gemm",
)
