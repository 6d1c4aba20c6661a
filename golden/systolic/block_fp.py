"""Block floating point (BFP): DPT's "Block16" after Drumond et al., "Training DNNs with hybrid
block floating point" (NeurIPS 2018): dot products in fixed point, everything else in float.

Encoding (``to_block_fp``)
--------------------------
``x`` (binary32) is cut along one axis into blocks of ``block`` consecutive elements (the last
block may be shorter). Each block stores one shared exponent and one signed integer mantissa per
element:

* ``shared_exponent = max(max(biased exponent field in the block), 1) - 127``. This is what a
  hardware max over the 8-bit exponent fields gives, with subnormals (field 0) counted at their
  effective exponent -126. An all-zero block gets -126.
* ``scale = shared_exponent - (mantissa_bits - 2)``: every element of the block satisfies
  ``|x| < 2^(shared_exponent + 1) = 2^(scale + mantissa_bits - 1)``.
* ``mantissa = clamp(round_half_even(x / 2^scale), -(2^(mantissa_bits-1) - 1), 2^(mantissa_bits-1) - 1)``:
  a two's complement ``mantissa_bits``-bit integer with a symmetric range. Rounding can carry the
  largest element to ``2^(mantissa_bits-1)``; that value saturates. Elements much smaller than the
  block maximum flush to 0 (the sign of a negative zero is lost).

So ``|x - mantissa * 2^scale| <= 2^(scale-1)`` when not saturated and ``< 2^scale`` when
saturated, and ``2^scale <= 2^(2 - mantissa_bits) * max|x|`` in any block whose maximum is normal.

Decoding (``from_block_fp``) is ``mantissa * 2^scale`` and is exact in binary32 for
``mantissa_bits <= 24`` (at most 24 significant bits, exponent >= -149, magnitude < 2^128).

GEMM (``block_fp_gemm``)
------------------------
``a`` is blocked along its columns and ``b`` along its rows (the reduction dimension K), so block t
of row i of ``a`` meets block t of column j of ``b``. Per output, in increasing block order::

    acc = d (or +0.0)
    for t in blocks:
        p = sum over k in block t of mant_a[i, k] * mant_b[k, j]      exact integer
        acc = f32_add_rne(acc, f32_rne(p * 2^(scale_a[i, t] + scale_b[t, j])))

i.e. an exact integer dot product per block, one RNE conversion of the scaled block sum to f32 and
one f32 RNE addition: two roundings per block.

Cycles (``block_fp_gemm_cycles``)
---------------------------------
The output-stationary block floating point array (``rtl.systolic.block_fp_array``) runs the
schedule of :func:`golden.systolic.gemm_cycles` with K rounded up to whole blocks (a short last
block is padded with zero mantissas, which keeps every output's f32 additions ``block beat_len``
cycles apart) and its own ``mac_latency`` and ``acc_latency``. The weight-stationary one
(``rtl.systolic.block_fp_ws_array``) runs the weight-stationary schedule with a converter and an
adder below every block of PE rows; see the function's docstring for its closed form.
"""

import numpy as np

from .cycles import gemm_cycle_terms, gemm_cycles
from .numerics import ETA_F32, U_F32, U_F64, _gamma, decode_to_f32, f32_bits, f32_from_bits

__all__ = [
    "block_fp_error_bound",
    "block_fp_gemm",
    "block_fp_gemm_cycles",
    "block_scales",
    "from_block_fp",
    "to_block_fp",
]

_BIAS = 127
_MIN_EXPONENT = -126


def _check_format(block, mantissa_bits):
    if not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"block must be an integer >= 1, not {block!r}")
    if not isinstance(mantissa_bits, (int, np.integer)) or not 2 <= mantissa_bits <= 24:
        raise ValueError(f"mantissa_bits must be an integer in [2, 24], not {mantissa_bits!r}")


