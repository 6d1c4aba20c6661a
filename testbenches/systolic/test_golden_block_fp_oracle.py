"""golden.systolic.block_fp_gemm bit for bit against an exact oracle that shares no code with it.

The oracle (:mod:`golden.systolic.block_fp_exact`) decodes binary32 words to fractions, encodes the
blocks, forms every block sum and every accumulation exactly and rounds each once, in integer
arithmetic (its own round to nearest even); the golden model uses NumPy's float64 ``ldexp``, ``rint``,
``astype(float32)`` and float32 addition. The cases cover random GEMMs of every format corner
(1-bit to 23-bit magnitudes, one-element to long blocks, K not a multiple of the block), the whole
exponent range (products that overflow to infinity, results in the subnormal range), zero blocks,
the signed-zero rule, special D values, and constructed exact ties in the encoding, in the block-sum
conversion and in the f32 addition. ``test_wrong_variant_is_caught`` checks that the same cases tell
a model with one rounding step changed apart.
"""

import numpy as np
import pytest

from golden.systolic import block_fp_exact as oracle
from golden.systolic.block_fp import block_fp_gemm, to_block_fp
from scripts.sim import knobs

# (block, mantissa_bits): the narrowest mantissa, single-element blocks, blocks longer than K,
# 24-bit mantissas (block sums past 2^46, conversions that round).
FORMATS = [(1, 2), (2, 6), (4, 8), (3, 12), (8, 16), (5, 24), (16, 8), (2, 24)]

# Finite binary32 words on every encoding path: signed zeros, the smallest and largest subnormals,
# the smallest normal, one, values just below a power of two (their mantissa rounds into the clamp),
# the largest finite values.
EDGES = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x3F800000, 0xBF800000, 0x3FFFFFFF,
         0x3F7FFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00400000]
# D words: NaNs (payloads and signs), infinities, signed zeros, subnormals, the largest finite value.
D_SPECIALS = [0x7FC00000, 0xFFC00001, 0x7F800001, 0x7F800000, 0xFF800000, 0x00000000, 0x80000000,
              0x00000001, 0x80000003, 0x7F7FFFFF, 0xFF7FFFFF]


def _words(values):
    return np.asarray(values, np.float32).view(np.uint32)


def random_operand(rng, shape, kind):
    """Finite words of one kind of case, scaled per row (A) or, transposed by the caller, per column (B)."""
    if kind == "normal":
        scale = rng.integers(-6, 7, (shape[0], 1)) + np.zeros(shape, int)
    elif kind == "wide":  # products overflow or land in the subnormal range; small elements flush
        scale = rng.integers(-75, 65, (shape[0], 1)) - rng.integers(0, 30, shape)
    else:  # "extreme": rows at the very top or bottom of the exponent range
        top_or_bottom = rng.choice([-149, -140, -127, -126, 100, 120, 126], (shape[0], 1))
        scale = top_or_bottom + rng.integers(-3, 1, shape)
    words = _words(rng.standard_normal(shape) * np.exp2(scale.astype(np.float64)))
    edges = rng.random(shape) < 0.2
    return np.where(edges, rng.choice(np.asarray(EDGES, np.uint32), shape), words)


def zero_some_blocks(rng, words, block, axis):
    """Set random whole blocks along ``axis`` to signed zeros (all-zero blocks get exponent -126)."""
    words = words.copy()
    moved = np.moveaxis(words, axis, -1)
    zeros = np.asarray([0, 0x80000000], np.uint32)
    for line in moved:
        for k0 in range(0, line.size, block):
            if rng.random() < 0.25:
                line[k0:k0 + block] = rng.choice(zeros, line[k0:k0 + block].size)
    return words


def random_d(rng, shape, specials):
    words = _words(rng.standard_normal(shape) * np.exp2(rng.integers(-10, 10, shape).astype(np.float64)))
    mask = rng.random(shape) < specials
    return np.where(mask, rng.choice(np.asarray(D_SPECIALS, np.uint32), shape), words)


