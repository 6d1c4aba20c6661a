"""The ``amaranth.sim`` checks shared by the divider and the square root, against Berkeley SoftFloat.

Every result is compared on its raw bits and its five flag bits with
:func:`testbenches.fp.golden_oracle.oracle`: ``softfloatpy`` itself for f32 and f16, and for
bf16 (which SoftFloat cannot compute) the round-to-odd construction documented there, in
which f64 and f32 steps round to odd and ``f32_to_bf16`` rounds once to nearest even; flags
are the OR of the steps' inexact, invalid and divide-by-zero flags with the final step's
underflow and overflow. Flush-to-zero is emulated around SoftFloat the same way for every
format (subnormal operands read as same-signed zeros, subnormal results become same-signed
zeros with underflow and inexact), which is also what :mod:`golden.fp` documents.

Operands come from :func:`golden.fp.random_operand_tuples` (class-hitting, with correlated
divisors: 3-bit significands, powers of two, near neighbours), directed class-by-class and
scaling tables, and every 16-bit encoding for the f16 and bf16 square roots.

The tests are in ``test_fp_div.py`` and ``test_fp_sqrt.py``; those they share are made by
:func:`testbenches.fp.suite.divsqrt_tests`, with one body here each (the operation, ``"div"`` or
``"sqrt"``, as its first argument).

``NEARTRAIN_SEED`` (default 1) seeds everything; ``NEARTRAIN_VECTORS`` overrides the random
vector count per configuration (default 2,000 here, 50,000 in the ``slow`` tests). A
failure prints both, with operands, expected and actual values in hex.
"""

import zlib

import numpy as np
import pytest
from amaranth.hdl import Fragment

import golden.fp as gfp
from golden.fp.formats import float_format
from golden.fp.latencies import LATENCY as DOCUMENTED_LATENCY
from rtl.elaborate import to_verilog
from rtl.fp.format import FloatFormat
from rtl.fp.fp_div import FloatDivider
from rtl.fp.fp_sqrt import FloatSquareRoot
from rtl.registry import get_block
from scripts.sim import knobs

from .golden_oracle import oracle
from .sim_driver import simulate

FORMATS = ("f32", "f16", "bf16")
FLUSH = [pytest.param(False, id="ieee"), pytest.param(True, id="ftz")]
# Exhaustive runs: flush-to-zero only in the slow suite (random and directed vectors cover it).
FLUSH_EXHAUSTIVE = [pytest.param(False, id="ieee"), pytest.param(True, id="ftz", marks=pytest.mark.slow)]
UNITS = {"div": FloatDivider, "sqrt": FloatSquareRoot}
ARITY = {"div": 2, "sqrt": 1}
FAST_VECTORS, SLOW_VECTORS = 2_000, 50_000
# Latency with bits_per_stage=1, as documented (docs/fp.md, the class docstrings).
LATENCY = {(op, fmt): DOCUMENTED_LATENCY[f"{op}-{fmt}-ieee"] for op in ("div", "sqrt") for fmt in FORMATS}
# Small generic formats, checked against golden.fp (which takes any FloatFormat of precision
# up to 24): every encoding, so every exponent corner. In e3m4 and e2m5 the root of a small
# subnormal is itself subnormal, which exercises the square root's denormalising path.
GENERIC = {"e3m4": FloatFormat("e3m4", 3, 4), "e2m5": FloatFormat("e2m5", 2, 5),
           "e4m3": FloatFormat("e4m3", 4, 3)}


def _unit_format(fmt):
    """The unit's ``fmt`` for golden format ``fmt``: a named format by name, any other by its widths."""
    return fmt.name if fmt.name in FORMATS else FloatFormat(fmt.name, fmt.exponent_bits, fmt.mantissa_bits)


def _rng(*labels):
    """A generator per test case, so that adding a case does not shift the others' vectors."""
    return knobs.rng(zlib.crc32(repr(labels).encode()))


def _operations(operands):
    names = ("a", "b")
    return [dict(zip(names, map(int, values), strict=False)) for values in zip(*operands, strict=True)]


def assert_results(op, fmt, operands, run, want, *, flush, label, default_vectors=None):
    """Fail, printing the first mismatches in hex, unless ``run`` produced ``want`` in order."""
    fmt = float_format(fmt)
    want_result, want_flags = (np.asarray(x, dtype=np.uint64).reshape(-1) for x in want)
    got = np.array([[out["result"], out["flags"]] for out in run.outputs], dtype=np.uint64).reshape(-1, 2)
    assert len(got) == len(want_result), (f"{label}: {len(got)} results for {len(want_result)} operations "
                                          f"[{knobs.describe(default_vectors)}]")
    bad = np.flatnonzero((got[:, 0] != want_result) | (got[:, 1] != want_flags))
    if bad.size:
        digits = (fmt.width + 3) // 4
        lines = [f"  {op}({', '.join(f'0x{int(x[i]):0{digits}x}' for x in operands)}): "
                 f"expected 0x{int(want_result[i]):0{digits}x} flags {int(want_flags[i]):#04x}, "
                 f"got 0x{int(got[i, 0]):0{digits}x} flags {int(got[i, 1]):#04x}" for i in bad[:16]]
        pytest.fail(f"{label} {op} {fmt.name} flush={flush}: {bad.size} of {len(got)} differ "
                    f"[{knobs.describe(default_vectors)}]\n" + "\n".join(lines))


