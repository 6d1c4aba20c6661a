"""Tests of ``widening_multiplier`` (:class:`rtl.systolic.widening_multiplier.WideningMultiplier`).

The block multiplies two f16 (or two bf16) operands into a binary32 result rounded to nearest
even, with SoftFloat's flags. Its golden model is :mod:`golden.fp`: the exact widening
``convert(x, fmt, "f32")`` of both operands (whose invalid flag marks a signalling NaN) and an
f32 ``mul``. That golden is itself checked here against two oracles it shares no code with: exact
Python integer arithmetic on the operands' significands and exponents, rounded once
(:func:`exact_product`), and NumPy's float32 multiplication of the widened values (the product
:func:`golden.systolic.gemm` uses).

The cocotb tests cover every operand encoding (each of the 65,536 as ``a`` and as ``b``), every
pair of sign and exponent fields with random significands (where bf16 products overflow,
underflow and round onto the subnormal grid), and corner-heavy random pairs with random valid
gaps and backpressure, plus a reset in the middle of a stream. The pytest runners are at the
bottom of this file.
"""

import cocotb
import numpy as np
import pytest
from cocotb.triggers import with_timeout

from golden.fp import FLAG_INEXACT, FLAG_INVALID, FLAG_OVERFLOW, FLAG_UNDERFLOW, convert, mul
from golden.fp.vectors import random_operand_tuples, special_values
from golden.systolic.numerics import decode_to_f32, f32_bits
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import CLOCK_PERIOD_NS, ClockedTB, Scoreboard

PAUSE = 0.3
DEFAULT_RANDOM = 2000
# (exponent bits, mantissa bits) of the operand formats.
FORMATS = {"f16": (5, 10), "bf16": (8, 7)}
CANONICAL_NAN = 0x7FC00000


# ---------------------------------------------------------------- the golden product and its oracle

def golden_product(a, b, fmt):
    """``(result bits, flags)`` arrays from :mod:`golden.fp`: widen both operands exactly, multiply in f32."""
    a32, a_flags = convert(np.asarray(a, np.uint16), fmt, "f32")
    b32, b_flags = convert(np.asarray(b, np.uint16), fmt, "f32")
    result, flags = mul(a32, b32, "f32")
    # Widening a signalling NaN is what raises invalid (it also quiets the NaN for mul).
    return result, flags | ((a_flags | b_flags) & FLAG_INVALID)


def _decode(bits, fmt):
    """``(kind, sign, significand, exponent)`` of a raw operand: value = significand * 2**exponent."""
    exponent_bits, mantissa_bits = FORMATS[fmt]
    sign = bits >> (exponent_bits + mantissa_bits)
    field = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    fraction = bits & ((1 << mantissa_bits) - 1)
    bias = (1 << (exponent_bits - 1)) - 1
    if field == (1 << exponent_bits) - 1:
        if not fraction:
            return "inf", sign, 0, 0
        return ("qnan" if fraction >> (mantissa_bits - 1) else "snan"), sign, 0, 0
    if field == 0:
        return ("zero" if not fraction else "finite"), sign, fraction, 1 - bias - mantissa_bits
    return "finite", sign, fraction | (1 << mantissa_bits), field - bias - mantissa_bits


def _round_half_even(numerator, shift):
    """``numerator / 2**shift`` rounded to nearest even, and whether it was inexact (shift may be <= 0)."""
    if shift <= 0:
        return numerator << -shift, False
    quotient, remainder = numerator >> shift, numerator & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    if remainder > half or (remainder == half and quotient & 1):
        quotient += 1
    return quotient, remainder != 0


