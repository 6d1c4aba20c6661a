"""golden.fp against Berkeley SoftFloat: random, exhaustive and directed vectors, bits and flags.

The oracle, including how bf16 arithmetic, flush-to-zero and min/max are built from SoftFloat,
is described in :mod:`testbenches.fp.golden_oracle`. Every comparison is on raw result bits
and on the five flag bits. Fast tests use ``NEARTRAIN_VECTORS`` (default 20,000) random
vectors per operation, format and flush mode; the ``slow`` variants default to 1,000,000.
"""

import zlib

import numpy as np
import pytest
import softfloatpy as sf

import golden.fp as gfp
from golden.fp.formats import FloatFormat, float_format
from scripts.sim import knobs

from .golden_oracle import ARITHMETIC, COMPARISONS, oracle, oracle_convert, oracle_from_f64

FLOATS = ("f32", "f16", "bf16")
FLUSH = [pytest.param(False, id="ieee"), pytest.param(True, id="ftz")]
TWO_OPERANDS = ("add", "sub", "mul", "div", "min", "max") + COMPARISONS
ARITY = {"fma": 3, "sqrt": 1}
FAST_VECTORS, SLOW_VECTORS = 20_000, 1_000_000
SIZES = [pytest.param(FAST_VECTORS, id="fast"),
         pytest.param(SLOW_VECTORS, id="slow", marks=pytest.mark.slow)]
CONVERSIONS_16 = [(src, dst) for src in ("f16", "bf16") for dst in ("f32", "f16", "bf16", "i32", "u32")
                  if src != dst]
CONVERSIONS_RANDOM = [("f32", dst) for dst in ("f16", "bf16", "i32", "u32")] + [
    (src, dst) for src in ("i32", "u32") for dst in FLOATS]


def _rng(*labels):
    """A generator per test case, so that adding a case does not shift the others' vectors."""
    return knobs.rng(zlib.crc32(repr(labels).encode()))


def _golden(op, operands, fmt, flush):
    return getattr(gfp, op)(*operands, fmt=fmt, flush_subnormals=flush)


def _hex(value, digits):
    return f"0x{int(value) & ((1 << (4 * digits)) - 1):0{digits}x}"


def check(got, want, operands, label, default_vectors=None):
    """Fail with the first mismatching lanes if results or flags differ anywhere."""
    got_result, got_flags = (np.asarray(x).reshape(-1) for x in got)
    want_result, want_flags = (np.asarray(x).reshape(-1) for x in want)
    assert got_result.shape == want_result.shape, f"{label}: shape {got_result.shape} != {want_result.shape}"
    bad = np.flatnonzero((got_result != want_result) | (got_flags != want_flags))
    if bad.size:
        digits = 2 * np.asarray(operands[0]).dtype.itemsize
        lines = [f"  ({', '.join(_hex(np.asarray(x).reshape(-1)[i], digits) for x in operands)}): "
                 f"got {_hex(got_result[i], 8)} flags {got_flags[i]:#04x}, "
                 f"want {_hex(want_result[i], 8)} flags {want_flags[i]:#04x}" for i in bad[:12]]
        pytest.fail(f"{label}: {bad.size} of {got_result.size} vectors differ "
                    f"[{knobs.describe(default_vectors)}]\n" + "\n".join(lines))


def _check_op(op, operands, fmt, flush, default_vectors=None):
    check(_golden(op, operands, fmt, flush), oracle(op, operands, fmt, flush), operands,
          f"{op} {fmt} flush={flush}", default_vectors)


@pytest.mark.parametrize("default", SIZES)
@pytest.mark.parametrize("flush", FLUSH)
@pytest.mark.parametrize("fmt", FLOATS)
@pytest.mark.parametrize("op", TWO_OPERANDS + ("fma", "sqrt"))
def test_random(op, fmt, flush, default):
    operands = gfp.random_operand_tuples(_rng(op, fmt, flush), knobs.vectors(default), fmt, ARITY.get(op, 2))
    _check_op(op, operands, fmt, flush, default)


