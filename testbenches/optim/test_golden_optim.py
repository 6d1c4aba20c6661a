"""Tests of ``golden.optim``: the bit-exact optimizer models the RTL updaters follow.

Without torch: host scalars against hand-derived values, the binary32 FMA and every model
against a per-element SoftFloat transcription of its documented operation order, IEEE
special values, the mixed-precision edges and the exact gradient statistics. With torch
(an optional extra): 100-step parity with ``torch.optim`` judged against a float64
transcription of torch's documented algorithms, and a bit-identity check with torch once
torch's (not correctly rounded) square root is swapped in.

``python -m testbenches.optim.test_golden_optim [N STEPS]`` measures the figures of
docs/optim_golden.md: it writes the parity table (``scripts.flow.docs.write_table``) and prints
the rest.
"""

import math
import struct
import sys
import time
from fractions import Fraction

import numpy as np
import pytest
import softfloatpy as sf

import golden.optim as go
from golden.optim import _float32 as BINARY32
from scripts.sim import knobs
from testbenches.optim.golden_oracle import reference64

sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)


# ----------------------------------------------------------------------------- helpers
def _bits(values):
    return np.asarray(values, np.float32).view(np.uint32)


def _same_bits(actual, expected):
    """Bitwise equality where NaNs of any payload count as equal (golden NaNs are canonical)."""
    actual, expected = np.asarray(actual, np.float32), np.asarray(expected, np.float32)
    both_nan = np.isnan(actual) & np.isnan(expected)
    return (_bits(actual) == _bits(expected)) | both_nan


def _interesting_f32(rng, n):
    """float32 values over every class: random encodings (NaN, Inf, subnormal), specials, O(1)."""
    raw = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0**-149, -(2.0**-149),
                         2.0**-126, 3.4028235e38, -3.4028235e38], np.float32)
    pick = rng.integers(0, 3, n)
    return np.where(pick == 0, raw, np.where(pick == 1, rng.choice(specials, n),
                                             rng.standard_normal(n).astype(np.float32)))


def _sf32(value):
    return sf.Float32.from_bytes(struct.pack(">I", int(np.float32(value).view(np.uint32))))


def _sf_value(result):
    return np.uint32(int.from_bytes(result.to_bytes(), "big")).view(np.float32)


class _SoftFloat:
    """Per-element SoftFloat binary32 operations under the names the model docstrings use."""

    add, sub, mul, div, sqrt, fma = (sf.f32_add, sf.f32_sub, sf.f32_mul, sf.f32_div, sf.f32_sqrt,
                                     sf.f32_mul_add)


def _elementwise(transcription, *columns, **scalars):
    """Run ``transcription`` on each element with SoftFloat values; returns float32 arrays."""
    k = {name: _sf32(value) for name, value in scalars.items()}
    rows = [transcription(*(_sf32(c[i]) for c in columns), k) for i in range(len(columns[0]))]
    return [np.array([_sf_value(r[j]) for r in rows], np.float32) for j in range(len(rows[0]))]


def _assert_same_bits(names, got, expected, default_vectors):
    for name, actual, wanted in zip(names, got, expected, strict=True):
        ok = _same_bits(actual, wanted)
        assert ok.all(), f"{knobs.describe(default_vectors)}: {name} differs at {np.flatnonzero(~ok)[:5]}"