def representable(rng, shape, mantissa_bits, exponent):
    """Words that are exact block-FP values: per row, mantissas with the first element's magnitude in
    [2^(mb-2), 2^(mb-1)) (it sets the shared exponent) and the scale ``exponent - (mb - 2)``."""
    limit = (1 << (mantissa_bits - 1)) - 1
    mantissas = rng.integers(-limit, limit + 1, shape)
    lead = rng.integers(1 << (mantissa_bits - 2), limit + 1, shape[0]) * rng.choice([-1, 1], shape[0])
    mantissas[:, 0] = lead
    return mantissas, _words(np.ldexp(mantissas.astype(np.float64), exponent - (mantissa_bits - 2)))


def conversion_ties(rng, mantissa_bits):
    """One block of two with 24-bit mantissas whose block sum p has an exact tie below its 24th bit.

    A row is ``[a0, a1]`` and B's column ``[b0, 1]`` (B's first element sets its exponent); ``a1`` is
    chosen so that the bits of ``p = a0 b0 + a1`` dropped by the conversion are exactly one half.
    Returns (a, b) words, or None when the choice does not fit.
    """
    exponent_a, exponent_b = int(rng.integers(-40, 40)), int(rng.integers(-40, 40))
    a_mant, _ = representable(rng, (1, 2), mantissa_bits, exponent_a)
    b_mant, _ = representable(rng, (1, 2), mantissa_bits, exponent_b)
    b_mant[0, 1] = 1
    product = int(a_mant[0, 0]) * int(b_mant[0, 0])
    drop = abs(product).bit_length() - 24
    if drop < 2:
        return None
    half = 1 << (drop - 1)
    a1 = (half - abs(product)) % (1 << drop)
    a1 = a1 - (1 << drop) if a1 >= half else a1
    a1 = a1 if product > 0 else -a1
    p = product + a1 * int(b_mant[0, 1])
    if abs(a1) >= abs(int(a_mant[0, 0])) or abs(p).bit_length() - 24 != drop or abs(p) % (1 << drop) != half:
        return None
    a_mant[0, 1] = a1
    scale_a, scale_b = exponent_a - (mantissa_bits - 2), exponent_b - (mantissa_bits - 2)
    a = _words(np.ldexp(a_mant.astype(np.float64), scale_a))
    b = _words(np.ldexp(b_mant.astype(np.float64), scale_b)).reshape(2, 1)
    return a, b


def addition_ties(rng, mantissa_bits, count):
    """One-element blocks whose block sum is exactly half an ulp of D: ``d + s`` rounds a tie to even."""
    lead = 1 << (mantissa_bits - 2)
    exponents = rng.integers(-60, 60, count)
    a = _words(np.ldexp(float(lead), exponents - (mantissa_bits - 2))).reshape(count, 1)  # 2^e_i
    b = _words([[np.ldexp(float(lead), -(mantissa_bits - 2))]])  # 1.0
    # d_i = (1 + k 2^-23) 2^(e_i + 24): its ulp is 2^(e_i + 1), twice the block sum 2^e_i.
    k = rng.integers(0, 1 << 23, count)
    d = np.ldexp(1.0 + k * 2.0**-23, exponents + 24) * rng.choice([-1.0, 1.0], count)
    d = _words(d).reshape(count, 1)
    return a, b, d