def _blocked(array, block, axis):
    """Move ``axis`` last and zero-pad it to whole blocks: shape (..., n_blocks, block)."""
    moved = np.moveaxis(array, axis, -1)
    length = moved.shape[-1]
    n_blocks = -(-length // block)
    padded = np.zeros(moved.shape[:-1] + (n_blocks * block,), dtype=moved.dtype)
    padded[..., :length] = moved
    return padded.reshape(moved.shape[:-1] + (n_blocks, block)), length


def to_block_fp(x, *, block, mantissa_bits, axis=-1):
    """Encode binary32 values as block floating point (see the module docstring).

    Parameters
    ----------
    x : numpy.ndarray of float32 (or uint32 raw bits)
        Finite values; inf and NaN have no BFP encoding.
    block : int
        Elements per block along ``axis`` (>= 1).
    mantissa_bits : int
        Width of the signed mantissa, sign included, in [2, 24].
    axis : int
        The blocked (reduction) axis.

    Returns
    -------
    shared_exponents : numpy.ndarray of int32
        Shape of ``x`` with ``axis`` replaced by the number of blocks, ``ceil(len / block)``.
    mantissas : numpy.ndarray of int32
        Same shape as ``x``.
    """
    _check_format(block, mantissa_bits)
    values = f32_from_bits(x)
    if values.ndim == 0:
        raise ValueError("x must have at least one dimension")
    if not np.all(np.isfinite(values)):
        raise ValueError("x must be finite: inf and NaN have no block floating point encoding")
    blocks, length = _blocked(values, block, axis)
    fields = ((blocks.view(np.uint32) >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int32)
    shared = np.maximum(fields.max(axis=-1), 1) - _BIAS
    scale = shared - (mantissa_bits - 2)
    limit = 2 ** (mantissa_bits - 1) - 1
    # x * 2^-scale is exact in float64 (a binary32 value times a power of two in range), so rint
    # (round half to even) rounds the exact quotient once.
    quotient = np.ldexp(blocks.astype(np.float64), -scale[..., None])
    mantissas = np.clip(np.rint(quotient), -limit, limit).astype(np.int32)
    mantissas = mantissas.reshape(mantissas.shape[:-2] + (-1,))[..., :length]
    return np.moveaxis(shared.astype(np.int32), -1, axis), np.moveaxis(mantissas, -1, axis)


def block_scales(shared_exponents, mantissa_bits):
    """Power-of-two weight of a mantissa LSB: ``shared_exponent - (mantissa_bits - 2)``.

    Parameters
    ----------
    shared_exponents : array_like of int
    mantissa_bits : int

    Returns
    -------
    numpy.ndarray of int32
    """
    _check_format(1, mantissa_bits)
    return (np.asarray(shared_exponents, dtype=np.int32) - (mantissa_bits - 2)).astype(np.int32)


def _expand_blocks(per_block, block, length, axis):
    """Repeat a per-block array ``block`` times along ``axis`` and crop it to ``length``."""
    repeated = np.repeat(per_block, block, axis=axis)
    return np.take(repeated, np.arange(length), axis=axis)


def from_block_fp(shared_exponents, mantissas, *, block, mantissa_bits, axis=-1):
    """Decode block floating point to binary32 (exact for ``mantissa_bits <= 24``).

    Parameters
    ----------
    shared_exponents : numpy.ndarray of int
        As returned by :func:`to_block_fp`.
    mantissas : numpy.ndarray of int
    block, mantissa_bits, axis
        The encoding parameters.

    Returns
    -------
    numpy.ndarray of float32
    """
    _check_format(block, mantissa_bits)
    mantissas = np.asarray(mantissas)
    length = mantissas.shape[axis]
    if np.shape(shared_exponents)[axis] != -(-length // block):
        raise ValueError(f"shared_exponents must have ceil({length} / {block}) blocks along axis {axis}, "
                         f"not shape {np.shape(shared_exponents)}")
    scale = _expand_blocks(block_scales(shared_exponents, mantissa_bits), block, length, axis)
    return np.ldexp(mantissas.astype(np.float64), scale).astype(np.float32)


def _check_gemm_operands(a, b, d, block, mantissa_bits):
    _check_format(block, mantissa_bits)
    a = f32_from_bits(a)
    b = f32_from_bits(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"a and b must be (M, K) and (K, N) arrays, not shapes {a.shape} and {b.shape}")
    if d is not None and np.shape(d) != (a.shape[0], b.shape[1]):
        raise ValueError(f"d must have shape (M, N) = {(a.shape[0], b.shape[1])}, not {np.shape(d)}")
    largest_block_sum = block * (2 ** (mantissa_bits - 1) - 1) ** 2
    if largest_block_sum > 2**53:
        # The model keeps block sums exact in float64; the RTL's integer adder tree is wider anyway.
        raise ValueError(f"block must be <= {2**53 // (2 ** (mantissa_bits - 1) - 1) ** 2} for "
                         f"mantissa_bits = {mantissa_bits}, not {block}")
    return a, b


def block_fp_gemm(a, b, d=None, *, block, mantissa_bits):
    """``c = d + a @ b`` with both operands quantised to block floating point along K.

    Parameters
    ----------
    a : numpy.ndarray of float32 (or uint32 bits), shape (M, K)
    b : numpy.ndarray of float32 (or uint32 bits), shape (K, N)
    d : numpy.ndarray of float32 (or uint32 bits), shape (M, N), optional
        Initial accumulator (default +0.0).
    block : int
        Elements per block along K; ``block * (2^(mantissa_bits-1) - 1)^2 <= 2^53``.
    mantissa_bits : int
        In [2, 24].

    Returns
    -------
    numpy.ndarray of uint32
        Raw binary32 bits of the f32 accumulators (canonical NaN).
    """
    a, b = _check_gemm_operands(a, b, d, block, mantissa_bits)
    exp_a, mant_a = to_block_fp(a, block=block, mantissa_bits=mantissa_bits, axis=1)
    exp_b, mant_b = to_block_fp(b, block=block, mantissa_bits=mantissa_bits, axis=0)
    scale_a = block_scales(exp_a, mantissa_bits)
    scale_b = block_scales(exp_b, mantissa_bits)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32) if d is None else decode_to_f32(d, "f32", "d").copy()
    with np.errstate(all="ignore"):  # overflow to inf is a legal f32 result
        for t in range(exp_a.shape[1]):
            columns = slice(t * block, (t + 1) * block)
            block_sum = mant_a[:, columns].astype(np.int64) @ mant_b[columns, :].astype(np.int64)
            scaled = np.ldexp(block_sum.astype(np.float64), scale_a[:, t, None] + scale_b[None, t, :])
            acc = acc + scaled.astype(np.float32)
    return f32_bits(acc)


def block_fp_error_bound(a, b, d=None, *, block, mantissa_bits, include_f64_reference=True):
    """Bound on ``|block_fp_gemm(a, b, d) - (d + a @ b)|`` (exact arithmetic), element-wise.

    With ``delta = 2^scale`` the quantisation step of an element, ``|q - x| <= delta``, so the exact
    product of the quantised operands differs from the exact one by at most
    ``sum_k (delta_a |b| + |a| delta_b + delta_a delta_b)``. The T block sums ``P_t`` are exact; each is
    rounded once to f32 (``<= u |P_t| + eta``) and added by recursive summation, which as in
    :func:`golden.systolic.numerics.gemm_error_bound` gives ``gamma_{T+1} (|d| + sum |P_t|) + 2 T eta``,
    and ``sum |P_t| <= sum_k |q_a| |q_b|``. ``include_f64_reference`` adds the error of a float64
    reference ``a64 @ b64 + d``.

    Parameters
    ----------
    a, b, d, block, mantissa_bits
        As for :func:`block_fp_gemm`.
    include_f64_reference : bool

    Returns
    -------
    numpy.ndarray of float64, shape (M, N)
    """
    a, b = _check_gemm_operands(a, b, d, block, mantissa_bits)
    exp_a, mant_a = to_block_fp(a, block=block, mantissa_bits=mantissa_bits, axis=1)
    exp_b, mant_b = to_block_fp(b, block=block, mantissa_bits=mantissa_bits, axis=0)
    step_a = np.ldexp(1.0, _expand_blocks(block_scales(exp_a, mantissa_bits), block, a.shape[1], 1))
    step_b = np.ldexp(1.0, _expand_blocks(block_scales(exp_b, mantissa_bits), block, b.shape[0], 0))
    abs_a, abs_b = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
    quantisation = step_a @ abs_b + abs_a @ step_b + step_a @ step_b
    quantised = np.abs(from_block_fp(exp_a, mant_a, block=block, mantissa_bits=mantissa_bits, axis=1)
                       .astype(np.float64)) @ np.abs(
        from_block_fp(exp_b, mant_b, block=block, mantissa_bits=mantissa_bits, axis=0).astype(np.float64))
    d_magnitude = 0.0 if d is None else np.abs(decode_to_f32(d, "f32", "d").astype(np.float64))
    n_blocks = exp_a.shape[1]
    bound = quantisation + _gamma(n_blocks + 1, U_F32) * (d_magnitude + quantised) + 2 * n_blocks * ETA_F32
    if include_f64_reference:
        bound = bound + _gamma(a.shape[1] + 1, U_F64) * (d_magnitude + abs_a @ abs_b)
    return bound


def block_fp_gemm_cycles(M, K, N, *, rows, cols, block, tile=1, mac_latency, acc_latency=1,
                         dataflow="output_stationary", convert_latency=None, add_latency=None):
    """Cycles of one GEMM on a block floating point array.

    Output stationary (``rtl.systolic.block_fp_array``): ``gemm_cycles`` with K padded to whole
    blocks and the array's ``mac_latency`` and ``acc_latency``.

    Weight stationary (``rtl.systolic.block_fp_ws_array``, ``rows`` a multiple of ``block``): the
    schedule of ``gemm_cycles(..., dataflow="weight_stationary")`` with ``mac_latency`` L the
    integer MAC's cycles per PE row, plus a converter (``convert_latency``) and an f32 adder
    (``add_latency``) below every block of PE rows. Integer block sums flow down the columns
    without waiting for the f32 additions, so the last result leaves ``convert + add`` cycles
    after the last PE row; the next k-tile reads a row's accumulator from the buffer only for
    its first block's addition, ``block L + convert`` cycles after the row's operand reached
    PE(0, c), so the partial-sum chain between k-tiles shrinks to ``(rows - block) L + add + 1``::

        tiles  = ceil(K / rows) ceil(N / cols)
        stream = M + (cols - 1) + rows L + convert + add
        chain  = (rows - block) L + add + 1   if K > rows, else 0
        period = max(M + (cols - 1) + (rows - 1) L, chain, rows)
        total  = rows + (tiles - 1) period + stream

    Parameters
    ----------
    M, K, N : int
        GEMM dimensions.
    rows, cols, tile, mac_latency, acc_latency
        As for :func:`golden.systolic.gemm_cycles` (``tile`` and ``acc_latency``: output stationary only).
    block : int
        Elements per shared exponent along K.
    dataflow : {"output_stationary", "weight_stationary"}
    convert_latency, add_latency : int
        Weight stationary only: the block-sum converter's and the f32 adder's register stages.

    Returns
    -------
    int
    """
    _check_format(block, 2)
    if dataflow == "output_stationary":
        if convert_latency is not None or add_latency is not None:
            raise ValueError("convert_latency and add_latency apply to dataflow='weight_stationary' only")
        padded = -(-K // block) * block
        return gemm_cycles(M, padded, N, rows=rows, cols=cols, tile=tile, mac_latency=mac_latency,
                           acc_latency=acc_latency)
    if dataflow != "weight_stationary":
        raise ValueError(f"dataflow must be 'output_stationary' or 'weight_stationary', not {dataflow!r}")
    if tile != 1 or acc_latency != 1:
        raise ValueError("tile and acc_latency must be 1 for dataflow='weight_stationary'")
    if convert_latency is None or add_latency is None:
        raise ValueError("dataflow='weight_stationary' needs convert_latency and add_latency")
    # gemm_cycle_terms checks the common arguments and supplies the dense terms.
    dense = gemm_cycle_terms(M, K, N, rows=rows, cols=cols, dataflow=dataflow, mac_latency=mac_latency)
    if rows % block:
        raise ValueError(f"rows must be a multiple of block = {block}, not {rows}")
    chain = (rows - block) * mac_latency + add_latency + 1 if K > rows else 0
    period = max(M + (cols - 1) + (rows - 1) * mac_latency, chain, rows)
    return rows + (dense.tiles - 1) * period + dense.stream + convert_latency + add_latency
