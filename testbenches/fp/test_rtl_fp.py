"""pytest runners: every FP unit in cocotb on Verilator against golden.fp (bits and flags).

The fast set covers every unit at least once and every arithmetic unit in more than one
format; the slow set (``make test-full``) covers every unit in every format and subnormal
mode, and runs 10**6 random vectors per configuration.
"""

import itertools

import pytest

from testbenches.harness import run_cocotb

MODULE = "testbenches.fp.cocotb_fp_unit"
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


@pytest.mark.slow
@pytest.mark.parametrize("block,params", list(_every_configuration()), ids=_id)
def test_fp_unit_million_vectors(block, params):
    run_cocotb(block, MODULE, params=params, testcase="golden_match_under_stalls",
               extra_env={"NEARTRAIN_VECTORS": "1000000", "NEARTRAIN_FP_STALL_PATTERNS": "both"})