@pytest.mark.parametrize("default", SIZES)
@pytest.mark.parametrize("flush", FLUSH)
@pytest.mark.parametrize("src,dst", CONVERSIONS_RANDOM)
def test_random_convert(src, dst, flush, default):
    x = gfp.random_operands(_rng("convert", src, dst, flush), knobs.vectors(default), src)
    check(gfp.convert(x, src, dst, flush), oracle_convert(x, src, dst, flush), [x],
          f"convert {src}->{dst} flush={flush}", default)


@pytest.mark.parametrize("op", ARITHMETIC)
def test_bf16_oracle_construction_matches_softfloat_on_f16(op):
    """The round-to-odd path that stands in for bf16 arithmetic reproduces SoftFloat's own f16.

    f16 relates to its f32 intermediate as bf16 does (more than p + 2 extra bits, and every
    tininess boundary on the f32 grid), so agreement here, on bits and flags, checks the
    construction, fma included, independently of golden.fp.
    """
    n = knobs.vectors(FAST_VECTORS)
    operands = gfp.random_operand_tuples(_rng("emulate", op), n, "f16", ARITY.get(op, 2))
    check(oracle(op, operands, "f16", False, emulate=True), oracle(op, operands, "f16", False), operands,
          f"emulated {op} f16", FAST_VECTORS)


@pytest.mark.parametrize("flush", FLUSH)
@pytest.mark.parametrize("src,dst", CONVERSIONS_16)
def test_exhaustive_convert(src, dst, flush):
    x = np.arange(1 << 16, dtype=np.uint16)
    check(gfp.convert(x, src, dst, flush), oracle_convert(x, src, dst, flush), [x],
          f"convert {src}->{dst} flush={flush}")


@pytest.mark.parametrize("flush", FLUSH)
@pytest.mark.parametrize("fmt", ("f16", "bf16"))
def test_exhaustive_sqrt(fmt, flush):
    _check_op("sqrt", [np.arange(1 << 16, dtype=np.uint16)], fmt, flush)


def _directed_pairs(fmt):
    """Every directed value against every other, plus ties and range boundaries for add/sub."""
    fmt = float_format(fmt)
    specials = gfp.special_values(fmt)
    a, b = (x.reshape(-1) for x in np.meshgrid(specials, specials))
    m = fmt.mantissa_bits
    one = fmt.bias << m
    half_ulp_of_one = (fmt.bias - m - 1) << m
    half_ulp_of_max = (fmt.max_exponent_field - 2 - m) << m
    extra = [  # (a, b) for a + b
        (one, half_ulp_of_one), (one + 1, half_ulp_of_one), (one, half_ulp_of_one | (1 << (m - 1))),
        (fmt.max_finite, half_ulp_of_max), (fmt.max_finite, half_ulp_of_max - 1),
        (fmt.max_finite - 1, half_ulp_of_max), (fmt.max_finite, fmt.max_finite),
        (1 << m, 1 | fmt.sign_mask), ((1 << m) + 1, (1 << m) | fmt.sign_mask), (1, 1), (1 << m, 1),
        ((1 << m) - 1, 1), (one + 1, one | fmt.sign_mask), (one, (one - 1) | fmt.sign_mask),
    ]
    a = np.concatenate([a, [x for x, _ in extra]]).astype(specials.dtype)
    b = np.concatenate([b, [y for _, y in extra]]).astype(specials.dtype)
    return a, b


def _binade_sweep(fmt, rng):
    """Operands in the lowest and highest binades (and subnormals) times awkward scale factors.

    Multiplying or dividing them by 0.5, 1 +- ulp, 1.5, 2 - ulp, 3 lands results on both sides
    of the overflow and underflow thresholds, on subnormal ties, and on tininess-after-rounding
    cases (just below 2**emin, rounding up to it).
    """
    fmt = float_format(fmt)
    m, top = fmt.mantissa_bits, fmt.max_exponent_field
    fields = np.array([0, 1, 2, top - 2, top - 1, fmt.bias], dtype=np.uint64)
    fracs = np.arange(1 << m, dtype=np.uint64) if m <= 10 else rng.integers(0, 1 << m, 2048, dtype=np.uint64)
    a = ((fields[:, None] << np.uint64(m)) | fracs[None, :]).reshape(-1)
    a = np.concatenate([a, a | np.uint64(fmt.sign_mask)])
    one = fmt.bias << m
    scales = np.array([(fmt.bias - 1) << m, one - 1, one + 1, one | (1 << (m - 1)),
                       (fmt.bias + 1) << m, one | ((1 << m) - 1), ((fmt.bias + 1) << m) | (1 << (m - 1))],
                      dtype=np.uint64)
    a, b = (x.reshape(-1) for x in np.meshgrid(a, scales))
    dtype = gfp.special_values(fmt).dtype
    return a.astype(dtype), b.astype(dtype)


