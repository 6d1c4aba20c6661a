"""golden.systolic numerics: the dense PE chain (gemm) and block floating point."""

import numpy as np
import pytest
import softfloatpy as sf

from golden.systolic.block_fp import block_fp_error_bound, block_fp_gemm, from_block_fp, to_block_fp
from golden.systolic.numerics import CANONICAL_NAN_F32, f32_from_bits, gemm, gemm_error_bound
from scripts.sim import knobs

FLOAT_ELEMENTS = ("f16", "bf16", "f32")


def _random_operand(rng, shape, element, spread=4.0):
    """Random finite operands of ``element`` as raw bits, with magnitudes over 2^+-spread."""
    values = rng.standard_normal(shape) * np.exp2(rng.uniform(-spread, spread, shape))
    if element == "f16":
        with np.errstate(over="ignore"):  # overflow to inf is a wanted special value
            return values.astype(np.float16).view(np.uint16)
    if element == "bf16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # truncation is fine here
    return values.astype(np.float32).view(np.uint32)


def _f32(value):
    return np.array([[value]], dtype=np.float32)


@pytest.mark.parametrize("element", FLOAT_ELEMENTS)
def test_gemm_within_derived_bound_of_float64(element):
    rng = knobs.rng(1)
    for _ in range(knobs.vectors(20)):
        m, k, n = rng.integers(1, 24, size=3)
        a, b = _random_operand(rng, (m, k), element), _random_operand(rng, (k, n), element)
        d = rng.standard_normal((m, n)).astype(np.float32)
        c = f32_from_bits(gemm(a, b, d, element=element)).astype(np.float64)
        widen = {"f16": lambda x: x.view(np.float16),
                 "bf16": lambda x: (x.astype(np.uint32) << 16).view(np.float32),
                 "f32": lambda x: x.view(np.float32)}[element]
        reference = widen(a).astype(np.float64) @ widen(b).astype(np.float64) + d
        bound = gemm_error_bound(a, b, d, element=element)
        assert np.all(np.abs(c - reference) <= bound), f"{element} {m}x{k}x{n} {knobs.describe(20)}"


def _softfloat_chain(a_bits, b_bits, d_bits, element):
    """Independent oracle: Berkeley SoftFloat, one scalar f32 multiply and add per step."""
    widen = {"f16": lambda v: sf.f16_to_f32(sf.Float16.from_bytes(int(v).to_bytes(2, "big"))),
             "bf16": lambda v: sf.bf16_to_f32(sf.BFloat16.from_bytes(int(v).to_bytes(2, "big"))),
             "f32": lambda v: sf.Float32.from_bytes(int(v).to_bytes(4, "big"))}[element]
    m, k = a_bits.shape
    out = np.zeros((m, b_bits.shape[1]), np.uint32)
    for i in range(m):
        for j in range(b_bits.shape[1]):
            acc = sf.Float32.from_bytes(int(d_bits[i, j]).to_bytes(4, "big"))
            for step in range(k):
                acc = sf.f32_add(acc, sf.f32_mul(widen(a_bits[i, step]), widen(b_bits[step, j])))
            out[i, j] = int.from_bytes(acc.to_bytes(), "big")
    return out


SPECIAL_F32 = np.array([0.0, -0.0, 1.0, -1.5, 3.4e38, 1e-40, -1e-45, 1.17549435e-38, np.inf, -np.inf, np.nan],
                       dtype=np.float32)


@pytest.mark.parametrize("element", FLOAT_ELEMENTS)
def test_gemm_bit_exact_against_softfloat(element):
    rng = knobs.rng(2)
    with np.errstate(over="ignore"):
        f16_specials = SPECIAL_F32.astype(np.float16).view(np.uint16)
    specials = {"f16": f16_specials,
                "bf16": (SPECIAL_F32.view(np.uint32) >> 16).astype(np.uint16),
                "f32": SPECIAL_F32.view(np.uint32)}[element]
    for _ in range(knobs.vectors(6)):
        m, k, n = rng.integers(1, 7, size=3)
        spread = 14 if element == "f16" else 70  # reach subnormal products and overflow
        a, b = _random_operand(rng, (m, k), element, spread), _random_operand(rng, (k, n), element, spread)
        # Sprinkle subnormals, zeros of both signs, infinities and NaNs into a few positions.
        for operand in (a, b):
            picks = rng.random(operand.shape) < 0.15
            operand[picks] = rng.choice(specials, size=picks.sum())
        d = SPECIAL_F32[rng.integers(0, 8, size=(m, n))].view(np.uint32)
        c = gemm(a, b, d, element=element)
        oracle = _softfloat_chain(a, b, d, element)
        nan = np.isnan(oracle.view(np.float32))
        assert np.array_equal(c[~nan], oracle[~nan]) and np.all(c[nan] == CANONICAL_NAN_F32), \
            f"{element} {m}x{k}x{n} {knobs.describe(6)}"


