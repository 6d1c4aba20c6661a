"""Random and directed operand generators shared by the golden-model and RTL tests."""

import numpy as np

from .arith import mul
from .convert import INTEGER_FORMATS
from .core import storage_dtype
from .formats import BF16, F16, F32, float_format
from .values import from_float

__all__ = ["special_values", "random_operands", "random_operand_tuples"]

_PRECISIONS = (F32.precision, F16.precision, BF16.precision)


def special_values(fmt):
    """Directed encodings covering every class and its edges, both signs.

    Zeros, the smallest and largest subnormals, the smallest normal and its successor, the
    largest finite and its predecessor, 0.5, 1, 1 + ulp, 1.5, 2 - ulp, 2, 3, Inf, quiet NaNs
    (canonical, full payload, negative) and signalling NaNs (smallest and largest payload).

    Parameters
    ----------
    fmt : str or FloatFormat
        ``"f32"``, ``"f16"`` or ``"bf16"``.

    Returns
    -------
    numpy.ndarray
        Raw bits in the format's storage dtype, without duplicates.
    """
    fmt = float_format(fmt)
    m, bias = fmt.mantissa_bits, fmt.bias
    one = bias << m
    frac_mask = (1 << m) - 1
    quiet = 1 << (m - 1)
    magnitudes = [0, 1, frac_mask, 1 << m, (1 << m) + 1, fmt.max_finite, fmt.max_finite - 1,
                  (bias - 1) << m, one, one + 1, one | quiet, one | frac_mask, (bias + 1) << m,
                  ((bias + 1) << m) | quiet, fmt.positive_infinity]
    nans = [fmt.canonical_nan, fmt.positive_infinity | frac_mask, fmt.positive_infinity | 1,
            fmt.positive_infinity | (quiet - 1)]
    values = magnitudes + [v | fmt.sign_mask for v in magnitudes] + nans + [v | fmt.sign_mask for v in nans]
    return np.array(sorted(set(values)), dtype=storage_dtype(fmt))


def _float_operands(rng, n, fmt):
    m, top = fmt.mantissa_bits, fmt.max_exponent_field
    sign = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(fmt.width - 1)
    frac = rng.integers(0, 1 << m, n, dtype=np.uint64)
    # The lowest set bit of a tie fraction sits at a random place, so that narrowing to any
    # smaller precision (or to an integer) sometimes lands exactly half-way.
    tie_bit = np.uint64(1) << rng.integers(0, m, n, dtype=np.uint64)
    tie_frac = ((frac | tie_bit) & ~(tie_bit - np.uint64(1)))
    moderate = rng.integers(fmt.bias - 8, fmt.bias + 9, n, dtype=np.uint64)
    near_integer = rng.integers(-(1 << 12), 1 << 12, n) + 0.5 * rng.integers(0, 2, n)
    choices = [
        (0.20, rng.choice(special_values(fmt).astype(np.uint64), n)),
        (0.10, sign | np.maximum(frac, np.uint64(1))),
        (0.08, sign | (rng.integers(top - 3, top, n, dtype=np.uint64) << np.uint64(m)) | frac),
        (0.08, sign | (rng.integers(1, 4, n, dtype=np.uint64) << np.uint64(m)) | frac),
        (0.10, sign | (moderate << np.uint64(m)) | tie_frac),
        (0.20, sign | (moderate << np.uint64(m)) | frac),
        (0.08, from_float(near_integer, fmt).astype(np.uint64)),
        (0.16, rng.integers(0, 1 << fmt.width, n, dtype=np.uint64)),
    ]
    return _mix(rng, n, choices).astype(storage_dtype(fmt))


def _integer_operands(rng, n, kind):
    dtype, low, high = INTEGER_FORMATS[kind]
    signed = low < 0
    edges = [0, 1, 2, 3, high, high - 1, (1 << 24) + 1, (1 << 24) + 3, 1 << 24, (1 << 11) + 1,
             (1 << 8) + 1, high - 127, high - 128, high - 64, 1 << (high.bit_length() - 1)]
    if signed:
        edges += [-e for e in edges[1:]] + [low]
    sign = np.where(rng.integers(0, 2, n) == 1, -1, 1) if signed else np.ones(n, dtype=np.int64)
    power = np.int64(1) << rng.integers(0, high.bit_length(), n)
    length = rng.integers(9, high.bit_length() + 1, n)
    digits = rng.integers(0, np.int64(1) << length)
    # Integers that sit exactly half-way between neighbours of an 8-, 11- or 24-bit precision.
    cut = np.clip(length - rng.choice(_PRECISIONS, n), 1, None)
    tie = ((digits >> cut) << cut) | (np.int64(1) << (cut - 1))
    choices = [
        (0.25, rng.choice(np.array(edges, dtype=np.int64), n)),
        (0.25, sign * (power + rng.integers(-3, 4, n))),
        (0.20, sign * tie),
        (0.30, rng.integers(low, high, n, endpoint=True)),
    ]
    return np.clip(_mix(rng, n, choices), low, high).astype(dtype)