@pytest.mark.parametrize("flush", FLUSH)
@pytest.mark.parametrize("fmt", FLOATS)
@pytest.mark.parametrize("op", TWO_OPERANDS)
def test_directed_pairs(op, fmt, flush):
    _check_op(op, _directed_pairs(fmt), fmt, flush)


@pytest.mark.parametrize("flush", FLUSH)
@pytest.mark.parametrize("fmt", FLOATS)
@pytest.mark.parametrize("op", ("mul", "div", "add", "fma"))
def test_directed_boundaries(op, fmt, flush):
    a, b = _binade_sweep(fmt, _rng("sweep", fmt))
    # For fma, b also scales the addend: a * b - a exercises cancellation next to the thresholds.
    operands = [a, b, a ^ np.asarray(float_format(fmt).sign_mask, dtype=a.dtype)] if op == "fma" else [a, b]
    _check_op(op, operands, fmt, flush)


@pytest.mark.parametrize("flush", FLUSH)
@pytest.mark.parametrize("fmt", FLOATS)
def test_directed_fma_every_class(fmt, flush):
    specials = gfp.special_values(fmt)
    operands = [x.reshape(-1) for x in np.meshgrid(specials, specials, specials)]
    _check_op("fma", operands, fmt, flush)


@pytest.mark.parametrize("flush", FLUSH)
@pytest.mark.parametrize("fmt", FLOATS)
def test_fma_where_fused_differs(fmt, flush):
    """c = -round(a*b) makes fma return the product's rounding error, which mul-then-add loses."""
    rng = _rng("fused", fmt, flush)
    n = knobs.vectors(FAST_VECTORS)
    spec = float_format(fmt)
    m = spec.mantissa_bits
    fields = rng.integers(spec.bias - 4, spec.bias + 5, (2, n), dtype=np.uint64)
    a, b = ((fields << np.uint64(m)) | rng.integers(0, 1 << m, (2, n), dtype=np.uint64)).astype(
        gfp.special_values(fmt).dtype)
    product = oracle("mul", [a, b], fmt, flush)[0]
    c = product ^ np.asarray(spec.sign_mask, dtype=product.dtype)
    operands = [a, b, c]
    _check_op("fma", operands, fmt, flush, FAST_VECTORS)
    fused = oracle("fma", operands, fmt, flush)[0]
    unfused = oracle("add", [product, c], fmt, flush)[0]
    assert np.mean(fused != unfused) > 0.5, "the vectors should mostly have non-zero product rounding errors"


@pytest.mark.parametrize("fmt", FLOATS)
def test_classify_against_softfloat_and_numpy(fmt):
    bits = _all_or_random(fmt)
    values = _as_double(bits, fmt)
    tiny = np.finfo(np.float16 if fmt == "f16" else np.float32).tiny
    is_snan = getattr(sf, f"{'bf16' if fmt == 'bf16' else fmt}_is_signaling_nan")
    cls = {"f32": sf.Float32, "f16": sf.Float16, "bf16": sf.BFloat16}[fmt]
    nbytes = bits.dtype.itemsize
    raw = bits.astype(f">u{nbytes}").tobytes()
    snan = np.array([is_snan(cls.from_bytes(raw[i:i + nbytes])) for i in range(0, len(raw), nbytes)])
    magnitude_class = np.select(
        [np.isnan(values) & snan, np.isnan(values), np.isinf(values), values == 0, np.abs(values) < tiny],
        [gfp.FloatClass.SIGNALING_NAN, gfp.FloatClass.QUIET_NAN, gfp.FloatClass.POS_INF,
         gfp.FloatClass.POS_ZERO, gfp.FloatClass.POS_SUBNORMAL], gfp.FloatClass.POS_NORMAL)
    expected = np.where(np.signbit(values) & ~np.isnan(values), 7 - magnitude_class, magnitude_class)
    np.testing.assert_array_equal(gfp.classify(bits, fmt), expected)