# ----------------------------------------------------------------------------- host scalars
def test_step_scalars_adam_hand_values():
    """bias corrections of steps 1 and 2 worked out by hand: 1 - 0.9 = 0.1, 1 - 0.81 = 0.19, ..."""
    hyper = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    step1, step2 = (go.step_scalars("adam", step=s, **hyper) for s in (1, 2))
    assert step1["neg_step_size"] == np.float32(-0.01)
    assert step2["neg_step_size"] == np.float32(-0.001 / 0.19)
    assert step1["bias_correction2_sqrt"] == np.float32(math.sqrt(0.001))
    assert step2["bias_correction2_sqrt"] == np.float32(math.sqrt(0.001999))
    assert step1["beta1_weight"] == np.float32(0.1) and step1["one_minus_beta2"] == np.float32(0.001)
    assert step1["decay_factor"] == 1 and step1["weight_decay"] == 0
    adamw = go.step_scalars("adam", step=1, **{**hyper, "weight_decay": 0.1}, decoupled=True)
    assert adamw["decay_factor"] == np.float32(0.9999) and adamw["weight_decay"] == 0
    # beta1 = 0.3: torch's lerp weight 0.7 rounds to 11744051 / 2**24; 1 - w is formed in float32.
    large = go.step_scalars("adam", step=1, **{**hyper, "betas": (0.3, 0.999)})
    assert large["beta1_weight"] == np.float32(-5033165 / 2**24)
    zero = go.step_scalars("adam", step=1, **{**hyper, "betas": (0.0, 0.999)})["beta1_weight"]
    assert zero == 0 and np.signbit(zero)


def test_step_scalars_sgd_adagrad_hand_values():
    sgd = go.step_scalars("sgd", step=5, lr=0.1, momentum=0.9, dampening=0.25, weight_decay=1e-4,
                          nesterov=False, grad_scale=0.5)
    assert sgd == {"grad_scale": np.float32(0.5), "weight_decay": np.float32(1e-4),
                   "momentum": np.float32(0.9), "one_minus_dampening": np.float32(0.75),
                   "neg_lr": np.float32(-0.1)}
    assert all(isinstance(v, np.float32) for v in sgd.values())
    adagrad = dict(lr=0.1, lr_decay=0.5, weight_decay=0.0, eps=1e-10)
    assert go.step_scalars("adagrad", step=1, **adagrad)["neg_clr"] == np.float32(-0.1)
    # 0.1 / (1 + 2 * 0.5) at step 3
    assert go.step_scalars("adagrad", step=3, **adagrad)["neg_clr"] == np.float32(-0.05)


@pytest.mark.parametrize("optimizer, hyper, parameter", [
    ("adam", dict(step=0), "step"),
    ("adam", dict(step=2**24 + 1), "step"),
    ("adam", dict(lr=-1.0), "lr"),
    ("adam", dict(betas=(1.0, 0.9)), r"betas\[0\]"),
    ("adam", dict(eps=float("nan")), "eps"),
    ("adam", dict(weight_decay=-0.1), "weight_decay"),
    ("adam", dict(grad_scale=0.0), "grad_scale"),
    ("sgd", dict(nesterov=True, momentum=0.0), "nesterov"),
    ("adagrad", dict(lr_decay=-1.0), "lr_decay"),
    ("lamb", {}, "optimizer"),
])
def test_step_scalars_rejects_out_of_range(optimizer, hyper, parameter):
    defaults = {"adam": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0),
                "sgd": dict(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=False),
                "adagrad": dict(lr=0.1, lr_decay=0.0, weight_decay=0.0, eps=1e-10)}.get(optimizer, {})
    arguments = {"step": 1, **defaults, **hyper}
    with pytest.raises(ValueError, match=parameter):
        go.step_scalars(optimizer, **arguments)


# ----------------------------------------------------------------------------- binary32 operations
def test_fma_matches_softfloat():
    rng = knobs.rng(1)
    n = knobs.vectors(4000)
    a, b, c = (_interesting_f32(rng, n) for _ in range(3))
    # Products that land exactly on a binary32 tie (1 + 2**-11 + 2**-24), nudged by a tiny addend:
    # a binary64 sum followed by a binary32 rounding gets these wrong.
    tie = np.float32(1 + 2.0**-12)
    a = np.concatenate([a, [tie] * 4, [np.float32(3e38), np.float32(2.0**-75)]]).astype(np.float32)
    b = np.concatenate([b, [tie] * 4, [np.float32(2.0), np.float32(2.0**-75)]]).astype(np.float32)
    c = np.concatenate([c, np.float32([2.0**-100, -(2.0**-100), 0.0, -(2.0**-60)]),
                        np.float32([-3e38, -(2.0**-149)])]).astype(np.float32)
    expected = _elementwise(lambda x, y, z, k: (sf.f32_mul_add(x, y, z),), a, b, c)
    _assert_same_bits(["fma"], [go.fma(a, b, c)], expected, 4000)


