"""An exact, independent oracle of :func:`golden.systolic.block_fp.block_fp_gemm`, bit for bit.

It shares no code with the golden path: no NumPy, nothing from :mod:`golden.systolic.block_fp` or
:mod:`golden.systolic.numerics`. Binary32 words are decoded to :class:`fractions.Fraction` by hand,
every intermediate value is exact (Python integers and fractions), and each rounding that the
definition in :mod:`golden.systolic.block_fp` names happens once, here, in integer arithmetic:

* **Encoding**, per block of K: ``shared = max(max exponent field, 1) - 127``, ``scale = shared -
  (mantissa_bits - 2)``, ``mantissa = clamp(round_half_even(x / 2^scale), +-(2^(mantissa_bits-1) - 1))``.
* **Per block t** of an output: ``p`` = the exact integer dot product of the mantissas, then
  ``s = f32(p 2^(scale_a + scale_b))``, the exact rational rounded once (``p = 0`` gives +0.0).
* **Accumulation**: ``acc = f32(acc + s)``, IEEE 754 addition: the exact sum rounded once; NaN in,
  NaN out; ``inf - inf`` is NaN; an exact zero sum is +0.0 unless both addends are -0.0. ``acc``
  starts at ``d`` or +0.0.

:func:`round_to_f32` is round to nearest, ties to even, with gradual underflow (quantum 2^-149) and
overflow to infinity (any result that rounds to ``2^128`` or more). NaN results are the canonical
``0x7FC00000``. It is slow (pure Python) and meant for tests of small GEMMs.
"""

from fractions import Fraction

__all__ = ["block_fp_gemm_exact", "convert_block_sum", "encode_block", "f32_add", "f32_value", "round_to_f32"]

CANONICAL_NAN = 0x7FC00000
INFINITY = 0x7F800000
SIGN = 0x80000000
_FRACTION_BITS = 23
_MIN_QUANTUM = -149  # exponent of the smallest subnormal's weight


def f32_value(bits):
    """Decode binary32 ``bits`` to ``(kind, negative, magnitude)``.

    ``kind`` is ``"finite"`` (``magnitude`` an exact :class:`~fractions.Fraction`, 0 for a signed
    zero), ``"inf"`` or ``"nan"`` (``magnitude`` None).
    """
    bits = int(bits)
    if not 0 <= bits < 1 << 32:
        raise ValueError(f"a binary32 word is 32 bits, not {bits:#x}")
    negative = bool(bits >> 31)
    field = (bits >> _FRACTION_BITS) & 0xFF
    fraction = bits & ((1 << _FRACTION_BITS) - 1)
    if field == 0xFF:
        return ("nan" if fraction else "inf"), negative, None
    if field == 0:  # zero or subnormal: fraction 2^-149
        return "finite", negative, Fraction(fraction) / (1 << -_MIN_QUANTUM)
    significand = fraction | (1 << _FRACTION_BITS)
    exponent = field - 150  # value = significand 2^(field - 127 - 23)
    return "finite", negative, _scaled(Fraction(significand), exponent)


def _scaled(value, exponent):
    """``value 2^exponent``, exactly."""
    return value * (1 << exponent) if exponent >= 0 else value / (1 << -exponent)


def _signed(bits):
    """The exact signed value of a finite word."""
    kind, negative, magnitude = f32_value(bits)
    if kind != "finite":
        raise ValueError(f"{bits:#010x} is not finite")
    return -magnitude if negative else magnitude


def _nearest_even(numerator, denominator):
    """``round_half_even(numerator / denominator)`` for integers, denominator > 0."""
    quotient, remainder = divmod(numerator, denominator)  # floor division, 0 <= remainder < denominator
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient % 2 == 1):
        quotient += 1
    return quotient


def _floor_log2(value):
    """``floor(log2(value))`` of a positive Fraction."""
    numerator, denominator = value.numerator, value.denominator
    exponent = numerator.bit_length() - denominator.bit_length()
    # 2^exponent <= value  <=>  numerator 2^-exponent >= denominator
    if (numerator << max(0, -exponent)) < (denominator << max(0, exponent)):
        exponent -= 1
    return exponent


def round_to_f32(value):
    """The binary32 word nearest to the exact rational ``value`` (ties to even).

    Gradual underflow: results below 2^-126 are multiples of 2^-149; a nonzero value that rounds
    to 0 keeps its sign. Overflow: a value that rounds to 2^128 or beyond is infinity. ``value`` = 0
    gives +0.0.
    """
    value = Fraction(value)
    if value == 0:
        return 0
    sign = SIGN if value < 0 else 0
    magnitude = abs(value)
    # Weight of the last significand bit: 24 bits below the leading one, but never below 2^-149.
    quantum = max(_floor_log2(magnitude) - _FRACTION_BITS, _MIN_QUANTUM)
    numerator = magnitude.numerator << max(0, -quantum)
    denominator = magnitude.denominator << max(0, quantum)
    significand = _nearest_even(numerator, denominator)  # magnitude ~ significand 2^quantum
    if significand == 1 << (_FRACTION_BITS + 1):  # rounded up to the next binade
        significand, quantum = significand >> 1, quantum + 1
    if significand < 1 << _FRACTION_BITS:  # subnormal (or zero): field 0, quantum 2^-149
        return sign | significand
    field = quantum + 150
    if field >= 0xFF:
        return sign | INFINITY
    return sign | (field << _FRACTION_BITS) | (significand - (1 << _FRACTION_BITS))