def _as_double(bits, fmt):
    with np.errstate(invalid="ignore"):  # widening a signalling NaN trips the FPU's invalid flag
        return gfp.to_float(bits, fmt).astype(np.float64)


def _all_or_random(fmt):
    if fmt == "f32":
        return gfp.random_operands(_rng("values", fmt), knobs.vectors(FAST_VECTORS), fmt)
    return np.arange(1 << 16, dtype=np.uint16)


@pytest.mark.parametrize("fmt", FLOATS)
def test_from_float_rounds_once_from_float64(fmt):
    rng = _rng("from_float", fmt)
    n = knobs.vectors(FAST_VECTORS)
    # Doubles around the target's range and ties: widened target values plus small offsets.
    wide = _as_double(gfp.random_operands(rng, n, fmt), fmt).view(np.uint64)
    offsets = rng.choice(np.array([0, 1, 2 ** 28, 2 ** 29, 2 ** 41, 2 ** 42], dtype=np.uint64), n)
    doubles = np.concatenate([wide + offsets, rng.integers(0, 2 ** 64, n, dtype=np.uint64)]).view(np.float64)
    no_flags = np.zeros(doubles.size, dtype=np.uint8)
    check((gfp.from_float(doubles, fmt), no_flags), (oracle_from_f64(doubles.view(np.uint64), fmt), no_flags),
          [doubles.view(np.uint64)], f"from_float {fmt}", FAST_VECTORS)


@pytest.mark.parametrize("fmt", FLOATS)
def test_to_float_round_trips(fmt):
    bits = _all_or_random(fmt)
    nan = gfp.classify(bits, fmt) >= gfp.FloatClass.SIGNALING_NAN
    expected = np.where(nan, float_format(fmt).canonical_nan, bits)
    np.testing.assert_array_equal(gfp.from_float(gfp.to_float(bits, fmt), fmt), expected)


@pytest.mark.parametrize("fmt", FLOATS)
def test_random_operands_cover_every_case(fmt):
    # A check of proportions: it needs a sample of at least the default size.
    n = max(knobs.vectors(FAST_VECTORS), FAST_VECTORS)
    a, b, c = gfp.random_operand_tuples(_rng("coverage", fmt), n, fmt, 3)
    counts = np.bincount(gfp.classify(a, fmt), minlength=len(gfp.FloatClass))
    assert (counts > n // 500).all(), f"class counts {counts.tolist()}"
    spec = float_format(fmt)
    x, y = (_as_double(v, fmt) for v in (a, b))
    with np.errstate(all="ignore"):
        exact_sum, exact_product = x + y, x * y
    assert np.sum((exact_sum == 0) & (x != 0)) > n // 100, "too few exact cancellations"
    for name, exact in (("sum", exact_sum), ("product", exact_product)):
        # A tie has exactly p + 1 significant bits (in the normal range, where p bits are kept).
        ties = (_significant_bits(exact) == spec.precision + 1) & (np.abs(exact) >= 2.0 ** spec.emin)
        assert np.count_nonzero(ties) > n // 200, f"too few {name} ties: {np.count_nonzero(ties)}"
    _, flags = gfp.mul(a, b, fmt)
    for flag in (gfp.FLAG_UNDERFLOW, gfp.FLAG_OVERFLOW):
        assert np.count_nonzero(flags & flag) > n // 200, f"too few products raise flag {flag}"
    fused = gfp.fma(a, b, c, fmt)[0]
    unfused = gfp.add(gfp.mul(a, b, fmt)[0], c, fmt)[0]
    assert np.mean(fused != unfused) > 0.05


def _significant_bits(x):
    """Number of significant bits of finite float64 values (0 for zero, Inf and NaN)."""
    finite = np.isfinite(x) & (x != 0)
    significand, _ = np.frexp(np.where(finite, np.abs(x), 1.0))
    integer = (significand * 2.0 ** 53).astype(np.uint64)
    lowest = integer & (~integer + np.uint64(1))
    return np.where(finite, 53 - np.log2(lowest.astype(np.float64)).astype(np.int64), 0)


@pytest.mark.parametrize("kind", ("i32", "u32"))
def test_random_integers_cover_edges(kind):
    x = gfp.random_operands(_rng("integers", kind), max(knobs.vectors(FAST_VECTORS), FAST_VECTORS), kind)
    low, high = np.iinfo(x.dtype).min, np.iinfo(x.dtype).max
    for value in (0, 1, high, low, (1 << 24) + 1):
        assert np.any(x == value), f"{kind} operands never hit {value}"


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="fmt"):
        gfp.add(0, 0, fmt="f64")
    with pytest.raises(ValueError, match="a must hold raw f16 bits"):
        gfp.add(1 << 16, 0, fmt="f16")
    with pytest.raises(ValueError, match="b must hold raw f32 bits"):
        gfp.mul(0, 1.0)
    with pytest.raises(ValueError, match="dst"):
        gfp.convert(0, "f32", "i64")
    with pytest.raises(ValueError, match="both be integer"):
        gfp.convert(0, "i32", "u32")
    with pytest.raises(ValueError, match="x must hold u32"):
        gfp.convert(-1, "u32", "f32")
    with pytest.raises(ValueError, match="arity"):
        gfp.random_operand_tuples(np.random.default_rng(), 4, "f32", 4)
    with pytest.raises(ValueError, match="precision"):
        gfp.sqrt(0, fmt=FloatFormat("wide", 8, 30))


