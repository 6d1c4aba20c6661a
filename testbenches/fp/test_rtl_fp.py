"""pytest runners: every FP unit in cocotb on Verilator against golden.fp (bits and flags).

The fast set covers every unit at least once and every arithmetic unit in more than one
format; the slow set (``make test-full``) covers every unit in every format and subnormal
mode, and runs 10**6 random vectors per configuration.
"""

import itertools
import os

import pytest

from scripts.sim.runner import run_cocotb
from testbenches.fp.parallel_units import ParallelUnits

MODULE = "testbenches.fp.cocotb_fp_unit"
LANES_MODULE = "testbenches.fp.cocotb_fp_lanes"
FORMATS = ("f32", "f16", "bf16")
ARITHMETIC = ("fp_add", "fp_mul", "fp_fma", "fp_div", "fp_sqrt")

FAST = [
    ("fp_add", {"fmt": "f32"}), ("fp_add", {"fmt": "f16"}), ("fp_add", {"fmt": "bf16"}),
    ("fp_add", {"fmt": "f32", "subtract": True, "tag_width": 5}),
    ("fp_add", {"fmt": "f32", "flush_subnormals": True}),
    ("fp_mul", {"fmt": "f32"}), ("fp_mul", {"fmt": "f16"}), ("fp_mul", {"fmt": "bf16"}),
    ("fp_mul", {"fmt": "f16", "flush_subnormals": True}),
    ("fp_fma", {"fmt": "f32"}), ("fp_fma", {"fmt": "bf16"}),
    ("fp_div", {"fmt": "f32"}), ("fp_div", {"fmt": "f16"}),
    ("fp_sqrt", {"fmt": "f32"}), ("fp_sqrt", {"fmt": "bf16", "flush_subnormals": True}),
    ("fp_compare", {"fmt": "f32", "operation": "lt"}), ("fp_compare", {"fmt": "f16", "operation": "eq"}),
    ("fp_min_max", {"fmt": "bf16", "operation": "min"}),
    ("fp_convert", {"source": "f32", "target": "f16"}), ("fp_convert", {"source": "bf16", "target": "f32"}),
    ("fp_to_int", {"fmt": "f32", "integer": "i32"}), ("int_to_fp", {"fmt": "bf16", "integer": "u32"}),
]


def _every_configuration():
    for block, fmt, flush in itertools.product(ARITHMETIC, FORMATS, (False, True)):
        yield block, {"fmt": fmt, "flush_subnormals": flush}
    for fmt, flush in itertools.product(FORMATS, (False, True)):
        yield "fp_add", {"fmt": fmt, "flush_subnormals": flush, "subtract": True}
        for operation in ("eq", "lt", "le"):
            yield "fp_compare", {"fmt": fmt, "flush_subnormals": flush, "operation": operation}
        for operation in ("min", "max"):
            yield "fp_min_max", {"fmt": fmt, "flush_subnormals": flush, "operation": operation}
        for target in FORMATS:
            if target != fmt:
                yield "fp_convert", {"source": fmt, "target": target, "flush_subnormals": flush}
        for integer in ("i32", "u32"):
            yield "fp_to_int", {"fmt": fmt, "integer": integer, "flush_subnormals": flush}
            yield "int_to_fp", {"fmt": fmt, "integer": integer, "flush_subnormals": flush}


def _id(value):
    return value if isinstance(value, str) else "-".join(f"{k}={w}" for k, w in value.items())


@pytest.mark.parametrize("block,params", FAST, ids=_id)
def test_fp_unit(block, params):
    run_cocotb(block, MODULE, params=params)


# 16 copies of the unit check 16 vectors per simulated cycle (see parallel_units.py).
MILLION_LANES = 16


def _unary_16_bit_configurations():
    for fmt, flush in itertools.product(("f16", "bf16"), (False, True)):
        yield "fp_sqrt", {"fmt": fmt, "flush_subnormals": flush}
        for target in FORMATS:
            if target != fmt:
                yield "fp_convert", {"source": fmt, "target": target, "flush_subnormals": flush}
        for integer in ("i32", "u32"):
            yield "fp_to_int", {"fmt": fmt, "integer": integer, "flush_subnormals": flush}


def _lanes_params(block, params, lanes):
    return {"block": block, "unit_params": params, "lanes": lanes}


def test_parallel_fixture():
    """The 16-copy fixture itself, on a three-operand unit with random and directed operands."""
    run_cocotb(ParallelUnits, LANES_MODULE, params=_lanes_params("fp_fma", {"fmt": "f16"}, 3))


@pytest.mark.parametrize("block,params", [("fp_sqrt", {"fmt": "bf16"}),
                                          ("fp_convert", {"source": "f16", "target": "f32"})], ids=_id)
def test_exhaustive_16_bit_unary_fast(block, params):
    """Every f16/bf16 encoding through a unary unit (the rest of the set is in the slow suite)."""
    run_cocotb(ParallelUnits, LANES_MODULE, params=_lanes_params(block, params, 4),
               job="exhaustive")


@pytest.mark.slow
@pytest.mark.parametrize("block,params", list(_unary_16_bit_configurations()), ids=_id)
def test_exhaustive_16_bit_unary(block, params):
    """All 65,536 inputs of every unary f16/bf16 operation: sqrt and every conversion."""
    run_cocotb(ParallelUnits, LANES_MODULE, params=_lanes_params(block, params, MILLION_LANES),
               job="exhaustive")


@pytest.mark.slow
@pytest.mark.parametrize("block,params", list(_every_configuration()), ids=_id)
def test_fp_unit_million_vectors(block, params):
    run_cocotb(ParallelUnits, LANES_MODULE, params=_lanes_params(block, params, MILLION_LANES),
               extra_env={"NEARTRAIN_VECTORS": os.environ.get("NEARTRAIN_VECTORS", "1000000")})