def test_gemm_accumulates_in_increasing_k():
    # Products 1, 2^-24, 2^-24. In order: 1 + 2^-24 is a tie that rounds to even (1), twice -> 1.0.
    # Any other association adds 2^-24 + 2^-24 = 2^-23 first and returns 1 + 2^-23.
    a = np.array([[1.0, 2.0**-12, 2.0**-12]], np.float32)
    assert f32_from_bits(gemm(a, a.T.copy(), element="f32"))[0, 0] == 1.0


def test_gemm_f32_rounds_product_then_sum():
    # (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46 rounds to 1 + 2^-22; adding d = -(1 + 2^-22) gives +0.0.
    # A fused multiply-add would return 2^-46.
    x = np.float32(1 + 2.0**-23)
    c = gemm(_f32(x), _f32(x), _f32(-(1 + 2.0**-22)), element="f32")
    assert c[0, 0] == 0


def test_gemm_bf16_product_overflow_and_underflow():
    def bf16(value):
        return np.array([[np.float32(value).view(np.uint32) >> 16]], np.uint16)
    # 2^100 * 2^100 = 2^200 overflows f32 to +inf.
    assert gemm(bf16(2.0**100), bf16(2.0**100), element="bf16")[0, 0] == 0x7F800000
    # (1.5 2^-75)^2 = 1.125 2^-149: the f32 subnormal grid step is 2^-149, so RNE gives 2^-149 (bits 1).
    assert gemm(bf16(1.5 * 2.0**-75), bf16(1.5 * 2.0**-75), element="bf16")[0, 0] == 1


def test_gemm_f16_products_are_exact_in_f32():
    rng = knobs.rng(3)
    bits = rng.integers(0, 0x7C00, size=knobs.vectors(20000), dtype=np.uint16)  # all finite f16 magnitudes
    x = bits.view(np.float16)
    y = np.roll(x, 1)
    exact = x.astype(np.float64) * y.astype(np.float64)
    assert np.array_equal(exact, (x.astype(np.float32) * y.astype(np.float32)).astype(np.float64)), \
        knobs.describe(20000)


def test_gemm_signed_zero_and_nan():
    minus_zero = np.array([[0x8000]], np.uint16)
    one = np.array([[0x3C00]], np.uint16)
    # d defaults to +0.0 and +0 + -0 = +0 under RNE; starting from d = -0.0 keeps -0.0.
    assert gemm(minus_zero, one, element="f16")[0, 0] == 0
    assert gemm(minus_zero, one, _f32(-0.0), element="f16")[0, 0] == 0x80000000
    inf = np.array([[0x7C00]], np.uint16)
    assert gemm(inf, np.array([[0]], np.uint16), element="f16")[0, 0] == CANONICAL_NAN_F32


def test_gemm_int8_exact_and_wrapping():
    rng = knobs.rng(4)
    m, k, n = 9, 300, 7
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    d = rng.integers(-2**20, 2**20, (m, n), dtype=np.int32)
    assert np.array_equal(gemm(a, b, d, element="int8"),
                          a.astype(np.int64) @ b.astype(np.int64) + d), knobs.describe()
    # 2^31 - 1 + 1 wraps to -2^31 in a 32-bit accumulator.
    top = np.array([[2**31 - 1]], np.int32)
    assert gemm(np.ones((1, 1), np.int8), np.ones((1, 1), np.int8), top, element="int8")[0, 0] == -2**31


@pytest.mark.parametrize("kwargs, match", [
    ({"a": np.zeros((2, 3), np.uint16), "b": np.zeros((4, 2), np.uint16)}, "b must"),
    ({"a": np.zeros((2, 3), np.float32), "b": np.zeros((3, 2), np.uint16)}, "a must be uint16"),
    ({"a": np.zeros((2, 3), np.uint16), "b": np.zeros((3, 2), np.uint16), "element": "fp8"}, "element must"),
    ({"a": np.zeros((2, 3), np.uint16), "b": np.zeros((3, 2), np.uint16), "d": np.zeros((3, 3))}, "d must"),
])
def test_gemm_rejects_bad_operands(kwargs, match):
    kwargs.setdefault("element", "f16")
    with pytest.raises(ValueError, match=match):
        gemm(**kwargs)