def _mix(rng, n, choices):
    """Pick each element from one of the candidate arrays with the given probabilities."""
    weights = np.array([w for w, _ in choices])
    which = rng.choice(len(choices), n, p=weights / weights.sum())
    return np.choose(which, [c for _, c in choices])


def random_operands(rng, n, fmt):
    """Random operands that hit every class and the rounding corner cases often.

    For float formats: 20 % directed values (:func:`special_values`), 10 % random subnormals,
    8 % values near overflow, 8 % near the underflow boundary, 10 % fractions that are ties
    when narrowed, 20 % values within 2**±8, 8 % integers and half-integers, 16 % uniform bit
    patterns. For ``"i32"``/``"u32"``: range edges and f32/f16/bf16 rounding boundaries, powers
    of two, ties at 8-, 11- and 24-bit precision, and uniform values.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness.
    n : int
        Number of operands.
    fmt : str or FloatFormat
        ``"f32"``, ``"f16"``, ``"bf16"``, ``"i32"`` or ``"u32"``.

    Returns
    -------
    numpy.ndarray
        Raw bits (uint32 for f32, uint16 for f16/bf16) or int32/uint32 integers.
    """
    if isinstance(fmt, str) and fmt in INTEGER_FORMATS:
        return _integer_operands(rng, n, fmt)
    return _float_operands(rng, n, float_format(fmt))


def _near(rng, anchor, fmt, exponent_offset, frac=None):
    """Random values whose exponent field is the anchor's plus ``exponent_offset``, kept finite."""
    m = fmt.mantissa_bits
    n = anchor.size
    field = (anchor.astype(np.int64) >> m) & fmt.max_exponent_field
    field = np.clip(field + exponent_offset, 0, fmt.max_exponent_field - 1).astype(np.uint64)
    if frac is None:
        frac = rng.integers(0, 1 << m, n, dtype=np.uint64)
    sign = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(fmt.width - 1)
    return sign | (field << np.uint64(m)) | frac


def _partner(rng, anchor, fmt, addend):
    """A second operand related to ``anchor`` (or an fma addend related to the product)."""
    m, n = fmt.mantissa_bits, anchor.size
    anchor = anchor.astype(np.uint64)
    sign_mask = np.uint64(fmt.sign_mask)
    low_bits = rng.integers(1, np.uint64(1) << rng.integers(1, m + 1, n, dtype=np.uint64), dtype=np.uint64)
    one_and_half = rng.integers(0, 2, n, dtype=np.uint64)
    short = rng.integers(0, 8, n, dtype=np.uint64) << np.uint64(m - 3)
    scale = rng.integers(fmt.bias - 12, fmt.bias + 13, n, dtype=np.uint64)
    choices = [
        (0.35, random_operands(rng, n, fmt).astype(np.uint64)),
        (0.15, _near(rng, anchor, fmt, rng.integers(-2, 3, n))),
        (0.06, anchor ^ rng.choice(np.array([0, fmt.sign_mask], dtype=np.uint64), n)),
        (0.10, (anchor ^ sign_mask) ^ low_bits),
        # Half an ulp or 1.5 ulp of the anchor: a sum exactly half-way between two neighbours.
        (0.12, _near(rng, anchor, fmt, one_and_half.astype(np.int64) - (m + 1),
                     one_and_half << np.uint64(m - 1))),
        # Far below the anchor: only a sticky bit survives alignment.
        (0.07, _near(rng, anchor, fmt, -rng.integers(fmt.precision + 1, fmt.precision + 20, n))),
    ]
    if addend:
        choices.append((0.15, anchor ^ sign_mask))
    else:
        # Operands with three significant bits make short products, whose roundings often tie.
        choices.append((0.15, rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(fmt.width - 1)
                        | (scale << np.uint64(m)) | short))
    return _mix(rng, n, choices).astype(storage_dtype(fmt))


def random_operand_tuples(rng, n, fmt, arity):
    """Random operand tuples with correlated members for binary operations and fma.

    The first operand comes from :func:`random_operands`. The second is independent 35 % of the
    time, else close in exponent (cancellation), equal or negated (exact cancellation), negated
    with low bits changed (catastrophic cancellation), half or 1.5 ulp of the first (ties in
    add/sub), far smaller (sticky only) or a 3-bit significand (ties in mul/div). A third
    operand is related in the same ways to the rounded product ``a * b`` and is often its exact
    negation, so that ``fma`` returns the product's rounding error.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness.
    n : int
        Number of tuples.
    fmt : str or FloatFormat
        ``"f32"``, ``"f16"`` or ``"bf16"``.
    arity : int
        1, 2 or 3.

    Returns
    -------
    tuple of numpy.ndarray
        ``arity`` arrays of raw bits.

    Raises
    ------
    ValueError
        If ``arity`` is not 1, 2 or 3.
    """
    if arity not in (1, 2, 3):
        raise ValueError(f"arity must be 1, 2 or 3, not {arity!r}")
    fmt = float_format(fmt)
    operands = [random_operands(rng, n, fmt)]
    if arity >= 2:
        operands.append(_partner(rng, operands[0], fmt, addend=False))
    if arity == 3:
        product, _ = mul(operands[0], operands[1], fmt)
        operands.append(_partner(rng, product, fmt, addend=True))
    return tuple(operands)