def run_and_check(op, fmt, operands, *, flush=False, label="", default_vectors=None, unit=None,
                  reference=None, tags=False, **sim_args):
    """Simulate ``op`` on ``operands`` (one array per operand) and compare with the oracle.

    The oracle is SoftFloat (:func:`golden_oracle.oracle`) unless ``reference`` names
    another function of the same signature as :mod:`golden.fp`'s. With ``tags`` each
    operation carries its index as the tag, and the output tags must come back in order.
    """
    fmt = float_format(fmt)
    unit = unit or UNITS[op](fmt=_unit_format(fmt), flush_subnormals=flush)
    operands = [np.asarray(x, dtype=np.uint64) for x in operands]
    operations = _operations(operands)
    if tags:
        mask = (1 << len(unit.i.payload.tag)) - 1
        for index, operation in enumerate(operations):
            operation["tag"] = index & mask
    run = simulate(unit, operations, **sim_args)
    if tags:
        got_tags = [out["tag"] for out in run.outputs]
        assert got_tags == [index & mask for index in range(len(operations))], \
            f"{label}: results lost, duplicated or reordered [{knobs.describe(default_vectors)}]"
    if reference is None:
        want = oracle(op, operands, fmt.name, flush)
    else:
        want = reference(*operands, fmt=fmt, flush_subnormals=flush)
    assert_results(op, fmt, operands, run, want, flush=flush, label=label or op,
                   default_vectors=default_vectors)
    return run


def random_test(op, fmt, flush, default):
    """``default`` (or NEARTRAIN_VECTORS) random operand tuples of ``op`` in ``fmt``."""
    count = knobs.vectors(default)
    operands = gfp.random_operand_tuples(_rng(op, fmt, flush), count, fmt, ARITY[op])
    run_and_check(op, fmt, operands, flush=flush, label=f"random {op}", default_vectors=default)


def scales(fmt):
    """Divisors that move a quotient by whole binades, or by just under/over one."""
    m, bias = fmt.mantissa_bits, fmt.bias
    powers = [(bias + k) << m for k in range(-(fmt.precision + 3), fmt.precision + 4)
              if 0 < bias + k < fmt.max_exponent_field]
    near_one = [((bias - 1) << m) | ((1 << m) - 1), (bias << m) | 1, (bias << m) | (1 << (m - 1))]
    subnormal_powers = [1 << k for k in range(m)]
    values = powers + near_one + subnormal_powers
    return values + [v | fmt.sign_mask for v in values]


def back_to_back_issue(op):
    """II = 1: with o.ready high every operation is accepted in consecutive cycles and
    leaves exactly ``latency`` cycles later."""
    unit = UNITS[op](fmt="f16")
    count = 300
    operands = gfp.random_operand_tuples(_rng("ii", op), count, "f16", ARITY[op])
    run = run_and_check(op, "f16", operands, unit=unit, label="back-to-back")
    assert run.accepted_cycles == list(range(count))
    assert run.output_cycles == [cycle + unit.latency for cycle in run.accepted_cycles]
    assert unit.latency == LATENCY[(op, "f16")]


def stalls_keep_order(op, fmt):
    """Random input gaps and o.ready stalls: nothing lost, duplicated or reordered."""
    count = knobs.vectors(800)
    unit = UNITS[op](fmt=fmt, tag_width=12)
    operands = gfp.random_operand_tuples(_rng("stall", op, fmt), count, fmt, ARITY[op])
    gaps = _rng("gaps", op, fmt).random(8 * count + 200) < 0.3
    stalls = _rng("stalls", op, fmt).random(8 * count + 200) < 0.4
    run = run_and_check(op, fmt, operands, unit=unit, tags=True, label="stalls", default_vectors=800,
                        idle=lambda cycle: bool(gaps[cycle]), stall=lambda cycle: bool(stalls[cycle]))
    # The stalls really happened: some results waited, some operations were refused.
    assert len(run.output_cycles) == count and run.output_cycles[-1] > count + unit.latency


def bits_per_stage(op, fmt, bits_per_stage):
    """The latency with ``bits_per_stage`` quotient or root bits per stage, and random results."""
    f = float_format(fmt)
    steps = f.precision + (2 if op == "div" else 1)
    unit = UNITS[op](fmt=fmt, bits_per_stage=bits_per_stage)
    assert unit.latency == LATENCY[(op, fmt)] - steps + -(-steps // bits_per_stage)
    operands = gfp.random_operand_tuples(_rng("bps", op, fmt, bits_per_stage), knobs.vectors(300), fmt,
                                         ARITY[op])
    run_and_check(op, fmt, operands, unit=unit, label=f"bits_per_stage={bits_per_stage}", default_vectors=300)


def verilog(op, fmt, flush):
    """The unit converts to Verilog, and its latency is as documented."""
    unit = UNITS[op](fmt=fmt, flush_subnormals=flush, tag_width=3)
    text = to_verilog(unit)
    assert "module top" in text
    assert unit.latency == LATENCY[(op, fmt)] - flush


def parameters(op):
    """Bad parameters are refused by name; the registered block has the documented parameters."""
    cls = UNITS[op]
    for bad, match in [(dict(fmt="f64"), "fmt"), (dict(bits_per_stage=0), "bits_per_stage"),
                       (dict(bits_per_stage=5), "bits_per_stage"),
                       (dict(bits_per_stage=True), "bits_per_stage"),
                       (dict(tag_width=-1), "tag_width"), (dict(flush_subnormals=1), "flush_subnormals")]:
        with pytest.raises(ValueError, match=match):
            cls(**bad)
    with pytest.raises(TypeError):
        cls("f32")
    block = get_block(f"fp_{op}")
    assert block.component is cls
    assert {p.name for p in block.params} == {"fmt", "flush_subnormals", "tag_width", "bits_per_stage"}
    unit = block.build({"fmt": "bf16"})
    assert unit.latency == LATENCY[(op, "bf16")]
    Fragment.get(unit, None)
