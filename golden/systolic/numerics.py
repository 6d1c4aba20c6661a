"""Bit-exact models of what the systolic array's processing elements (PEs) compute.

Accumulation order (the contract the RTL must honour)
-----------------------------------------------------
Every output ``c[i, j]`` is a chain of multiply-accumulates in increasing ``k``::

    acc = d[i, j]            (or +0.0 / 0 when d is None)
    for k in 0 .. K-1:
        acc = acc + product(a[i, k], b[k, j])
    c[i, j] = acc

one MAC per step, never re-associated, never fused across steps. For the float elements the
accumulator is IEEE binary32 with round-to-nearest-even (RNE) and gradual underflow:

``f16``, ``bf16``
    ``a`` and ``b`` are 16-bit raw bits. The product is ``f32(a) * f32(b)`` rounded RNE to f32. For
    f16 this is always exact: 11 x 11 significand bits fit f32's 24, and the smallest f16 product
    (2^-48) and the largest (65504^2 < 2^32) are f32 normals. For bf16 (8-bit significands) the
    significand always fits, but the exponent does not: a bf16 product can overflow to inf or fall
    into the f32 subnormal range, where the RNE-rounded f32 product is the definition.
``f32``
    ``acc = acc + round(a * b)``: two roundings per step (a multiplier then an adder, not a fused
    multiply-add).
``int8``
    Exact products accumulated in int32, wrapping modulo 2^32 (two's complement), as a 32-bit
    adder does. Wrapping addition is associative, so the order does not matter for this element.

NaN results are returned as the canonical quiet NaN ``0x7FC00000`` (the RTL does not propagate
payloads). Exception flags are not modelled.
"""

from dataclasses import dataclass

import numpy as np

from golden.fp.formats import F32

__all__ = [
    "ELEMENTS",
    "CANONICAL_NAN_F32",
    "decode_to_f32",
    "f32_bits",
    "f32_from_bits",
    "gemm",
    "gemm_error_bound",
    "mac_chain_f32",
    "wrap_int32",
]

CANONICAL_NAN_F32 = np.uint32(F32.canonical_nan)
# Unit roundoff of binary32 and binary64, and half the smallest f32 subnormal (the largest
# absolute error one f32 multiplication can make when its result underflows).
U_F32 = 2.0**-24
U_F64 = 2.0**-53
ETA_F32 = 2.0**-150


@dataclass(frozen=True)
class _Element:
    name: str
    raw_dtype: type
    product_exact: bool  # True when every finite product is an exact f32


ELEMENTS = {
    "f16": _Element("f16", np.uint16, True),
    "bf16": _Element("bf16", np.uint16, False),
    "f32": _Element("f32", np.uint32, False),
    "int8": _Element("int8", np.int8, True),
}


def _element(element):
    if element not in ELEMENTS:
        raise ValueError(f"element must be one of {sorted(ELEMENTS)}, not {element!r}")
    return ELEMENTS[element]


def f32_from_bits(bits):
    """Reinterpret raw binary32 bits as ``np.float32`` values.

    Parameters
    ----------
    bits : array_like of uint32, or of float32 (returned unchanged)

    Returns
    -------
    numpy.ndarray of float32
    """
    array = np.asarray(bits)
    if array.dtype == np.float32:
        return array
    if array.dtype != np.uint32:
        raise ValueError(f"bits must be uint32 raw bits or float32, not dtype {array.dtype}")
    return array.view(np.float32)


def f32_bits(values):
    """Raw binary32 bits of ``values``, with every NaN replaced by the canonical quiet NaN.

    Parameters
    ----------
    values : array_like of float32

    Returns
    -------
    numpy.ndarray of uint32
    """
    array = np.asarray(values, dtype=np.float32)
    bits = array.view(np.uint32).copy()
    bits[np.isnan(array)] = CANONICAL_NAN_F32
    return bits


