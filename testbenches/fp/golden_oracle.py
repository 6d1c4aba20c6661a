"""Berkeley SoftFloat (``softfloatpy``) as the oracle of :mod:`golden.fp`, one element at a time.

f32 and f16 call SoftFloat's own operations. SoftFloat has no bf16 arithmetic, only
``f32_to_bf16`` and ``bf16_to_f32``, so bf16 is built from exact or provably correct steps:

* bf16 operands are widened to f32 by appending 16 zero bits (bf16 is the top half of f32, so
  this is exact and keeps signalling NaNs signalling), then to f64 with ``f32_to_f64`` (exact;
  a signalling NaN raises invalid there and becomes quiet, which yields the same NaN result and
  flags as raising it in the operation).
* The operation runs in f64 rounding toward zero; if inexact, the lowest bit is forced to 1.
  That is round-to-odd. ``f64_to_f32`` toward zero with the same bit forcing rounds to odd
  again, which composes: the f32 value is the exact result rounded to odd at 24 bits. Neither
  step can overflow or underflow in f64 for bf16 operands (products and quotients of bf16
  values stay within 2**±270).
* ``f32_to_bf16`` then rounds to nearest even. Rounding to odd at 24 >= 8 + 2 bits and then to
  nearest at 8 bits equals one rounding of the exact value, in the subnormal range too (f32
  and bf16 share emin, so the f32 grid is 2**16 times finer there as well). This holds for fma
  as well, where rounding f64 to nearest would not be innocuous.
* Flags: invalid and divide-by-zero come from the widening and the f64 operation; inexact is
  the OR over all steps (an inexact early step leaves an odd f32 value, which is never a bf16
  value); overflow and underflow come from ``f32_to_bf16`` only. Its tininess-after-rounding
  decision is the exact one because the tininess boundary ``2**emin * (1 - 2**-9)`` lies on the
  f32 grid and rounding to odd keeps a value on its side of every f32 grid point. The f32
  step's own underflow flag (tiny at 24 bits, toward zero) is not the bf16 one and is dropped.

Integer to bf16 uses the same path from the exact ``i32_to_f64``/``ui32_to_f64``. bf16 to
f16 and f16 to bf16 go through f32, which holds both exactly. Comparisons and min/max on bf16
compare the widened f32 values.

Flush-to-zero has no external oracle: inputs are flushed here (subnormal encodings become
zeros of the same sign), SoftFloat runs on them, and a subnormal float result becomes a zero
of the same sign with underflow and inexact added. min/max (absent from SoftFloat) are
IEEE 754-2019 minimumNumber/maximumNumber built from SoftFloat's quiet comparisons and NaN
tests.

softfloatpy is built with the RISC-V specialisation, whose NaN results are already the
canonical NaN; results are canonicalised anyway, which is the one documented liberty.
"""

import numpy as np
import softfloatpy as sf

from golden.fp.formats import float_format

__all__ = ["ARITHMETIC", "COMPARISONS", "oracle", "oracle_convert", "oracle_from_f64", "flush_input"]

INEXACT, UNDERFLOW, INVALID = 1, 2, 16
ARITHMETIC = ("add", "sub", "mul", "div", "fma", "sqrt")
COMPARISONS = ("eq", "lt", "le", "lt_quiet", "le_quiet")
_SF_NAMES = {"fma": "mul_add"}
_NATIVE = {"f32": sf.Float32, "f16": sf.Float16}
_INTEGER = {"i32": (sf.Int32, "i32"), "u32": (sf.UInt32, "ui32")}


def _use_defaults():
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    sf.set_tininess_mode(sf.TininessMode.AFTER_ROUNDING)


def _objects(bits, cls, nbytes):
    raw = np.asarray(bits).astype(f">u{nbytes}").tobytes()
    return [cls.from_bytes(raw[i:i + nbytes]) for i in range(0, len(raw), nbytes)]


def _to_bits(objects, nbytes):
    return np.frombuffer(b"".join(x.to_bytes() for x in objects), f">u{nbytes}").astype(f"u{nbytes}")


