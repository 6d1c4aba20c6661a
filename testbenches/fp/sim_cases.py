"""What the FP unit simulations run: how to build each unit, its operands and its expected results.

Oracles
-------
* f32 and f16: Berkeley SoftFloat (``softfloatpy``, RISC-V specialisation, tininess after
  rounding) through :mod:`testbenches.fp.golden_oracle`, which also emulates flushing
  around it (subnormal inputs become same-signed zeros; a subnormal result becomes a
  same-signed zero with underflow and inexact).
* bf16: the same oracle, whose bf16 path is SoftFloat rounding to odd in f64 and f32 and
  then ``f32_to_bf16`` (a provably single rounding), and :mod:`golden.fp` as well.
* Other formats (the generic-format check): :mod:`golden.fp` alone.
"""

from dataclasses import dataclass, field

import numpy as np

import golden.fp as golden
from golden.fp.formats import float_format
from rtl.fp.fp_add import FloatAdder
from rtl.fp.fp_compare import FloatCompare
from rtl.fp.fp_convert import FloatConverter
from rtl.fp.fp_fma import FloatFusedMultiplyAdd
from rtl.fp.fp_min_max import FloatMinMax
from rtl.fp.fp_mul import FloatMultiplier
from rtl.fp.fp_to_int import FloatToInteger
from rtl.fp.int_to_fp import IntegerToFloat

from .golden_oracle import oracle, oracle_convert

__all__ = ["Case", "arithmetic_case", "compare_case", "convert_case", "float_to_int_case",
           "int_to_float_case", "operands_for", "expected_for"]

_MASK32 = (1 << 32) - 1


@dataclass(frozen=True)
class Case:
    """One unit configuration: ``op`` is the golden/oracle operation name."""

    op: str
    fmt: object
    flush: bool
    unit: type
    kwargs: dict = field(default_factory=dict)
    source: str = None
    target: str = None
    variant: str = ""

    @property
    def arity(self):
        return {"fma": 3}.get(self.op, 1 if self.op == "convert" else 2)

    @property
    def id(self):
        if self.op == "convert":
            return f"{self.source}-{self.target}-{'flush' if self.flush else 'ieee'}"
        name = self.fmt if isinstance(self.fmt, str) else self.fmt.name
        return f"{self.op}-{name}-{'flush' if self.flush else 'ieee'}{self.variant}"

    def build(self, **extra):
        return self.unit(flush_subnormals=self.flush, **self.kwargs, **extra)


_ARITHMETIC = {
    "add": (FloatAdder, {}), "sub": (FloatAdder, {"subtract": True}), "mul": (FloatMultiplier, {}),
    "fma": (FloatFusedMultiplyAdd, {}), "min": (FloatMinMax, {"operation": "min"}),
    "max": (FloatMinMax, {"operation": "max"}),
}


def arithmetic_case(op, fmt, flush, **extra):
    """A case of ``op``; ``extra`` constructor arguments name a variant (e.g. ``dsp_tile=24``)."""
    unit, kwargs = _ARITHMETIC[op]
    variant = "".join(f"-{key}{value}" for key, value in extra.items())
    return Case(op, fmt, flush, unit, {"fmt": fmt, **kwargs, **extra}, variant=variant)


def compare_case(op, fmt, flush):
    return Case(op, fmt, flush, FloatCompare, {"fmt": fmt, "operation": op})


def convert_case(source, target, flush):
    return Case("convert", None, flush, FloatConverter, {"source": source, "target": target},
                source=source, target=target)


def float_to_int_case(fmt, integer, flush):
    return Case("convert", None, flush, FloatToInteger, {"fmt": fmt, "integer": integer},
                source=fmt, target=integer)


def int_to_float_case(integer, fmt, flush):
    return Case("convert", None, flush, IntegerToFloat, {"fmt": fmt, "integer": integer},
                source=integer, target=fmt)


def _directed(case, rng):
    """Every pair of special values (a random third operand each for fma)."""
    if case.op == "convert":
        if case.source in ("i32", "u32"):
            return [np.zeros(0, dtype=np.int64)]
        values = golden.special_values(case.source).astype(np.uint64)
        if float_format(case.source).width <= 16:
            # A stride through every 16-bit encoding reaches each exponent and class.
            values = np.concatenate([values, np.arange(0, 1 << 16, 97, dtype=np.uint64)])
        return [values]
    values = golden.special_values(case.fmt).astype(np.uint64)
    a, b = (grid.ravel() for grid in np.meshgrid(values, values))
    if case.arity == 3:
        return [a, b, rng.choice(values, a.size)]
    return [a, b]


def operands_for(case, rng, count, *, directed=True):
    """Directed operands (unless ``directed=False``) then ``count`` random ones, as uint64/int64 arrays."""
    directed = _directed(case, rng) if directed else [np.zeros(0, dtype=np.uint64)] * case.arity
    if case.op == "convert":
        random = golden.random_operands(rng, count, case.source)
        random = random.astype(np.int64 if case.source in ("i32", "u32") else np.uint64)
        return [np.concatenate([directed[0].astype(random.dtype), random])]
    if isinstance(case.fmt, str):
        random = golden.random_operand_tuples(rng, count, case.fmt, case.arity)
    else:
        random = _uniform_tuples(rng, count, case.fmt, case.arity)
    return [np.concatenate([d, r.astype(np.uint64)]) for d, r in zip(directed, random, strict=True)]


def _uniform_tuples(rng, count, fmt, arity):
    """Uniform encodings of a small generic format; fma addends are often the negated product."""
    operands = [rng.integers(0, 1 << fmt.width, count, dtype=np.uint64) for _ in range(arity)]
    if arity == 3:
        product, _ = golden.mul(operands[0], operands[1], fmt)
        low_bit = rng.integers(0, 2, count, dtype=np.uint64)
        negated = product.astype(np.uint64) ^ np.uint64(fmt.sign_mask) ^ low_bit
        operands[2] = np.where(rng.random(count) < 0.5, negated, operands[2])
    return operands


def expected_for(case, operands):
    """Expected ``(results, flags)`` as Python int lists, from every oracle that covers the case.

    Returns a dict ``{oracle name: (results, flags)}``.
    """
    named = isinstance(case.fmt, str) or case.op == "convert"
    answers = {}
    if case.op == "convert":
        answers["softfloat"] = oracle_convert(operands[0], case.source, case.target, case.flush)
        if "bf16" in (case.source, case.target):
            answers["golden"] = golden.convert(operands[0], case.source, case.target, case.flush)
    elif named:
        answers["softfloat"] = oracle(case.op, operands, case.fmt, case.flush)
        if case.fmt == "bf16":
            answers["golden"] = getattr(golden, case.op)(*operands, case.fmt, case.flush)
    else:
        answers["golden"] = getattr(golden, case.op)(*operands, case.fmt, case.flush)
    return {name: ([int(r) & _MASK32 for r in np.asarray(res).astype(np.int64)], [int(f) for f in flags])
            for name, (res, flags) in answers.items()}