def decode_to_f32(raw, element, name="raw"):
    """Widen an operand array of ``element`` to ``np.float32`` exactly.

    Parameters
    ----------
    raw : numpy.ndarray
        uint16 raw bits for ``f16`` (``np.float16`` is also accepted) and ``bf16``; uint32 raw
        bits or float32 for ``f32``.
    element : {"f16", "bf16", "f32"}
    name : str
        Parameter name used in error messages.

    Returns
    -------
    numpy.ndarray of float32
        Every f16 and bf16 value is exactly representable in f32, so this never rounds.
    """
    array = np.asarray(raw)
    if element == "f16":
        if array.dtype == np.float16:
            return array.astype(np.float32)
        _require_dtype(array, np.uint16, name, element)
        return array.view(np.float16).astype(np.float32)
    if element == "bf16":
        _require_dtype(array, np.uint16, name, element)
        # bf16 is the top half of a binary32: shifting the bits up is the exact widening.
        return (array.astype(np.uint32) << np.uint32(16)).view(np.float32)
    if element == "f32":
        if array.dtype != np.float32:
            _require_dtype(array, np.uint32, name, element)
        return f32_from_bits(array)
    raise ValueError(f"element must be one of 'f16', 'bf16', 'f32' here, not {element!r}")


def _require_dtype(array, dtype, name, element):
    if array.dtype != dtype:
        raise ValueError(f"{name} must be {np.dtype(dtype).name} raw bits for element {element!r}, "
                         f"not dtype {array.dtype}")


def wrap_int32(values):
    """Reduce integers modulo 2^32 into the int32 range, as a 32-bit two's complement adder does.

    Parameters
    ----------
    values : array_like of int64

    Returns
    -------
    numpy.ndarray of int32
    """
    as_int64 = np.asarray(values, dtype=np.int64)
    return ((as_int64 + 2**31) % 2**32 - 2**31).astype(np.int32)


def _check_operands(a, b, d):
    a = np.asarray(a)
    b = np.asarray(b)
    if a.ndim != 2:
        raise ValueError(f"a must be a 2-D (M, K) array, not shape {a.shape}")
    if b.ndim != 2 or b.shape[0] != a.shape[1]:
        raise ValueError(f"b must be a 2-D (K, N) array with K = {a.shape[1]}, not shape {b.shape}")
    if d is not None and np.shape(d) != (a.shape[0], b.shape[1]):
        raise ValueError(f"d must have shape (M, N) = {(a.shape[0], b.shape[1])}, not {np.shape(d)}")
    return a, b


def mac_chain_f32(acc, a_columns, b_rows, valid=None):
    """Run MAC steps ``acc = acc + a_s * b_s`` in f32 RNE for s = 0, 1, ..., in order.

    This is the single PE datapath shared by the dense and the sparse models.

    Parameters
    ----------
    acc : numpy.ndarray of float32, shape (M, N)
        Initial accumulators (not modified).
    a_columns : sequence of float32 arrays, each broadcastable to (M, N)
        The left operand of step s (typically shape (M, 1)).
    b_rows : sequence of float32 arrays, each broadcastable to (M, N)
        The right operand of step s (typically shape (1, N) or (M, N)).
    valid : sequence of bool arrays broadcastable to (M, N), optional
        Where False, step s leaves the accumulator untouched (a skipped padding slot).

    Returns
    -------
    numpy.ndarray of float32, shape (M, N)
    """
    acc = np.array(acc, dtype=np.float32)
    with np.errstate(all="ignore"):  # inf and NaN are legal results; IEEE semantics apply
        for step, (a_s, b_s) in enumerate(zip(a_columns, b_rows, strict=True)):
            summed = acc + a_s * b_s
            acc = summed if valid is None else np.where(valid[step], summed, acc)
    return acc.astype(np.float32, copy=False)