def f32_add(x_bits, y_bits):
    """IEEE 754 binary32 ``x + y`` with round to nearest even; NaN results canonical."""
    kind_x, negative_x, magnitude_x = f32_value(x_bits)
    kind_y, negative_y, magnitude_y = f32_value(y_bits)
    if "nan" in (kind_x, kind_y):
        return CANONICAL_NAN
    if kind_x == "inf" and kind_y == "inf":
        return CANONICAL_NAN if negative_x != negative_y else (SIGN if negative_x else 0) | INFINITY
    if kind_x == "inf" or kind_y == "inf":
        negative = negative_x if kind_x == "inf" else negative_y
        return (SIGN if negative else 0) | INFINITY
    exact = (-magnitude_x if negative_x else magnitude_x) + (-magnitude_y if negative_y else magnitude_y)
    if exact == 0:
        both_negative_zeros = magnitude_x == 0 and magnitude_y == 0 and negative_x and negative_y
        return SIGN if both_negative_zeros else 0
    return round_to_f32(exact)


def convert_block_sum(block_sum, scale):
    """``f32(block_sum 2^scale)`` for an integer block sum: one rounding; an exact 0 is +0.0."""
    return round_to_f32(_scaled(Fraction(block_sum), scale)) if block_sum else 0


def encode_block(words, *, mantissa_bits):
    """Encode one block of finite binary32 ``words``: ``(shared_exponent, [mantissa, ...])``."""
    fields = []
    for word in words:
        kind, _, _ = f32_value(word)
        if kind != "finite":
            raise ValueError(f"{int(word):#010x} is not finite: inf and NaN have no block encoding")
        fields.append((int(word) >> _FRACTION_BITS) & 0xFF)
    shared = max(max(fields), 1) - 127
    scale = shared - (mantissa_bits - 2)
    limit = (1 << (mantissa_bits - 1)) - 1
    mantissas = []
    for word in words:
        quotient = _scaled(_signed(word), -scale)
        mantissa = _nearest_even(quotient.numerator, quotient.denominator)
        mantissas.append(max(-limit, min(limit, mantissa)))
    return shared, mantissas


def _rows(matrix):
    """A 2-D matrix of raw binary32 words as a list of lists of ints."""
    dtype = getattr(matrix, "dtype", None)
    if dtype is not None and str(dtype) != "uint32":
        raise ValueError(f"operands are raw binary32 words (uint32), not dtype {dtype}")
    rows = [[int(x) for x in row] for row in matrix]
    if not rows or len({len(row) for row in rows}) != 1:
        raise ValueError("operands must be non-empty rectangular matrices")
    return rows


def block_fp_gemm_exact(a, b, d=None, *, block, mantissa_bits):
    """``d + a @ b`` in block floating point along K, exactly as the module docstring defines it.

    Parameters
    ----------
    a, b : 2-D sequences (or uint32 arrays) of raw binary32 words, (M, K) and (K, N), all finite
    d : 2-D sequence of raw binary32 words, (M, N), optional (any value, NaN and inf included)
    block, mantissa_bits : int

    Returns
    -------
    list of lists of int
        The result words, NaN canonical.
    """
    a_rows, b_rows = _rows(a), _rows(b)
    m_size, k_size, n_size = len(a_rows), len(b_rows), len(b_rows[0])
    if len(a_rows[0]) != k_size:
        raise ValueError(f"a is {m_size} x {len(a_rows[0])} but b has {k_size} rows")
    d_rows = _rows(d) if d is not None else [[0] * n_size for _ in range(m_size)]
    if len(d_rows) != m_size or len(d_rows[0]) != n_size:
        raise ValueError(f"d must be {m_size} x {n_size}")
    starts = range(0, k_size, block)
    # Scales (LSB exponents) and mantissas per block: A along its rows, B along its columns.
    a_blocks = [[encode_block(row[k0:k0 + block], mantissa_bits=mantissa_bits) for k0 in starts]
                for row in a_rows]
    b_blocks = [[encode_block([b_rows[k][j] for k in range(k0, min(k0 + block, k_size))],
                              mantissa_bits=mantissa_bits) for k0 in starts] for j in range(n_size)]
    offset = mantissa_bits - 2
    result = []
    for i in range(m_size):
        out = []
        for j in range(n_size):
            acc = d_rows[i][j]
            for t in range(len(starts)):
                shared_a, mantissas_a = a_blocks[i][t]
                shared_b, mantissas_b = b_blocks[j][t]
                block_sum = sum(x * y for x, y in zip(mantissas_a, mantissas_b, strict=True))
                acc = f32_add(acc, convert_block_sum(block_sum, shared_a + shared_b - 2 * offset))
            kind, _, _ = f32_value(acc)
            out.append(CANONICAL_NAN if kind == "nan" else acc)
        result.append(out)
    return result