def _sf_operands(bits, fmt):
    """SoftFloat objects for raw bits: native for f32/f16, exactly widened f32 for bf16."""
    if fmt.name == "bf16":
        return _objects(np.asarray(bits, dtype=np.uint32) << 16, sf.Float32, 4)
    return _objects(bits, _NATIVE[fmt.name], fmt.width // 8)


def _with_flags(function, *args):
    sf.set_exception_flags(0)
    result = function(*args)
    return result, sf.get_exception_flags()


def _jam(value, cls, nbytes):
    """Force the lowest encoding bit to 1 (the round-to-odd step)."""
    return cls.from_bytes((int.from_bytes(value.to_bytes(), "big") | 1).to_bytes(nbytes, "big"))


def _odd(function, *args, cls=sf.Float64, nbytes=8):
    """Run ``function`` rounding to odd: toward zero, lowest bit forced to 1 if inexact."""
    sf.set_rounding_mode(sf.RoundingMode.MIN_MAG)
    try:
        value, flags = _with_flags(function, *args)
    finally:
        sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    return (_jam(value, cls, nbytes) if flags & INEXACT else value), flags


def _f64_to_bf16(value, flags, narrow=sf.f32_to_bf16):
    """Round an f64 that is the round-to-odd image of an exact result to bf16 (see module doc).

    ``narrow`` may be ``f32_to_f16`` instead, to check this construction against native f16.
    """
    odd, odd_flags = _odd(sf.f64_to_f32, value, cls=sf.Float32, nbytes=4)
    result, final_flags = _with_flags(narrow, odd)
    return result, ((flags | odd_flags) & ~UNDERFLOW) | final_flags


def _emulated_arithmetic(f64_operation, fmt):
    """Per-element bf16 arithmetic built from f64 round-to-odd (or the same for f16, as a check)."""
    widen = sf.f16_to_f64 if fmt.name == "f16" else sf.f32_to_f64
    narrow = getattr(sf, f"f32_to_{fmt.name}")

    def element(*operands):
        widened = [_with_flags(widen, x) for x in operands]
        widen_flags = 0
        for _, flags in widened:
            widen_flags |= flags
        value, flags = _odd(f64_operation, *(w for w, _ in widened))
        return _f64_to_bf16(value, widen_flags | flags, narrow)
    return element


def _run(element, columns):
    """Apply a per-element function returning (object, flags); returns objects and a flag array."""
    _use_defaults()
    results, flags = [], []
    for args in zip(*columns, strict=True):
        result, flag = element(*args)
        results.append(result)
        flags.append(flag)
    return results, np.array(flags, dtype=np.uint8).reshape(-1)


def _plain(function):
    return lambda *args: _with_flags(function, *args)


def _arithmetic(op, operands, fmt, emulate):
    name = _SF_NAMES.get(op, op)
    columns = [_sf_operands(x, fmt) for x in operands]
    if fmt.name == "bf16" or (emulate and fmt.name == "f16"):
        element = _emulated_arithmetic(getattr(sf, f"f64_{name}"), fmt)
    else:
        element = _plain(getattr(sf, f"{fmt.name}_{name}"))
    results, flags = _run(element, columns)
    return _to_bits(results, fmt.width // 8), flags


def _comparison(op, operands, fmt):
    prefix = "f32" if fmt.name == "bf16" else fmt.name
    results, flags = _run(_plain(getattr(sf, f"{prefix}_{op}")), [_sf_operands(x, fmt) for x in operands])
    return np.array(results, dtype=bool).reshape(-1), flags


def _min_max(op, operands, fmt):
    a_bits, b_bits = (np.asarray(x, dtype=np.uint64).reshape(-1) for x in operands)
    prefix = "f32" if fmt.name == "bf16" else fmt.name
    tests = ("lt_quiet", "is_nan", "is_signaling_nan")
    less, is_nan, is_snan = (getattr(sf, f"{prefix}_{test}") for test in tests)
    sign = np.uint64(fmt.sign_mask)
    results, flags = [], []
    for a, b, x, y in zip(a_bits, b_bits, _sf_operands(a_bits, fmt), _sf_operands(b_bits, fmt), strict=True):
        flags.append(INVALID if is_snan(x) or is_snan(y) else 0)
        if is_nan(x) and is_nan(y):
            results.append(fmt.canonical_nan)
        elif is_nan(x) or is_nan(y):
            results.append(b if is_nan(x) else a)
        elif less(x, y) != less(y, x):
            results.append(a if less(x, y) == (op == "min") else b)
        else:
            # Equal values: only the zeros differ, and -0 is the smaller one.
            negative_first = bool(a & sign)
            results.append(a if negative_first == (op == "min") else b)
    return np.array(results, dtype=f"u{fmt.width // 8}"), np.array(flags, dtype=np.uint8)


def _canonical(bits, fmt):
    magnitude = bits.astype(np.uint64) & np.uint64(fmt.sign_mask - 1)
    return np.where(magnitude > fmt.positive_infinity, fmt.canonical_nan, bits).astype(bits.dtype)


def flush_input(bits, fmt):
    """Oracle-side flush: subnormal encodings become zeros of the same sign (uint64 out)."""
    bits = np.asarray(bits, dtype=np.uint64)
    field = (bits >> np.uint64(fmt.mantissa_bits)) & np.uint64(fmt.max_exponent_field)
    return np.where(field == 0, bits & np.uint64(fmt.sign_mask), bits)


def _flush_output(bits, flags, fmt):
    flushed = flush_input(bits, fmt)
    changed = flushed != bits
    return flushed.astype(bits.dtype), flags | np.where(changed, UNDERFLOW | INEXACT, 0).astype(np.uint8)


def oracle(op, operands, fmt, flush, emulate=False):
    """SoftFloat's answer for one golden.fp operation (not convert).

    Parameters
    ----------
    op : str
        One of :data:`ARITHMETIC`, :data:`COMPARISONS`, ``"min"`` or ``"max"``.
    operands : sequence of numpy.ndarray
        Raw operand bits, one 1-D array per operand.
    fmt : str
        ``"f32"``, ``"f16"`` or ``"bf16"``.
    flush : bool
        Emulate flush-to-zero around SoftFloat (see the module docstring).
    emulate : bool
        For f16 arithmetic, use the round-to-odd construction that bf16 needs instead of
        SoftFloat's f16 operations (to check that construction against them).

    Returns
    -------
    result : numpy.ndarray
        Raw bits (canonical NaN), or booleans for comparisons.
    flags : numpy.ndarray of uint8
    """
    fmt = float_format(fmt)
    if flush:
        operands = [flush_input(x, fmt) for x in operands]
    if op in COMPARISONS:
        return _comparison(op, operands, fmt)
    if op in ("min", "max"):
        bits, flags = _min_max(op, operands, fmt)
    elif op in ARITHMETIC:
        bits, flags = _arithmetic(op, operands, fmt, emulate)
    else:
        raise ValueError(f"op must be one of {ARITHMETIC + COMPARISONS + ('min', 'max')}, not {op!r}")
    bits = _canonical(bits, fmt)
    return _flush_output(bits, flags, fmt) if flush else (bits, flags)


def _convert_element(src, dst):
    """Per-element SoftFloat conversion from ``src`` to ``dst`` (names), as (object, flags)."""
    if src in _INTEGER:
        cls, name = _INTEGER[src]
        if dst == "bf16":
            return lambda x: _f64_to_bf16(*_with_flags(getattr(sf, f"{name}_to_f64"), cls.from_int(x)))
        return lambda x: _with_flags(getattr(sf, f"{name}_to_{dst}"), cls.from_int(x))
    if dst in _INTEGER:
        name = _INTEGER[dst][1]
        if src == "bf16":
            return _chain(sf.bf16_to_f32, getattr(sf, f"f32_to_{name}"))
        return _plain(lambda x: getattr(sf, f"{src}_to_{name}")(x, sf.RoundingMode.NEAR_EVEN, True))
    direct = {("f32", "f16"): sf.f32_to_f16, ("f16", "f32"): sf.f16_to_f32,
              ("f32", "bf16"): sf.f32_to_bf16, ("bf16", "f32"): sf.bf16_to_f32}
    if (src, dst) in direct:
        return _plain(direct[src, dst])
    # f16 <-> bf16: f32 holds every f16 and bf16 value exactly.
    return _chain(getattr(sf, f"{src}_to_f32"), getattr(sf, f"f32_to_{dst}"))


def _chain(first, second):
    def element(x):
        middle, flags = _with_flags(first, x)
        result, more = _with_flags(second, middle)
        return result, flags | more
    return element


def oracle_convert(x, src, dst, flush):
    """SoftFloat's answer for ``golden.fp.convert(x, src, dst, flush)``.

    Parameters
    ----------
    x : numpy.ndarray
        Raw float bits, or int32/uint32 integers, 1-D.
    src, dst : str
        ``"f32"``, ``"f16"``, ``"bf16"``, ``"i32"`` or ``"u32"`` (not both integers, not equal).
    flush : bool
        Emulate flush-to-zero around SoftFloat.

    Returns
    -------
    result : numpy.ndarray
        Raw bits of ``dst`` (canonical NaN) or int32/uint32 integers.
    flags : numpy.ndarray of uint8
    """
    element = _convert_element(src, dst)
    if src in _INTEGER:
        column = [int(v) for v in np.asarray(x).reshape(-1)]
    else:
        src_fmt = float_format(src)
        bits = flush_input(x, src_fmt) if flush else x
        # bf16 operands enter SoftFloat as BFloat16 here: the conversions themselves are tested.
        column = _objects(bits, sf.BFloat16, 2) if src == "bf16" else _sf_operands(bits, src_fmt)
    results, flags = _run(element, [column])
    if dst in _INTEGER:
        dtype = np.int32 if dst == "i32" else np.uint32
        return np.array([r.to_int() for r in results], dtype=dtype), flags
    dst_fmt = float_format(dst)
    bits = _canonical(_to_bits(results, dst_fmt.width // 8), dst_fmt)
    return _flush_output(bits, flags, dst_fmt) if flush else (bits, flags)


def oracle_from_f64(bits, fmt):
    """SoftFloat's rounding of binary64 encodings to ``fmt`` (canonical NaN), bits only.

    Parameters
    ----------
    bits : numpy.ndarray of uint64
        Raw binary64 encodings, 1-D.
    fmt : str
        ``"f32"``, ``"f16"`` or ``"bf16"``.

    Returns
    -------
    numpy.ndarray
        Raw bits of ``fmt``.
    """
    fmt = float_format(fmt)
    if fmt.name == "bf16":
        # An f64 operand is exact, so it is trivially its own round-to-odd image.
        element = lambda x: _f64_to_bf16(x, 0)  # noqa: E731
    else:
        element = _plain(getattr(sf, f"f64_to_{fmt.name}"))
    results, _ = _run(element, [_objects(bits, sf.Float64, 8)])
    return _canonical(_to_bits(results, fmt.width // 8), fmt)
