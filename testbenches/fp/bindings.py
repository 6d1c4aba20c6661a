"""Which golden function checks which FP unit, and the operands to check it with.

:func:`golden_binding` maps a registered FP block and its parameters to the operand
fields of its input payload, the format of those operands, and the ``golden.fp``
function that computes the expected ``(result, flags)``. One set of cocotb tests
(in ``tb.py``) and one benchmark then serve every unit.
"""

import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np

import golden.fp as gfp

__all__ = ["GoldenBinding", "golden_binding", "operand_vectors", "raw_bits"]


@dataclass(frozen=True)
class GoldenBinding:
    """How to drive and check one FP unit configuration."""

    operands: tuple
    operand_format: str
    evaluate: Callable

    @property
    def arity(self):
        return len(self.operands)


def _arithmetic(function, operands, params):
    fmt, flush = params["fmt"], params["flush_subnormals"]
    return GoldenBinding(operands, fmt, lambda *xs: function(*xs, fmt=fmt, flush_subnormals=flush))


def golden_binding(block, params):
    """The :class:`GoldenBinding` of registered FP block ``block`` with full parameters ``params``.

    Raises
    ------
    ValueError
        For a block this table does not know.
    """
    if block == "fp_add":
        return _arithmetic(gfp.sub if params.get("subtract") else gfp.add, ("a", "b"), params)
    if block == "fp_mul":
        return _arithmetic(gfp.mul, ("a", "b"), params)
    if block == "fp_fma":
        return _arithmetic(gfp.fma, ("a", "b", "c"), params)
    if block == "fp_div":
        return _arithmetic(gfp.div, ("a", "b"), params)
    if block == "fp_sqrt":
        return _arithmetic(gfp.sqrt, ("a",), params)
    if block in ("fp_compare", "fp_min_max"):
        function = getattr(gfp, params["operation"])
        binding = _arithmetic(function, ("a", "b"), params)
        if block == "fp_compare":
            def evaluate(a, b):
                return tuple(np.asarray(x).astype(np.uint64) for x in binding.evaluate(a, b))
            return GoldenBinding(binding.operands, binding.operand_format, evaluate)
        return binding
    if block in ("fp_convert", "fp_to_int", "int_to_fp"):
        if block == "fp_convert":
            source, target = params["source"], params["target"]
        elif block == "fp_to_int":
            source, target = params["fmt"], params["integer"]
        else:
            source, target = params["integer"], params["fmt"]
        flush = params["flush_subnormals"]
        return GoldenBinding(("a",), source,
                             lambda x: gfp.convert(x, source, target, flush_subnormals=flush))
    raise ValueError(f"no golden binding for FP block {block!r}")


def operand_vectors(binding, rng, count):
    """Directed operands followed by ``count`` random tuples, in the golden model's own dtypes.

    For float operands the directed part is every special value against every other (for
    fma the third operand cycles through them); integer operands are all random (their
    generator already mixes in the range edges and rounding boundaries).
    """
    fmt = binding.operand_format
    if fmt in gfp.INTEGER_FORMATS:
        return (gfp.random_operands(rng, count, fmt),)
    specials = gfp.special_values(fmt)
    pairs = list(itertools.product(specials, repeat=min(binding.arity, 2)))
    directed = [np.array(column, dtype=specials.dtype) for column in zip(*pairs, strict=True)]
    if binding.arity == 3:
        directed.append(np.resize(specials, len(pairs)))
    random = gfp.random_operand_tuples(rng, count, fmt, binding.arity)
    return tuple(np.concatenate([d, r.astype(specials.dtype)]) for d, r in zip(directed, random, strict=True))


def raw_bits(values, width):
    """Two's-complement raw bits of ``values`` (any integer dtype) as Python ints of ``width`` bits."""
    mask = (1 << width) - 1
    return [int(v) & mask for v in np.asarray(values).astype(np.int64)]