def gemm(a, b, d=None, *, element="f16"):
    """``c = d + a @ b`` with the systolic array's accumulation order (see the module docstring).

    Vectorised over the outputs (i, j); the loop runs over k only, so the rounding sequence of each
    output is exactly the PE's.

    Parameters
    ----------
    a : numpy.ndarray, shape (M, K)
    b : numpy.ndarray, shape (K, N)
        uint16 raw bits for ``f16`` / ``bf16`` (``np.float16`` accepted for f16); uint32 raw bits or
        float32 for ``f32``; int8 for ``int8``.
    d : numpy.ndarray, shape (M, N), optional
        Initial accumulator: f32 raw bits (uint32) or float32 for the float elements, int32 for
        ``int8``. Defaults to +0.0 (or 0).
    element : {"f16", "bf16", "f32", "int8"}

    Returns
    -------
    numpy.ndarray, shape (M, N)
        uint32 raw binary32 bits (canonical NaN) for the float elements; int32 for ``int8``.
    """
    _element(element)
    a, b = _check_operands(a, b, d)
    if element == "int8":
        _require_dtype(a, np.int8, "a", element)
        _require_dtype(b, np.int8, "b", element)
        total = a.astype(np.int64) @ b.astype(np.int64)
        if d is not None:
            d = np.asarray(d)
            _require_dtype(d, np.int32, "d", element)
            total = total + d.astype(np.int64)
        return wrap_int32(total)
    a32 = decode_to_f32(a, element, "a")
    b32 = decode_to_f32(b, element, "b")
    if d is None:
        acc = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    else:
        acc = decode_to_f32(d, "f32", "d")
    a_columns = [a32[:, k:k + 1] for k in range(a.shape[1])]
    b_rows = [b32[k:k + 1, :] for k in range(a.shape[1])]
    return f32_bits(mac_chain_f32(acc, a_columns, b_rows))


def _gamma(n, unit_roundoff):
    """Higham's gamma_n = n u / (1 - n u)."""
    if n * unit_roundoff >= 1:
        raise ValueError(f"n = {n} is too large for a rounding-error bound (need n u < 1)")
    return n * unit_roundoff / (1 - n * unit_roundoff)


def gemm_error_bound(a, b, d=None, *, element="f16", include_f64_reference=True):
    """Bound on ``|gemm(a, b, d) - (d + a @ b)|`` (exact arithmetic), element-wise.

    Derivation (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., Sec. 3.1 and 4.2).
    Let ``p_k = fl(a_k b_k)`` and ``s_k = fl(s_{k-1} + p_k)``, ``s_0 = d``. Recursive summation of
    the K + 1 terms ``d, p_1 .. p_K`` gives ``|s_K - (d + sum p_k)| <= gamma_K (|d| + sum |p_k|)``
    (an f32 addition whose result is subnormal is exact, so additions add no absolute term). For
    ``f16`` the products are exact, giving ``gamma_K (|d| + sum |a_k b_k|)``. For ``bf16`` and
    ``f32``, ``|p_k - a_k b_k| <= u |a_k b_k| + eta`` with ``eta = 2^-150`` (underflow); using
    ``gamma_K (1 + u) + u <= gamma_{K+1}`` the total is::

        |c - c_exact| <= gamma_{K+1} (|d| + sum_k |a_ik| |b_kj|) + 2 K eta,   u = 2^-24.

    Valid while nothing overflows. ``include_f64_reference`` adds the error of a float64 reference
    computed in any order, ``gamma64_{K+1} (|d| + sum |a||b|)``, so the bound can be checked against
    ``a64 @ b64 + d64`` directly.

    Parameters
    ----------
    a, b, d, element
        As for :func:`gemm` (float elements only).
    include_f64_reference : bool

    Returns
    -------
    numpy.ndarray of float64, shape (M, N)
    """
    spec = _element(element)
    if element == "int8":
        raise ValueError("element must be a float element for an error bound; int8 is exact")
    a, b = _check_operands(a, b, d)
    magnitude = np.abs(decode_to_f32(a, element, "a").astype(np.float64)) @ np.abs(
        decode_to_f32(b, element, "b").astype(np.float64))
    if d is not None:
        magnitude = magnitude + np.abs(decode_to_f32(d, "f32", "d").astype(np.float64))
    k = a.shape[1]
    if spec.product_exact:
        bound = _gamma(k, U_F32) * magnitude
    else:
        bound = _gamma(k + 1, U_F32) * magnitude + 2 * k * ETA_F32
    if include_f64_reference:
        bound = bound + _gamma(k + 1, U_F64) * magnitude
    return bound