def exact_product(a, b, fmt):
    """The f32 product of raw operands ``a`` and ``b`` by exact integer arithmetic, rounded once.

    Independent of :mod:`golden.fp`: the significands are multiplied as Python integers, the result is
    rounded to nearest even on the f32 grid (24 bits, or the subnormal quantum 2**-149), overflow gives
    infinity, underflow is tininess after rounding (as SoftFloat's RISC-V build) and inexact.
    Returns ``(bits, flags)``.
    """
    kind_a, sign_a, sig_a, exp_a = _decode(a, fmt)
    kind_b, sign_b, sig_b, exp_b = _decode(b, fmt)
    sign = (sign_a ^ sign_b) << 31
    kinds = {kind_a, kind_b}
    if kinds & {"snan", "qnan"}:
        return CANONICAL_NAN, FLAG_INVALID if "snan" in kinds else 0
    if kinds == {"inf", "zero"}:
        return CANONICAL_NAN, FLAG_INVALID
    if "inf" in kinds:
        return sign | 0x7F800000, 0
    if "zero" in kinds:
        return sign, 0
    product, exponent = sig_a * sig_b, exp_a + exp_b
    top = exponent + product.bit_length() - 1          # weight of the leading bit: 2**top
    # Tininess after rounding: round to 24 bits with an unbounded exponent first.
    unbounded, _ = _round_half_even(product, product.bit_length() - 24)
    tiny = top + (unbounded.bit_length() - min(product.bit_length(), 24)) < -126
    quantum = max(top - 23, -149)                       # the f32 grid at this magnitude
    rounded, inexact = _round_half_even(product, quantum - exponent)
    flags = FLAG_INEXACT if inexact else 0
    if tiny and inexact:
        flags |= FLAG_UNDERFLOW
    if rounded == 0:
        return sign, flags
    length = rounded.bit_length()
    leading = quantum + length - 1
    if leading > 127:
        return sign | 0x7F800000, FLAG_OVERFLOW | FLAG_INEXACT
    if leading < -126:                                  # subnormal: quantum is 2**-149
        return sign | rounded, flags
    mantissa = rounded >> (length - 24) if length > 24 else rounded << (24 - length)
    return sign | ((leading + 127) << 23) | (mantissa & 0x7FFFFF), flags


def every_code_pairs(rng):
    """Every 16-bit code as ``a`` and as ``b``: ``a`` runs over all codes, ``b`` over a permutation."""
    a = np.arange(1 << 16, dtype=np.uint16)
    return a, rng.permutation(a)


def exponent_pairs(rng, fmt, *, boundary_only=False):
    """Every pair of (sign, exponent field) with random significands (extremes one time in four).

    bf16 has 512 x 512 such pairs: each exponent pair is kept once, with random signs. With
    ``boundary_only`` only the pairs where the product's class changes are kept: an operand's
    field all zeros or all ones, or a product near the f32 overflow threshold or in and around
    the subnormal range (plus one in 16 of the others).
    """
    exponent_bits, mantissa_bits = FORMATS[fmt]
    heads = np.arange(1 << (exponent_bits + 1), dtype=np.uint32)  # sign and exponent
    a_head, b_head = (grid.ravel() for grid in np.meshgrid(heads, heads, indexing="ij"))
    if fmt == "bf16":
        keep = (a_head >> exponent_bits == rng.integers(0, 2, a_head.size)) & \
               (b_head >> exponent_bits == rng.integers(0, 2, b_head.size))
        a_head, b_head = a_head[keep], b_head[keep]
    if boundary_only:
        top = (1 << exponent_bits) - 1
        bias = top >> 1
        a_field, b_field = a_head & top, b_head & top
        total = a_field.astype(np.int64) + b_field - 2 * bias   # unbiased exponent of the product
        keep = np.isin(a_field, (0, top)) | np.isin(b_field, (0, top)) | ((total >= 123) & (total <= 131)) \
            | ((total <= -120) & (total >= -155)) | (rng.random(a_head.size) < 1 / 16)
        a_head, b_head = a_head[keep], b_head[keep]

    def fractions(n):
        fraction = rng.integers(0, 1 << mantissa_bits, n)
        extreme = rng.choice([0, 1, (1 << mantissa_bits) - 1, 1 << (mantissa_bits - 1)], n)
        return np.where(rng.random(n) < 0.25, extreme, fraction)

    a = (a_head << mantissa_bits) | fractions(a_head.size)
    b = (b_head << mantissa_bits) | fractions(b_head.size)
    return a.astype(np.uint16), b.astype(np.uint16)


def random_pairs(rng, n, fmt):
    """Corner-heavy random pairs (:func:`golden.fp.vectors.random_operand_tuples`) and every special pair."""
    a, b = random_operand_tuples(rng, n, fmt, 2)
    special = special_values(fmt)
    sa, sb = (grid.ravel() for grid in np.meshgrid(special, special, indexing="ij"))
    return np.concatenate([sa, a]).astype(np.uint16), np.concatenate([sb, b]).astype(np.uint16)


# ---------------------------------------------------------------- cocotb