def cases():
    """``(label, a, b, d, block, mantissa_bits)`` of every kind, from the knobs' seed."""
    rng = knobs.rng(61)
    for block, bits in FORMATS:
        for index in range(knobs.vectors(6, limit=60)):  # GEMMs through the exact (Fraction) oracle
            kind = ("normal", "wide", "extreme")[index % 3]
            m_size, k_size, n_size = (int(x) for x in rng.integers(1, 7, 3))
            k_size = int(rng.integers(1, 3 * block + 3))
            a = random_operand(rng, (m_size, k_size), kind)
            b = random_operand(rng, (n_size, k_size), kind).T.copy()
            if index % 2:
                a, b = zero_some_blocks(rng, a, block, 1), zero_some_blocks(rng, b, block, 0)
            d = None if index % 4 == 0 else random_d(rng, (m_size, n_size), 0.3)
            yield f"random {kind} {m_size}x{k_size}x{n_size}", a, b, d, block, bits
        # Encoding ties: exact BFP words of a finer grid halfway between two mantissas.
        mantissas, _ = representable(rng, (4, block), bits, 0)
        halves = _words((2 * mantissas + rng.choice([-1, 1], mantissas.shape)) * 2.0 ** (-(bits - 2) - 1))
        halves[:, 0] = _words(np.ldexp(mantissas[:, 0].astype(np.float64), -(bits - 2)))
        yield "encoding ties", halves, halves.T.copy(), None, block, bits
        # Signed zeros: D = -0.0 plus block sums of exactly 0 (+0.0 results) and of tiny negative
        # values that round to -0.0 (-0.0 results), and the same without D (+0.0 + -0.0 = +0.0).
        tiny = _words([[-(2.0**-75), 0.0], [2.0**-75, 0.0], [0.0, 0.0]])
        unit = _words([[2.0**-75], [0.0]])
        minus_zero = np.full((3, 1), 0x80000000, np.uint32)
        yield "signed zeros with D", tiny, unit, minus_zero, block, bits
        yield "signed zeros without D", tiny, unit, None, block, bits
        # Overflow: block sums past the largest finite value, D of the other infinity (NaN results).
        big = _words([[2.0**64, 2.0**63], [-(2.0**64), 1.0]])
        yield "overflow", big, big.T.copy(), _words([[-np.inf, 1.0], [np.inf, -np.inf]]), block, bits
        if bits == 24 and block >= 2:
            for _ in range(knobs.vectors(6, limit=60)):
                tie = conversion_ties(rng, bits)
                if tie is not None:
                    yield "conversion tie", *tie, None, block, bits
        yield "addition ties", *addition_ties(rng, bits, 8), block, bits


def mismatches(gemm):
    """``(label, index, expected, actual)`` of every element where ``gemm`` differs from the oracle."""
    found = []
    for label, a, b, d, block, bits in cases():
        expected = np.asarray(oracle.block_fp_gemm_exact(a, b, d, block=block, mantissa_bits=bits), np.uint32)
        actual = gemm(a, b, d, block=block, mantissa_bits=bits)
        for index in np.argwhere(actual != expected):
            found.append((f"{label} block={block} mantissa_bits={bits}", tuple(int(x) for x in index),
                          int(expected[tuple(index)]), int(actual[tuple(index)])))
    return found


def test_block_fp_gemm_matches_exact_oracle():
    found = mismatches(block_fp_gemm)
    assert not found, (f"{len(found)} mismatches; first: {found[0][0]} C{found[0][1]} oracle "
                       f"{found[0][2]:#010x}, block_fp_gemm {found[0][3]:#010x}; {knobs.describe(6)}")


def test_cases_reach_every_corner():
    """The cases hit what they are named for, so the comparison above is not vacuous."""
    labels, words = set(), []
    for label, a, b, d, block, bits in cases():
        labels.add(label.split(" 0")[0].rstrip("0123456789x "))
        words.append(np.asarray(oracle.block_fp_gemm_exact(a, b, d, block=block, mantissa_bits=bits),
                                np.uint32).ravel())
    every = np.concatenate(words)
    magnitude = every & 0x7FFFFFFF
    assert np.any(every == oracle.CANONICAL_NAN), "no NaN result"
    assert np.any(magnitude == oracle.INFINITY), "no infinite result"
    assert np.any(every == oracle.SIGN) and np.any(every == 0), "no -0.0 or no +0.0 result"
    assert np.any((magnitude != 0) & (magnitude < 0x00800000)), "no subnormal result"
    assert "conversion tie" in labels, f"no conversion tie was constructed ({sorted(labels)})"


