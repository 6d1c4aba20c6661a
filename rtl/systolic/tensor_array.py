"""The systolic tensor array: the output-stationary array with t x t tensor PEs, behind streams."""

from ..registration import Param
from .os_array import ARRAY_PARAMS, OutputStationaryArray, register_array
from .tensor_pe import MAX_TENSOR

__all__ = ["TensorArray", "TENSOR_PARAM"]

TENSOR_PARAM = Param("tensor", int, 2, "lanes per PE side (t)", minimum=1, maximum=MAX_TENSOR)


class TensorArray(OutputStationaryArray):
    """``C = A B (+ D)`` on ``rows x cols`` tensor PEs, each a ``t x t`` output tile (``t^2`` MACs per cycle).

    :class:`~.os_array.OutputStationaryArray` with ``tensor = t`` (see it for the command, the
    streams and the stall scheme): PE(r, c) is a :class:`~.tensor_pe.TensorPE` whose lane (i, j)
    owns outputs ``C[m0 + (r t + i) T + u, n0 + c t + j]``, u < T. Each cycle PE(r, c) takes the t
    A operands of its lane rows from the left and the t B operands of its lane columns from
    above, so a beat carries ``rows t`` A operands and one k step ``cols t`` B operands, and each
    output still reduces over k = 0 .. K - 1 in order, first adding D (or +0), exactly as
    :func:`golden.systolic.gemm`.

    Parameters
    ----------
    rows, cols : int
        PE grid (1 to 256); the lane grid is ``rows t x cols t``.
    tensor : int
        t, lanes per PE side (1 to 16).
    element, slots, accumulate, max_k, max_tiles
        As for :class:`~.os_array.OutputStationaryArray`.

    Attributes
    ----------
    cmd, a, b, d, c, busy, cycles
        As for :class:`~.os_array.OutputStationaryArray` with ``rows t`` A lanes and ``cols t``
        B, D and C lanes.

    Notes
    -----
    Cycles (no stalls): ``gemm_cycles(M, K, N, rows=rows, cols=cols, tensor=t, tile=T,
    mac_latency=L, acc_latency=A)`` with the L and A of the element (Section 1 of
    docs/systolic.md): tiles ``rows t T x cols t``, skew ``rows + cols - 2`` (operands hop one PE,
    not one lane, per cycle), drain ``rows t T``, ``period = max(K beat_len, beat_len + (rows t -
    1) T)``. Throughput ``rows cols t^2`` MACs per cycle when ``T >= A``.
    """

    PARAMS = tuple(ARRAY_PARAMS[:2] + [TENSOR_PARAM] + ARRAY_PARAMS[2:] + [
        Param("max_k", int, 4096, "largest reduction length K", minimum=1, maximum=1 << 24),
        Param("max_tiles", int, 4096, "largest tile count per command", minimum=1, maximum=1 << 24),
    ])

    def __init__(self, *, rows=2, cols=2, tensor=2, element="f16", slots=1, accumulate=False, max_k=4096,
                 max_tiles=4096):
        super().__init__(rows=rows, cols=cols, element=element, slots=slots, accumulate=accumulate,
                         max_k=max_k, max_tiles=max_tiles, tensor=tensor)


register_array(
    "tensor_array", TensorArray,
    summary="Systolic tensor array: output-stationary, each PE a t x t tile of MACs (f32/f16/bf16/int8).",
    golden="golden.systolic.numerics:gemm",
)