class TB(ClockedTB):
    def __init__(self, dut, *, idle=False, backpressure=False, salt=0):
        super().__init__(dut)
        component = component_from_env()
        self.fmt = params_from_env().get("fmt", "f16")
        self.tag_width = params_from_env().get("tag_width", 0)
        self.latency = component.latency
        self.source = StreamSource(dut, "i", self.clock, stream_layout(component, "i"),
                                   pause=random_pauses(knobs.rng(100 + salt), PAUSE) if idle else never())
        self.sink = StreamSink(dut, "o", self.clock, stream_layout(component, "o"),
                               backpressure=random_pauses(knobs.rng(200 + salt), PAUSE)
                               if backpressure else never())
        self.tags = 0

    def _tag(self):
        self.tags += 1
        return self.tags & ((1 << self.tag_width) - 1)

    async def run(self, a, b, label):
        """Multiply every pair, check each result, flags and tag against the golden (and the oracle)."""
        result, flags = golden_product(a, b, self.fmt)
        scoreboard = Scoreboard(f"widening_multiplier {self.fmt} o ({label})")
        items = []
        for x, y, r, f in zip(a.tolist(), b.tolist(), result.tolist(), flags.tolist(), strict=True):
            assert (r, f) == exact_product(x, y, self.fmt), \
                f"golden.fp disagrees with the exact product for {x:#06x} * {y:#06x}: {(hex(r), f)}, " \
                f"exact {exact_product(x, y, self.fmt)}"
            item = {"a": x, "b": y}
            expected = {"result": r, "flags": f}
            if self.tag_width:
                item["tag"] = expected["tag"] = self._tag()
            items.append(item)
            scoreboard.expect(expected, item)
        self.source.send_many(items)

        async def drain():
            for _ in range(len(items)):
                scoreboard.check(await self.sink.recv())

        await with_timeout(drain(), (6 * len(items) + 100) * CLOCK_PERIOD_NS, "ns")
        await self.cycles(self.latency + 5)
        while not self.sink.empty():
            scoreboard.check(self.sink.queue.popleft())
        scoreboard.check_complete()


@cocotb.test()
async def every_operand_code(dut):
    """Each of the 65,536 operand codes once as a and once as b (against a permutation)."""
    tb = TB(dut)
    await tb.reset()
    a, b = every_code_pairs(knobs.rng(1))
    await tb.run(a, b, "every code")


@cocotb.test()
async def every_exponent_pair(dut):
    """Every pair of sign and exponent fields, with random and extreme significands."""
    tb = TB(dut)
    await tb.reset()
    a, b = exponent_pairs(knobs.rng(2), tb.fmt)
    await tb.run(a, b, "every exponent pair")