def test_block_fp_hand_example():
    # Block [1.0, 0.75, -0.5, 3.0], 4-bit mantissas: the largest exponent is 1 (3.0 = 1.5 2^1), so the
    # LSB weighs 2^(1 - 2) = 0.5 and the mantissas are RNE(x / 0.5) = [2, 1.5 -> 2, -1, 6].
    exponents, mantissas = to_block_fp(np.array([1.0, 0.75, -0.5, 3.0], np.float32), block=4, mantissa_bits=4)
    assert exponents.tolist() == [1] and mantissas.tolist() == [2, 2, -1, 6]
    # 1.99 has exponent 0, LSB 2^-2: 1.99 / 0.25 = 7.96 rounds to 8, which saturates to 2^3 - 1 = 7.
    # A zero block gets the smallest exponent, -126.
    exponents, mantissas = to_block_fp(np.array([1.99, 0.1, 0, 0], np.float32), block=2, mantissa_bits=4)
    assert exponents.tolist() == [0, -126] and mantissas.tolist() == [7, 0, 0, 0]


@pytest.mark.parametrize("mantissa_bits", [2, 4, 8, 16, 24])
def test_block_fp_round_trip_bounds(mantissa_bits):
    rng = knobs.rng(5)
    length = knobs.vectors(500)
    x = (rng.standard_normal((3, length)) * np.exp2(rng.uniform(-130, 100, (3, length)))).astype(np.float32)
    for block in (1, 7, 32):
        exponents, mantissas = to_block_fp(x, block=block, mantissa_bits=mantissa_bits, axis=1)
        decoded = from_block_fp(exponents, mantissas, block=block, mantissa_bits=mantissa_bits, axis=1)
        lsb_exponent = np.repeat(exponents - (mantissa_bits - 2), block, axis=1)[:, :length]
        step = np.exp2(lsb_exponent.astype(np.float64))
        limit = 2 ** (mantissa_bits - 1) - 1
        error = np.abs(decoded.astype(np.float64) - x)
        saturated = np.abs(mantissas) == limit
        assert np.all(error[~saturated] <= step[~saturated] / 2), knobs.describe(500)
        assert np.all(error <= step), knobs.describe(500)
        assert np.all(np.abs(mantissas) <= limit), knobs.describe(500)
        # Decoding is exact and encoding the decoded values gives the same words back.
        again = to_block_fp(decoded, block=block, mantissa_bits=mantissa_bits, axis=1)
        assert np.array_equal(again[0], exponents), knobs.describe(500)
        assert np.array_equal(again[1], mantissas), knobs.describe(500)


@pytest.mark.parametrize("mantissa_bits, block", [(8, 16), (12, 8), (16, 32), (24, 4)])
def test_block_fp_gemm_within_derived_bound(mantissa_bits, block):
    rng = knobs.rng(6)
    for _ in range(knobs.vectors(10)):
        m, k, n = rng.integers(1, 40, size=3)
        a = (rng.standard_normal((m, k)) * np.exp2(rng.uniform(-6, 6, (m, k)))).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        d = rng.standard_normal((m, n)).astype(np.float32)
        c = f32_from_bits(block_fp_gemm(a, b, d, block=block, mantissa_bits=mantissa_bits)).astype(np.float64)
        reference = a.astype(np.float64) @ b.astype(np.float64) + d
        bound = block_fp_error_bound(a, b, d, block=block, mantissa_bits=mantissa_bits)
        assert np.all(np.abs(c - reference) <= bound), f"{m}x{k}x{n} {knobs.describe(10)}"


def test_block_fp_gemm_exact_on_representable_inputs():
    # Small integers are exact BFP words at 12 bits and every block sum is exact in f32, so the only
    # rounding left is none at all: the result equals the integer product.
    rng = knobs.rng(7)
    a = rng.integers(-100, 101, (5, 19)).astype(np.float32)
    b = rng.integers(-100, 101, (19, 6)).astype(np.float32)
    a[:, 0] = 1000  # pin every block's exponent so small entries keep all their bits
    c = f32_from_bits(block_fp_gemm(a, b, block=19, mantissa_bits=12))
    assert np.array_equal(c, a.astype(np.int64) @ b.astype(np.int64)), knobs.describe()


@pytest.mark.parametrize("kwargs, match", [
    ({"block": 0, "mantissa_bits": 8}, "block must"),
    ({"block": 4, "mantissa_bits": 25}, "mantissa_bits must"),
    ({"block": 4, "mantissa_bits": 1}, "mantissa_bits must"),
])
def test_block_fp_rejects_bad_formats(kwargs, match):
    with pytest.raises(ValueError, match=match):
        to_block_fp(np.ones(4, np.float32), **kwargs)


def test_block_fp_rejects_non_finite_and_oversized_blocks():
    with pytest.raises(ValueError, match="finite"):
        to_block_fp(np.array([1.0, np.inf], np.float32), block=2, mantissa_bits=8)
    with pytest.raises(ValueError, match="block must be <="):
        # 256 (2^23 - 1)^2 > 2^53: block sums would not stay exact.
        block_fp_gemm(np.ones((1, 256), np.float32), np.ones((256, 1), np.float32), block=256,
                      mantissa_bits=24)
