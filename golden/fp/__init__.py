"""Bit-exact NumPy model of NearTrain's floating-point units (f32, f16, bf16).

Every function takes and returns raw encodings (uint32 for f32, uint16 for f16 and bf16;
scalars and arrays broadcast) and returns ``(result, flags)``. ``flags`` is a uint8 array of
SoftFloat's exception bits: inexact 1, underflow 2, overflow 4, divide-by-zero 8, invalid 16
(``FLAG_*`` below). Everything is integer NumPy arithmetic on uint64/int64 lanes: about 0.1 s
of CPU per million operations, 0.25 s for fma, 0.02 s for comparisons and min/max.

Operation order
---------------
1. Check and broadcast the operands, then unpack them into sign, exponent and a significand
   with the hidden bit made explicit; subnormals are normalised (``core.unpack``). With
   ``flush_subnormals=True`` subnormal inputs are read as zeros of the same sign, raising
   nothing.
2. Compute the exact result as an integer significand times a power of two, plus a sticky bit
   where bits were lost: add/sub/fma align both terms with 61-bit headroom (the fma product is
   the exact 2p-bit integer product), mul multiplies, div divides with p + 2 extra quotient
   bits and a remainder, sqrt takes an integer square root with p + 2 extra root bits and a
   remainder. The sticky bit never sits near the rounding point, so the result rounds exactly
   as the infinitely precise one would.
3. Round once (``core.round_pack``) to the result precision at the result's exponent (coarser
   in the subnormal range): round to nearest, ties to even. Inexact if any bit was lost.
   Overflow gives ±Inf with overflow and inexact. Tininess is detected after rounding, as on
   x86 and in RISC-V SoftFloat: the result is tiny if rounding it to p bits with an unbounded
   exponent gives a magnitude below 2**emin; underflow is raised when tiny and inexact.
   With ``flush_subnormals=True`` a non-zero result whose rounded encoding is subnormal becomes
   a zero of the same sign and raises underflow and inexact (results that round up to the
   smallest normal are kept, with the flags of the default mode).
4. Special operands override the finite path, later rules winning: Inf arithmetic; ``0 * Inf``,
   ``Inf - Inf``, ``0/0``, ``Inf/Inf`` and sqrt of a negative non-zero are invalid; a finite
   non-zero divided by zero is a signed Inf with divide-by-zero. Any NaN operand gives the
   canonical NaN (0x7FC00000, 0x7E00, 0x7FC0: sign 0, quiet bit only) with invalid if any
   operand is a signalling NaN; NaN payloads are never propagated. fma raises invalid for
   ``Inf * 0 + c`` even when ``c`` is a quiet NaN (SoftFloat).
5. Signs of zeros: an exact zero sum is +0 unless both terms are -0; ``sqrt(-0) = -0``;
   products and quotients take the xor of the signs.

Comparisons return booleans: ``eq``, ``lt_quiet`` and ``le_quiet`` raise invalid only for a
signalling NaN, ``lt`` and ``le`` for any NaN; NaNs compare false; ``-0 == +0``. ``min`` and
``max`` are IEEE 754-2019 minimumNumber/maximumNumber as RISC-V fmin/fmax: a NaN and a number
give the number, two NaNs the canonical NaN, signalling NaNs raise invalid, -0 < +0.
``convert`` covers f32/f16/bf16 among themselves and to and from i32/u32 (float to integer
rounds to nearest even, raises inexact, and saturates with invalid to the RISC-V values).

This is the RISC-V flavour of Berkeley SoftFloat 3e, which is what ``softfloatpy`` is built
as; the tests in ``testbenches/fp/test_golden_fp.py`` check every operation against it.
"""

from .arith import add, div, fma, mul, sqrt, sub
from .compare import eq, le, le_quiet, lt, lt_quiet, max, min
from .convert import INTEGER_FORMATS, convert
from .core import FLAG_DIVIDE_BY_ZERO, FLAG_INEXACT, FLAG_INVALID, FLAG_OVERFLOW, FLAG_UNDERFLOW
from .values import FloatClass, classify, from_float, to_float
from .vectors import random_operand_tuples, random_operands, special_values

__all__ = [
    "add", "sub", "mul", "div", "fma", "sqrt",
    "eq", "lt", "le", "lt_quiet", "le_quiet", "min", "max",
    "convert", "INTEGER_FORMATS",
    "classify", "FloatClass", "to_float", "from_float",
    "random_operands", "random_operand_tuples", "special_values",
    "FLAG_INEXACT", "FLAG_UNDERFLOW", "FLAG_OVERFLOW", "FLAG_DIVIDE_BY_ZERO", "FLAG_INVALID",
]