def test_fma_agrees_with_golden_fp():
    """The fast binary64 round-to-odd FMA used here equals golden.fp.fma, the RTL unit's model."""
    from golden import fp  # the project's own model: an ImportError is a failure, never a skip
    rng = knobs.rng(7)
    n = knobs.vectors(200_000)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    # Cancelling sums that once exposed a sticky-bit difference between the two models.
    a = np.concatenate([a, np.float32([0.4140625, -0.58654785]), _interesting_f32(rng, n // 4)])
    b = np.concatenate([b, np.float32([1.9858379, -0.22639084]), _interesting_f32(rng, n // 4)])
    c = np.concatenate([c, np.float32([-1.1744392, -0.14205316]), _interesting_f32(rng, n // 4)])
    reference, _flags = fp.fma(_bits(a), _bits(b), _bits(c))
    ok = _same_bits(go.fma(a, b, c), np.asarray(reference, np.uint32).view(np.float32))
    bad = np.flatnonzero(~ok)[:3]
    assert ok.all(), f"{knobs.describe(200_000)}: differs for a, b, c = {a[bad]}, {b[bad]}, {c[bad]}"


# ----------------------------------------------------------------------------- models vs SoftFloat
def _adam_transcription(decoupled, l2, lerp_from_grad):
    def step(p, g, m, v, k, f=_SoftFloat):
        g = f.mul(g, k["grad_scale"])
        if decoupled:
            p = f.mul(p, k["decay_factor"])
        elif l2:
            g = f.fma(p, k["weight_decay"], g)
        m = f.fma(f.sub(g, m), k["beta1_weight"], g if lerp_from_grad else m)
        v = f.fma(f.mul(g, k["one_minus_beta2"]), g, f.mul(v, k["beta2"]))
        den = f.add(f.div(f.sqrt(v), k["bias_correction2_sqrt"]), k["eps"])
        return f.add(p, f.div(f.mul(m, k["neg_step_size"]), den)), m, v
    return step


def _sgd_transcription(first_step, nesterov):
    def step(p, g, buf, k, f=_SoftFloat):
        g = f.fma(p, k["weight_decay"], f.mul(g, k["grad_scale"]))
        buf = g if first_step else f.fma(g, k["one_minus_dampening"], f.mul(buf, k["momentum"]))
        g = f.fma(buf, k["momentum"], g) if nesterov else buf
        return f.fma(g, k["neg_lr"], p), buf
    return step


def _adagrad_step(p, g, s, k, f=_SoftFloat):
    g = f.fma(p, k["weight_decay"], f.mul(g, k["grad_scale"]))
    s = f.fma(g, g, s)
    return f.add(p, f.div(f.mul(g, k["neg_clr"]), f.add(f.sqrt(s), k["eps"]))), s


@pytest.mark.parametrize("hyper", [
    dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, grad_scale=0.25),
    dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.1),
    dict(lr=1e-2, betas=(0.3, 0.9), eps=1e-8, weight_decay=0.1, decoupled=True),
], ids=["adam_scaled", "adam_l2", "adamw_large_lerp"])
def test_adam_matches_softfloat_transcription(hyper):
    rng = knobs.rng(2)
    n = knobs.vectors(300)
    p, g, m = (_interesting_f32(rng, n) for _ in range(3))
    v = np.abs(_interesting_f32(rng, n))
    got = go.adam(p, g, m, v, step=3, **hyper)
    k = go.step_scalars("adam", step=3, **hyper)
    transcription = _adam_transcription(hyper.get("decoupled", False), k["weight_decay"] != 0,
                                        np.signbit(k["beta1_weight"]))
    expected = _elementwise(transcription, p, g, m, v, **k)
    _assert_same_bits(("param", "exp_avg", "exp_avg_sq"), got, expected, 300)


@pytest.mark.parametrize("step", [1, 2])
@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_matches_softfloat_transcription(step, nesterov):
    rng = knobs.rng(3)
    n = knobs.vectors(300)
    p, g, buf = (_interesting_f32(rng, n) for _ in range(3))
    hyper = dict(lr=0.1, momentum=0.9, dampening=0.0 if nesterov else 0.3, weight_decay=1e-3,
                 nesterov=nesterov, grad_scale=2.0)
    got = go.sgd(p, g, buf, step=step, **hyper)
    k = go.step_scalars("sgd", step=step, **hyper)
    expected = _elementwise(_sgd_transcription(step == 1, nesterov), p, g, buf, **k)
    _assert_same_bits(("param", "momentum_buffer"), got, expected, 300)


def test_adagrad_matches_softfloat_transcription():
    rng = knobs.rng(4)
    n = knobs.vectors(300)
    p, g = (_interesting_f32(rng, n) for _ in range(2))
    s = np.abs(_interesting_f32(rng, n))
    hyper = dict(lr=0.1, lr_decay=0.01, weight_decay=1e-2, eps=1e-10, grad_scale=0.5)
    got = go.adagrad(p, g, s, step=7, **hyper)
    expected = _elementwise(_adagrad_step, p, g, s, **go.step_scalars("adagrad", step=7, **hyper))
    _assert_same_bits(("param", "state_sum"), got, expected, 300)


# ----------------------------------------------------------------------------- special values
def _all_models(p, g):
    zeros = np.zeros_like(p)
    return {
        "adam": go.adam(p, g, zeros, zeros, step=1, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0),
        "sgd": go.sgd(p, g, None, step=1, lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.0,
                      nesterov=False),
        "adagrad": go.adagrad(p, g, zeros, step=1, lr=0.1, lr_decay=0.0, weight_decay=0.0, eps=1e-10),
    }


def test_nan_gradient_gives_canonical_nan_everywhere():
    p = np.float32([1.5, -2.0])
    g = np.uint32([0xFFC00001, 0x7F800001]).view(np.float32)  # a negative qNaN and a signalling NaN
    assert go.nonfinite_gradient(g)
    for name, outputs in _all_models(p, g).items():
        for out in outputs:
            assert (_bits(out) == go.CANONICAL_NAN_BITS).all(), f"{name}: {_bits(out)}"


def test_infinite_gradient_follows_ieee():
    p, g = np.float32([1.0, 1.0]), np.float32([np.inf, -np.inf])
    assert go.nonfinite_gradient(g)
    out = _all_models(p, g)
    # SGD: param + inf * -lr = -inf for +inf. Adam and AdaGrad: -inf / inf in the update is NaN.
    assert np.array_equal(out["sgd"][0], np.float32([-np.inf, np.inf]))
    assert np.isnan(out["adam"][0]).all() and np.isnan(out["adagrad"][0]).all()
    assert np.array_equal(out["adam"][1], g) and np.isposinf(out["adam"][2]).all()


def test_zero_weight_decay_is_skipped():
    """As in torch, weight_decay == 0 skips the L2 term: Inf params give no NaN, -0 stays -0."""
    p, g = np.float32([np.inf, 0.0]), np.float32([1.0, -0.0])
    p1, buf = go.sgd(p, g, None, step=1, lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.0,
                     nesterov=False)
    assert np.array_equal(_bits(buf), _bits([1.0, -0.0])) and np.isposinf(p1[0])
    adam_p, _m, _v = go.adam(p, g, np.zeros(2, np.float32), np.zeros(2, np.float32), step=1, lr=1e-3,
                             betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    assert np.isposinf(adam_p[0])


def test_subnormals_are_not_flushed():
    tiny = np.float32(2.0**-149)
    p, buf = go.sgd(np.float32([0.0, tiny]), np.float32([tiny, -tiny]), None, step=1, lr=1.0, momentum=0.0,
                    dampening=0.0, weight_decay=0.0, nesterov=False)
    assert np.array_equal(_bits(p), _bits([-tiny, 2 * tiny])) and buf is None
    assert not go.nonfinite_gradient(np.float32([tiny, 3.4028235e38, -0.0]))


def test_models_leave_inputs_untouched_and_check_arrays():
    rng = knobs.rng(5)
    p, g, m, v = (rng.standard_normal(64).astype(np.float32) for _ in range(4))
    copies = [a.copy() for a in (p, g, m, v)]
    go.adam(p, g, m, np.abs(v), step=2, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    go.sgd(p, g, m, step=2, lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.1, nesterov=True)
    assert all(np.array_equal(a, b) for a, b in zip((p, g, m), copies[:3], strict=True))
    with pytest.raises(ValueError, match="grad"):
        go.adagrad(p, g.astype(np.float64), m, step=1, lr=0.1, lr_decay=0.0, weight_decay=0.0, eps=1e-10)
    with pytest.raises(ValueError, match="exp_avg"):
        go.adam(p, g, m[:10], v, step=1, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    with pytest.raises(ValueError, match="momentum_buffer"):
        go.sgd(p, g, None, step=2, lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=False)


# ----------------------------------------------------------------------------- mixed precision
@pytest.mark.parametrize("fmt, widen", [("f16", sf.f16_to_f32), ("bf16", sf.bf16_to_f32)])
def test_gradient_widening_is_exact_for_every_code(fmt, widen):
    codes = np.arange(1 << 16, dtype=np.uint16)
    source = sf.Float16 if fmt == "f16" else sf.BFloat16
    expected = np.array([_sf_value(widen(source.from_bytes(int(c).to_bytes(2, "big")))) for c in codes],
                        np.float32)
    got = go.gradient_to_f32(codes, fmt)
    assert _same_bits(got, expected).all() and (_bits(got[np.isnan(got)]) == go.CANONICAL_NAN_BITS).all()
    if fmt == "f16":
        assert np.array_equal(_bits(go.gradient_to_f32(codes.view(np.float16), fmt)), _bits(got))
    with pytest.raises(ValueError, match="gradient"):
        go.gradient_to_f32(codes.astype(np.int32), fmt)


@pytest.mark.parametrize("fmt", go.COPY_FORMATS)
def test_param_copy_16_rounds_to_nearest_even(fmt):
    rng = knobs.rng(6)
    values = _interesting_f32(rng, knobs.vectors(3000))
    # Exact halfway points between adjacent f16 (bf16) values, in both tie directions.
    step = 13 if fmt == "f16" else 16
    ties = (np.uint32([0x3F800000, 0x3F802000, 0x47000000]) + np.uint32(1 << (step - 1))).view(np.float32)
    values = np.concatenate([values, ties, -ties, np.float32([65520.0, 65519.99, 1e-8])])
    got = go.param_copy_16(values, fmt)
    narrow = sf.f32_to_f16 if fmt == "f16" else sf.f32_to_bf16
    expected = np.array([int.from_bytes(narrow(_sf32(x)).to_bytes(), "big") for x in values], np.uint16)
    nan = np.isnan(values)
    assert np.array_equal(got[~nan], expected[~nan]), knobs.describe(3000)
    canonical = {"f16": 0x7E00, "bf16": 0x7FC0}[fmt]
    assert (got[nan] == canonical).all()


# ----------------------------------------------------------------------------- gradient statistics
def _exact_sum_of_squares(values):
    return sum((Fraction(float(x)) ** 2 for x in values if np.isfinite(x)), Fraction(0))


def test_statistics_are_exact_against_fractions():
    rng = knobs.rng(8)
    values = np.concatenate([_interesting_f32(rng, knobs.vectors(2000)),
                             np.float32([3.4028235e38, -3.4028235e38, 2.0**-149, -(2.0**-149), 0.0])])
    stats = go.gradient_statistics(values)
    exact = _exact_sum_of_squares(values)
    assert Fraction(stats.accumulator, 1 << go.ACCUMULATOR_FRACTION_BITS) == exact, knobs.describe(2000)
    assert stats.sum_of_squares == float(exact)  # Fraction -> float rounds to nearest even
    assert stats.nan_count == int(np.isnan(values).sum()) and stats.inf_count == int(np.isinf(values).sum())


def test_statistics_accumulator_bounds():
    """The smallest square is the accumulator's LSB; 2**32 of the largest fit the documented width."""
    assert go.gradient_statistics(np.float32([2.0**-149])).accumulator == 1
    largest = go.gradient_statistics(np.float32([-3.4028235e38])).accumulator
    assert (largest << 32).bit_length() <= go.ACCUMULATOR_WIDTH == 586
    assert go.gradient_statistics(np.float32([np.nan, np.inf, -np.inf])) == (1, 2, 0.0, 0)


def test_statistics_ignore_order_and_chunking():
    rng = knobs.rng(9)
    n = knobs.vectors(100_000)
    grad = _interesting_f32(rng, n)
    whole = go.gradient_statistics(grad)
    assert go.gradient_statistics(rng.permutation(grad)) == whole, knobs.describe(100_000)
    cuts = np.sort(rng.integers(0, n, 7))
    chunks = [go.gradient_statistics(chunk) for chunk in np.split(grad, cuts)]
    merged = [sum(column) for column in zip(*chunks, strict=True)]
    assert (merged[0], merged[1], merged[3]) == (whole.nan_count, whole.inf_count, whole.accumulator)


def test_statistics_close_to_float64_sum():
    rng = knobs.rng(10)
    n = knobs.vectors(100_000)
    grad = (rng.standard_normal(n) * 2.0 ** rng.uniform(-60, 60, n)).astype(np.float32)
    float64_sum = float(np.sum(grad.astype(np.float64) ** 2))
    exact = go.gradient_statistics(grad).sum_of_squares
    # Each float64 square is exact; the float64 sum's error is below n * 2**-53 of the sum.
    assert abs(float64_sum - exact) <= n * 2.0**-53 * exact, knobs.describe(100_000)


def test_nonfinite_gradient_status():
    assert go.STATUS_NONFINITE_GRADIENT == 1
    assert not go.nonfinite_gradient(np.float32([0.0, -0.0, 2.0**-149, 3.4028235e38]))
    assert go.nonfinite_gradient(np.float32([1.0, np.nan])) and go.nonfinite_gradient(np.float32([-np.inf]))
    assert go.nonfinite_gradient(go.gradient_to_f32(np.uint16([0x3C00, 0x7C00]), "f16"))
    with pytest.raises(ValueError, match="grad_f32"):
        go.nonfinite_gradient([1.0, 2.0])


# ----------------------------------------------------------------------------- torch parity
# name: (optimizer, golden keywords, extra torch keywords). Adam configurations with beta1 <= 0.5
# take torch's other lerp formula; AdaGrad's initial accumulator is its initial state.
CONFIGS = {
    "adam": ("adam", dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0), {}),
    "adam_l2": ("adam", dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2), {}),
    "adamw": ("adam", dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, decoupled=True), {}),
    "adamw_beta1_0.3": ("adam", dict(lr=1e-2, betas=(0.3, 0.99), eps=1e-8, weight_decay=0.1,
                                     decoupled=True), {}),
    "sgd": ("sgd", dict(lr=1e-2, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False), {}),
    "sgd_momentum": ("sgd", dict(lr=1e-2, momentum=0.9, dampening=0.1, weight_decay=1e-3,
                                 nesterov=False), {}),
    "sgd_nesterov": ("sgd", dict(lr=1e-2, momentum=0.9, dampening=0.0, weight_decay=1e-3, nesterov=True), {}),
    "adagrad": ("adagrad", dict(lr=0.05, lr_decay=1e-3, weight_decay=1e-2, eps=1e-10),
                dict(initial_accumulator_value=0.1)),
}


def _training_gradient(rng, n):
    """Gradients over 130 binades: 10% zeros, 5% random subnormals, the rest 2**[-126, 4]."""
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    grad = (sign * 2.0 ** rng.uniform(-126, 4, n)).astype(np.float32)
    kind = rng.random(n)
    subnormal = (rng.integers(1, 1 << 23, n, dtype=np.uint32) | (sign < 0).astype(np.uint32) << 31)
    grad = np.where(kind < 0.05, subnormal.view(np.float32), grad)
    return np.where(kind > 0.9, np.float32(0), grad).astype(np.float32)


def _trajectories(name, n, steps, seed_salt=11):
    """Run golden, torch and the float64 reference for ``steps`` steps on the same gradients."""
    import torch

    optimizer, hyper, torch_extra = CONFIGS[name]
    rng = knobs.rng(seed_salt)
    p0 = (np.where(rng.random(n) < 0.5, -1.0, 1.0) * 2.0 ** rng.uniform(-12, 8, n)).astype(np.float32)
    torch_param = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    torch_hyper = {k: v for k, v in hyper.items() if k != "decoupled"} | torch_extra
    torch_class = {"adam": torch.optim.AdamW if hyper.get("decoupled") else torch.optim.Adam,
                   "sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad}[optimizer]
    torch_opt = torch_class([torch_param], foreach=False, **torch_hyper)
    init = np.float32(torch_extra.get("initial_accumulator_value", 0.0))
    golden_state = {"adam": [np.zeros(n, np.float32)] * 2, "sgd": [None],
                    "adagrad": [go.adagrad_init_state(n, init)]}[optimizer]
    model = {"adam": go.adam, "sgd": go.sgd, "adagrad": go.adagrad}[optimizer]
    ref_state = {"m": 0.0, "v": 0.0, "s": np.full(n, float(init)), "b": None}
    golden, reference = p0, p0.astype(np.float64)
    for step in range(1, steps + 1):
        grad = _training_gradient(rng, n)
        torch_param.grad = torch.from_numpy(grad.copy())
        torch_opt.step()
        golden, *golden_state = model(golden, grad, *golden_state, step=step, **hyper)
        reference = reference64(optimizer, hyper, reference, grad.astype(np.float64), ref_state, step)
    return golden, torch_param.detach().numpy().copy(), reference


def _ulp_distance(a, b):
    """Number of binary32 values between ``a`` and ``b`` (both zeros count as one point)."""
    def ordered(x):
        signed = _bits(x).view(np.int32).astype(np.int64)
        return np.where(signed < 0, -(signed & 0x7FFFFFFF), signed)
    return np.abs(ordered(a) - ordered(b))


def _torch_sqrt(values):
    import torch

    return torch.from_numpy(np.ascontiguousarray(values)).sqrt().numpy()


def _check_parity(name, n, steps):
    golden, torch_result, reference = _trajectories(name, n, steps)
    assert np.isfinite(golden).all() and np.isfinite(torch_result).all()
    golden_error = np.abs(golden - reference)
    allowed = np.maximum(2 * np.abs(torch_result - reference), 1e-6 * np.maximum(1, np.abs(reference)))
    bad = np.flatnonzero(golden_error > allowed)
    assert bad.size == 0, (f"{knobs.describe(n)} {name}: {bad.size} elements beyond the rule, e.g. golden "
                           f"{golden[bad[:3]]} torch {torch_result[bad[:3]]} float64 {reference[bad[:3]]}")


@pytest.mark.parametrize("name", CONFIGS)
def test_torch_parity(name):
    """Golden is as close to float64 as torch is (fast size; the slow test runs the full size)."""
    knobs.oracle("torch", "torch is the parity oracle: pip install torch==2.13.0")
    _check_parity(name, knobs.vectors(8192), 40)


@pytest.mark.slow
@pytest.mark.parametrize("name", CONFIGS)
def test_torch_parity_full(name):
    knobs.oracle("torch", "torch is the parity oracle: pip install torch==2.13.0")
    _check_parity(name, max(knobs.vectors(100_000), 100_000), 100)


@pytest.mark.parametrize("name", CONFIGS)
def test_torch_bit_identical_with_torch_sqrt(name, monkeypatch):
    """With torch's own square root swapped in, every other operation matches torch bit for bit.

    torch's vectorised CPU sqrt is not correctly rounded (the golden model, like the RTL, is),
    and only torch's AVX2/AVX512 kernels fuse multiply-adds as the golden model does.
    """
    torch = knobs.oracle("torch", "torch is the parity oracle: pip install torch==2.13.0")
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("torch's non-AVX2 CPU kernels do not fuse multiply-adds")
    monkeypatch.setattr(BINARY32, "sqrt", _torch_sqrt)
    n = knobs.vectors(8192)
    golden, torch_result, _ = _trajectories(name, n, 40)
    differ = np.flatnonzero(_bits(golden) != _bits(torch_result))
    assert differ.size == 0, f"{knobs.describe(8192)} {name}: {differ.size} differ, e.g. at {differ[:5]}"


# ----------------------------------------------------------------------------- figures for the docs
PARITY_HEADERS = ["config", "golden = torch", "max abs", "max ulp", "99.9% ulp", "golden-f64", "torch-f64",
                  "rule use", "= torch, torch sqrt"]


def _measure(n=100_000, steps=100):
    """Write the parity table of docs/optim_golden.md (``optim-golden-parity``); print the other figures."""
    import torch

    from scripts.flow.docs import write_table

    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"NEARTRAIN_SEED={knobs.seed()}, {n} elements, {steps} steps\n")
    rows = []
    for name in CONFIGS:
        golden, torch_result, reference = _trajectories(name, n, steps)
        scale = np.maximum(1, np.abs(reference))
        allowed = np.maximum(2 * np.abs(torch_result - reference), 1e-6 * scale)
        ulps = _ulp_distance(golden, torch_result)
        ieee_sqrt, BINARY32.sqrt = BINARY32.sqrt, _torch_sqrt
        swapped, _, _ = _trajectories(name, n, steps)
        BINARY32.sqrt = ieee_sqrt
        rows.append([name, f"{np.mean(ulps == 0):.2%}", f"{np.abs(golden - torch_result).max():.3g}",
                     int(ulps.max()), f"{np.percentile(ulps, 99.9):.0f}",
                     f"{np.max(np.abs(golden - reference) / scale):.3g}",
                     f"{np.max(np.abs(torch_result - reference) / scale):.3g}",
                     f"{np.max(np.abs(golden - reference) / allowed):.2f}",
                     f"{np.mean(_bits(swapped) == _bits(torch_result)):.2%}"])
        print(rows[-1], flush=True)
    command = (f"NEARTRAIN_SEED={knobs.seed()} " if knobs.seed() != 1 else "") + (
        ".venv/bin/python -m testbenches.optim.test_golden_optim") + (
        f" {n} {steps}" if (n, steps) != (100_000, 100) else "")
    write_table("optim_golden.md", "optim-golden-parity", PARITY_HEADERS, rows, command,
                colalign=("left",) + ("right",) * 8, disable_numparse=True)
    print("wrote docs/optim_golden.md (optim-golden-parity)")
    values = np.abs(_interesting_f32(knobs.rng(12), 1_000_000))
    values = values[np.isfinite(values)]
    ulps = _ulp_distance(_torch_sqrt(values), np.sqrt(values))
    print(f"\ntorch.sqrt vs IEEE sqrt on {values.size} finite float32: {np.mean(ulps == 0):.2%} equal, "
          f"max {ulps.max()} ulp")
    rng = knobs.rng(13)
    for label, grad in (("N(0, 1)", rng.standard_normal(1_000_000).astype(np.float32)),
                        ("training mix", _training_gradient(rng, 1_000_000))):
        start = time.perf_counter()
        stats = go.gradient_statistics(grad)
        elapsed = time.perf_counter() - start
        float64_sum = float(np.sum(grad.astype(np.float64) ** 2))
        print(f"gradient_statistics, 10**6 {label}: {elapsed:.3f} s; |np.sum(float64 squares) - exact| "
              f"/ exact = {abs(float64_sum - stats.sum_of_squares) / stats.sum_of_squares:.3g}")


if __name__ == "__main__":
    _measure(*(int(arg) for arg in sys.argv[1:3]))