def _ties_away(numerator, denominator):
    quotient, remainder = divmod(numerator, denominator)
    return quotient + (2 * remainder >= denominator)


def _flush_subnormal(word):
    return word & oracle.SIGN if (word & 0x7F800000) == 0 else word


# One step of the model changed each: (oracle function replaced, how the replacement changes it).
VARIANTS = {
    "ties away in the block-sum conversion": ("convert_block_sum", "ties away"),
    "ties away in the f32 addition": ("f32_add", "ties away"),
    "ties away in the encoding": ("encode_block", "ties away"),
    "-0.0 + -0.0 gives +0.0": ("f32_add", lambda word: 0 if word == oracle.SIGN else word),
    "subnormal block sums flushed to zero": ("convert_block_sum", _flush_subnormal),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_wrong_variant_is_caught(variant, monkeypatch):
    """A model with one rounding step changed differs from the oracle on these cases.

    The variant is the oracle with one of its steps replaced (the golden model's NumPy steps cannot
    be swapped one at a time); every variant must show at least one mismatch.
    """
    name, change = VARIANTS[variant]
    step = getattr(oracle, name)

    def changed(*args, **kwargs):
        if change != "ties away":
            return change(step(*args, **kwargs))
        with monkeypatch.context() as patch:  # this step only rounds ties away from zero
            patch.setattr(oracle, "_nearest_even", _ties_away)
            return step(*args, **kwargs)

    def wrong(a, b, d, *, block, mantissa_bits):
        with monkeypatch.context() as patch:
            patch.setattr(oracle, name, changed)
            return np.asarray(oracle.block_fp_gemm_exact(a, b, d, block=block, mantissa_bits=mantissa_bits),
                              np.uint32)

    found = mismatches(wrong)
    assert found, f"the variant '{variant}' passes every case; {knobs.describe(6)}"


def test_encoding_matches_oracle():
    """to_block_fp (which block_fp_gemm and the RTL benches use) equals the oracle's encoding."""
    for _, a, _, _, block, bits in cases():
        exponents, mantissas = to_block_fp(a, block=block, mantissa_bits=bits, axis=1)
        for i, row in enumerate(a):
            for t, k0 in enumerate(range(0, row.size, block)):
                shared, block_mantissas = oracle.encode_block(row[k0:k0 + block], mantissa_bits=bits)
                where = f"row {i} block {t}: {[hex(int(x)) for x in row[k0:k0 + block]]}; {knobs.describe(6)}"
                assert shared == exponents[i, t], where
                assert block_mantissas == mantissas[i, k0:k0 + block].tolist(), where


def test_round_to_f32_hand_values():
    """The oracle's own rounding on values whose words are known by hand."""
    from fractions import Fraction
    assert oracle.round_to_f32(Fraction(1)) == 0x3F800000
    assert oracle.round_to_f32(Fraction(1) + Fraction(1, 2**24)) == 0x3F800000  # tie to even: down
    assert oracle.round_to_f32(Fraction(1) + Fraction(3, 2**24)) == 0x3F800002  # tie to even: up
    assert oracle.round_to_f32(Fraction(1, 2**150)) == 0x00000000  # half the smallest subnormal: to 0
    assert oracle.round_to_f32(-Fraction(3, 2**150)) == 0x80000002  # 1.5 quanta: to 2
    assert oracle.round_to_f32(Fraction(2**24 - 1, 2**150)) == 0x00800000  # rounds up to the smallest normal
    assert oracle.round_to_f32(Fraction(2**128 - 2**103)) == 0x7F800000  # tie at the top: to infinity
    assert oracle.round_to_f32(Fraction(2**128 - 2**103 - 1)) == 0x7F7FFFFF
    assert oracle.f32_add(0x80000000, 0x80000000) == 0x80000000
    assert oracle.f32_add(0x80000000, 0x00000000) == 0x00000000
    assert oracle.f32_add(0x3F800000, 0xBF800000) == 0x00000000
    assert oracle.f32_add(0x7F800000, 0xFF800000) == oracle.CANONICAL_NAN


def test_non_finite_operands_rejected_by_both():
    a = _words([[1.0, np.inf]])
    b = _words([[1.0], [2.0]])
    with pytest.raises(ValueError, match="finite"):
        block_fp_gemm(a, b, block=2, mantissa_bits=8)
    with pytest.raises(ValueError, match="finite"):
        oracle.block_fp_gemm_exact(a, b, block=2, mantissa_bits=8)


def tiled_exact(a, b, d, *, block, mantissa_bits, tile_m, tile_n, tile_k):
    """The oracle evaluated in ``TiledGemm``'s order, tile by tile.

    Each ``tile_m x tile_n`` output tile on its own; within it the k-tiles of ``tile_k`` (whole
    blocks) in increasing order, each starting from the previous k-tile's result (the
    weight-stationary partial-sum buffer), the first from ``d`` (or +0.0). Output stationary is
    one k-tile of all of K.
    """
    assert tile_k % block == 0, "k-tiles are whole blocks"
    (m_size, k_size), n_size = a.shape, b.shape[1]
    out = np.zeros((m_size, n_size), np.uint32) if d is None else d.copy()
    for m0 in range(0, m_size, tile_m):
        for n0 in range(0, n_size, tile_n):
            rows, cols = slice(m0, m0 + tile_m), slice(n0, n0 + tile_n)
            for k0 in range(0, k_size, tile_k):
                ks = slice(k0, k0 + tile_k)
                out[rows, cols] = oracle.block_fp_gemm_exact(a[rows, ks], b[ks, cols], out[rows, cols],
                                                             block=block, mantissa_bits=mantissa_bits)
    return out


@pytest.mark.parametrize("dataflow", ["output_stationary", "weight_stationary"])
def test_tiled_order_matches_exact_oracle(dataflow):
    """block_fp_gemm, which the tiled_gemm bench checks the RTL against, equals the oracle evaluated
    in the tiled order (:func:`tiled_exact`): tiles of a 2 x 3 array with T = 2 (output stationary)
    or k-tiles of ``rows`` = 2 blocks (weight stationary), on M, K and N that are not multiples of
    the tiles, with special D values."""
    rng = knobs.rng(62 + (dataflow == "weight_stationary"))
    rows, cols, slots = 2, 3, 2
    compared = 0
    for block, bits in [(2, 6), (4, 8), (1, 12), (3, 24)]:
        for index in range(knobs.vectors(3, limit=30)):
            kind = ("normal", "wide", "extreme")[index % 3]
            m_size, n_size = (int(x) for x in rng.integers(1, 8, 2))
            k_size = int(rng.integers(1, 5 * block + 2))
            a = random_operand(rng, (m_size, k_size), kind)
            b = random_operand(rng, (n_size, k_size), kind).T.copy()
            d = random_d(rng, (m_size, n_size), 0.3) if index % 2 else None
            if dataflow == "output_stationary":
                tiles = dict(tile_m=rows * slots, tile_n=cols, tile_k=-(-k_size // block) * block)
            else:
                tiles = dict(tile_m=m_size, tile_n=cols, tile_k=2 * block)
            expected = tiled_exact(a, b, d, block=block, mantissa_bits=bits, **tiles)
            actual = block_fp_gemm(a, b, d, block=block, mantissa_bits=bits)
            where = np.argwhere(actual != expected)
            assert not where.size, (f"{kind} {m_size}x{k_size}x{n_size} block={block} mantissa_bits={bits} "
                                    f"{tiles}: C{tuple(where[0])} oracle {expected[tuple(where[0])]:#010x}, "
                                    f"block_fp_gemm {actual[tuple(where[0])]:#010x}; {knobs.describe(6)}")
            compared += expected.size
    assert compared