def test_scalars_and_broadcasting():
    one, two = 0x3F800000, 0x40000000
    bits, flags = gfp.add(one, np.array([one, two], dtype=np.uint32))
    np.testing.assert_array_equal(bits, [two, 0x40400000])
    assert bits.dtype == np.uint32 and flags.dtype == np.uint8
    bits, flags = gfp.div(one, 0)
    assert bits.shape == () and int(bits) == 0x7F800000 and int(flags) == gfp.FLAG_DIVIDE_BY_ZERO


def _rtl_configurations():
    from .tb import configuration_id, every_configuration

    return [pytest.param(block, params, id=f"{block}-{configuration_id(params)}")
            for block, params in every_configuration()]


def _oracle_for(block, params, operands):
    """SoftFloat's answer for the RTL configuration ``block``/``params`` (full parameters)."""
    flush = params["flush_subnormals"]
    if block in ("fp_convert", "fp_to_int", "int_to_fp"):
        source, target = {"fp_convert": (params.get("source"), params.get("target")),
                          "fp_to_int": (params.get("fmt"), params.get("integer")),
                          "int_to_fp": (params.get("integer"), params.get("fmt"))}[block]
        return oracle_convert(operands[0], source, target, flush)
    op = {"fp_add": "sub" if params.get("subtract") else "add", "fp_mul": "mul", "fp_fma": "fma",
          "fp_div": "div", "fp_sqrt": "sqrt"}.get(block) or params["operation"]
    return oracle(op, operands, params["fmt"], flush)


@pytest.mark.slow
@pytest.mark.parametrize("block,params", _rtl_configurations())
def test_rtl_vector_sets_against_softfloat(block, params):
    """golden.fp against SoftFloat on exactly the vectors the 10^6-vector RTL runs use.

    ``golden_match_parallel`` (``tb.py``) draws ``operand_vectors(binding, knobs.rng(0), NEARTRAIN_VECTORS)``;
    so does this test, so RTL == golden there and golden == SoftFloat here cover the same set.
    """
    from rtl.registry import get_block
    from scripts.sim.devices.fp import golden_binding, operand_vectors

    full = get_block(block).resolve(params)
    binding = golden_binding(block, full)
    operands = operand_vectors(binding, knobs.rng(0), knobs.vectors(SLOW_VECTORS))
    check(binding.evaluate(*operands), _oracle_for(block, full, operands), operands,
          f"{block} {params}", SLOW_VECTORS)