@cocotb.test()
async def boundary_exponent_pairs(dut):
    """The exponent pairs where the product's class changes (zero, subnormal, overflow, specials)."""
    tb = TB(dut)
    await tb.reset()
    a, b = exponent_pairs(knobs.rng(3), tb.fmt, boundary_only=True)
    await tb.run(a, b, "boundary exponent pairs")


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def random_pairs_under_stalls(dut, idle, backpressure):
    """Corner-heavy random pairs with random valid gaps on i and backpressure on o."""
    salt = 10 + 2 * idle + backpressure
    tb = TB(dut, idle=idle, backpressure=backpressure, salt=salt)
    await tb.reset()
    a, b = random_pairs(knobs.rng(salt), knobs.vectors(DEFAULT_RANDOM), tb.fmt)
    await tb.run(a, b, f"random, idle={idle} backpressure={backpressure}")


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset while products are in the pipeline (under stalls); a clean stream afterwards is exact."""
    tb = TB(dut, idle=True, backpressure=True, salt=30)
    rng = knobs.rng(31)
    await tb.reset()
    for round_ in range(8):
        a, b = random_pairs(rng, 200, tb.fmt)
        tb.source.send_many([{"a": x, "b": y} for x, y in zip(a.tolist(), b.tolist(), strict=True)])
        cycle = await tb.reset_mid_transfer(rng, after=(1, 3 * tb.latency + 40), drivers=[tb.source, tb.sink])
        assert not tb.dut.o__valid.value, f"round {round_}: o.valid after the reset at cycle {cycle}"
        a, b = random_pairs(rng, 100, tb.fmt)
        await tb.run(a[-300:], b[-300:], f"round {round_}, after a reset at cycle {cycle}")


# ---------------------------------------------------------------- pytest

MODULE = __name__


FAST = ["random_pairs_under_stalls", "reset_mid_transfer"]


def test_widening_multiplier_f16():
    run_cocotb("widening_multiplier", MODULE, params={"fmt": "f16"},
               testcase=FAST + ["every_operand_code", "every_exponent_pair"])


def test_widening_multiplier_bf16():
    # Every bf16 code and every bf16 exponent pair (65,536 products each) are the slow run's;
    # here the exponent pairs where the product's class changes.
    run_cocotb("widening_multiplier", MODULE, params={"fmt": "bf16", "tag_width": 7},
               testcase=FAST + ["boundary_exponent_pairs"])


@pytest.mark.slow
def test_widening_multiplier_bf16_exhaustive():
    run_cocotb("widening_multiplier", MODULE, params={"fmt": "bf16", "tag_width": 7},
               testcase=["every_operand_code", "every_exponent_pair"])


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_widening_multiplier_long_random(fmt):
    run_cocotb("widening_multiplier", MODULE, params={"fmt": fmt, "tag_width": 3},
               testcase="random_pairs_under_stalls",
               extra_env={"NEARTRAIN_VECTORS": str(knobs.vectors(200000))})


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_golden_product_matches_exact_and_numpy(fmt):
    """golden.fp's product equals the exact-integer oracle and NumPy's float32 product, every code."""
    rng = knobs.rng(40)
    pairs = [every_code_pairs(rng), exponent_pairs(rng, fmt), random_pairs(rng, knobs.vectors(20000), fmt)]
    a = np.concatenate([p[0] for p in pairs])
    b = np.concatenate([p[1] for p in pairs])
    result, flags = golden_product(a, b, fmt)
    with np.errstate(all="ignore"):
        widened = decode_to_f32(a, fmt) * decode_to_f32(b, fmt)
    assert np.array_equal(result, f32_bits(widened)), f"golden.fp differs from NumPy; {knobs.describe()}"
    stride = 1 if fmt == "bf16" else 7  # the f16 products are exact; a sample suffices there
    for x, y, r, f in zip(a[::stride].tolist(), b[::stride].tolist(), result[::stride].tolist(),
                          flags[::stride].tolist(), strict=True):
        assert exact_product(x, y, fmt) == (r, f), f"{fmt} {x:#06x} * {y:#06x}: golden {(hex(r), f)}"


def test_exact_product_known_values():
    """The oracle on hand-checked products (so that it cannot agree with the golden by accident)."""
    assert exact_product(0x3C00, 0x3C00, "f16") == (0x3F800000, 0)               # 1 * 1
    assert exact_product(0xC000, 0x3E00, "f16") == (0xC0400000, 0)               # -2 * 1.5
    assert exact_product(0x0001, 0x0001, "f16") == (0x27800000, 0)               # 2**-24 squared = 2**-48
    assert exact_product(0x7BFF, 0x7BFF, "f16") == (0x4F7FC004, 0)               # 65504**2
    assert exact_product(0x7F80, 0x0000, "bf16") == (CANONICAL_NAN, FLAG_INVALID)  # inf * 0
    assert exact_product(0x7F81, 0x3F80, "bf16") == (CANONICAL_NAN, FLAG_INVALID)  # sNaN * 1
    assert exact_product(0x7F7F, 0x4000, "bf16") == (0x7F800000, FLAG_OVERFLOW | FLAG_INEXACT)
    # 2**-126 * 2**-1 = 2**-127: an exact subnormal, no flags; 2**-133 * 2**-133 rounds to +0.
    assert exact_product(0x0080, 0x3F00, "bf16") == (0x00400000, 0)
    assert exact_product(0x0001, 0x0001, "bf16") == (0, FLAG_UNDERFLOW | FLAG_INEXACT)
    # (1 + 2**-7)**2 * 2**-127 = 2**-127 + 2**-133 + 2**-141: on the subnormal grid (2**-149), exact.
    assert exact_product(0x0081, 0x3F01, "bf16") == (0x00410100, 0)
    # 2**-133 * 1.5 * 2**-16 = 1.5 quanta: a tie, to even (2 quanta); 2.5 quanta also give 2.
    assert exact_product(0x0001, 0x37C0, "bf16") == (2, FLAG_UNDERFLOW | FLAG_INEXACT)
    assert exact_product(0x0001, 0x3820, "bf16") == (2, FLAG_UNDERFLOW | FLAG_INEXACT)
