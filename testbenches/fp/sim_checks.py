# amaranth: UnusedElaboratable=no
# (Units built only to check their parameters are never elaborated.)
"""Simulation tests of the pipelined FP units (all but divide and square root) in ``amaranth.sim``.

Every unit x format x flush mode runs all pairs of :func:`golden.fp.special_values` (with a
random addend for fma, a stride through every 16-bit encoding for 16-bit conversions)
and ``NEARTRAIN_VECTORS`` (default 300) random operands from
:func:`golden.fp.random_operand_tuples`, fed one per cycle, and compares bits and flags
with the oracles named in :mod:`testbenches.fp.sim_cases` (SoftFloat for f32/f16, SoftFloat
and ``golden.fp`` for bf16). The same run checks the timing contract: an operation is
accepted every cycle and each result leaves exactly ``latency`` cycles later. Separate
tests drop ``o.ready`` and ``i.valid`` at random, with tags, and check that nothing is lost,
duplicated or reordered.

``NEARTRAIN_SEED`` (default 1) seeds everything; a failure prints it with the inputs,
expected and actual values in hex. The ``slow`` tests run 20,000 random vectors per
configuration and every 16-bit encoding through each 16-bit conversion.
"""

import zlib

import numpy as np
import pytest
from amaranth.back import verilog

from rtl.fp.adder import FloatAdder
from rtl.fp.compare import FloatCompare
from rtl.fp.converter import FloatConverter
from rtl.fp.float_to_integer import FloatToInteger
from rtl.fp.format import FloatFormat
from rtl.fp.fused_multiply_add import FloatFusedMultiplyAdd
from rtl.fp.integer_to_float import IntegerToFloat
from rtl.fp.min_max import FloatMinMax
from rtl.fp.multiplier import FloatMultiplier
from rtl.registry import get_block
from scripts.sim import knobs
from scripts.sim.tb import hex_of

from .sim_cases import (
    arithmetic_case,
    compare_case,
    convert_case,
    expected_for,
    float_to_int_case,
    int_to_float_case,
    operands_for,
)
from .sim_driver import simulate

FORMATS = ("f32", "f16", "bf16")
MODES = (False, True)
INTEGERS = ("i32", "u32")
DEFAULT_VECTORS = 300
SLOW_VECTORS = 20000
_MASK32 = (1 << 32) - 1

CASES = (
    [arithmetic_case(op, fmt, flush)
     for op in ("add", "sub", "mul", "fma", "min", "max") for fmt in FORMATS for flush in MODES]
    # A single product tile (one plain `*`), as for Xilinx DSPs.
    + [arithmetic_case(op, "f32", False, dsp_tile=24) for op in ("mul", "fma")]
    + [compare_case(op, fmt, flush) for op in ("eq", "lt", "le") for fmt in FORMATS for flush in MODES]
    + [compare_case(op, "f32", False) for op in ("lt_quiet", "le_quiet")]
    + [convert_case(source, target, flush)
       for source in FORMATS for target in FORMATS if source != target for flush in MODES]
    + [float_to_int_case(fmt, integer, flush) for fmt in FORMATS for integer in INTEGERS for flush in MODES]
    + [int_to_float_case(integer, fmt, flush) for fmt in FORMATS for integer in INTEGERS for flush in MODES]
)

# Formats beyond the three named ones, checked against golden.fp alone.
E4M3 = FloatFormat("e4m3", 4, 3)
E5M2 = FloatFormat("e5m2", 5, 2)
GENERIC_CASES = [arithmetic_case(op, fmt, flush) for op in ("add", "mul", "fma")
                 for fmt in (E4M3, E5M2) for flush in MODES]


def _operations(case, operands):
    names = ("a", "b", "c")[:len(operands)]
    return [{name: int(value) & _MASK32 for name, value in zip(names, column, strict=True)}
            for column in zip(*operands, strict=True)]


def _rng(case, salt=0):
    return knobs.rng(zlib.crc32(case.id.encode()) + salt)


def _check_results(case, operations, outputs, expected, default_vectors):
    assert len(outputs) == len(operations), f"{case.id}: {len(outputs)} results for {len(operations)} inputs"
    for oracle_name, (results, flags) in expected.items():
        for index, (out, result, flag) in enumerate(zip(outputs, results, flags, strict=True)):
            if out["result"] != result or out["flags"] != flag:
                raise AssertionError(
                    f"{case.id} vs {oracle_name}: mismatch at vector {index}: "
                    f"inputs {hex_of(operations[index])}, "
                    f"expected result {result:#x} flags {flag:#x}, actual result {out['result']:#x} "
                    f"flags {out['flags']:#x}; {knobs.describe(default_vectors)}")


def _run_case(case, vectors, default_vectors):
    operands = operands_for(case, _rng(case), vectors)
    dut = case.build()
    operations = _operations(case, operands)
    run = simulate(dut, operations)
    _check_results(case, operations, run.outputs, expected_for(case, operands), default_vectors)
    return dut, run


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_unit_matches_oracles(case):
    dut, run = _run_case(case, knobs.vectors(DEFAULT_VECTORS), DEFAULT_VECTORS)
    # II = 1 with nothing stalling: one acceptance per cycle, each result `latency` cycles later.
    accepted = np.array(run.accepted_cycles)
    assert (np.diff(accepted) == 1).all(), f"{case.id}: an operation was refused while the output was free"
    delays = set((np.array(run.output_cycles) - accepted).tolist())
    assert delays == {dut.latency}, f"{case.id}: result delays {sorted(delays)}, documented {dut.latency}"


@pytest.mark.parametrize("case", GENERIC_CASES, ids=lambda case: case.id)
def test_generic_format_matches_golden(case):
    _run_case(case, knobs.vectors(DEFAULT_VECTORS), DEFAULT_VECTORS)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES + GENERIC_CASES, ids=lambda case: case.id)
def test_unit_matches_oracles_long(case):
    _run_case(case, knobs.vectors(SLOW_VECTORS), SLOW_VECTORS)


SIXTEEN_BIT_SOURCES = [case for case in CASES if case.op == "convert" and case.source in ("f16", "bf16")]


@pytest.mark.slow
@pytest.mark.parametrize("case", SIXTEEN_BIT_SOURCES, ids=lambda case: case.id)
def test_16_bit_conversions_exhaustive(case):
    operands = [np.arange(1 << 16, dtype=np.uint64)]
    operations = _operations(case, operands)
    run = simulate(case.build(), operations)
    _check_results(case, operations, run.outputs, expected_for(case, operands), None)


# One configuration per unit for the handshake tests: the flow control is shared, the
# datapaths differ only in their register count.
STALL_CASES = [arithmetic_case(op, "f32", False) for op in ("add", "mul", "fma", "min")] + [
    arithmetic_case("add", "bf16", True), compare_case("lt", "f16", False), convert_case("f32", "f16", False),
    convert_case("f16", "f32", False), float_to_int_case("f32", "i32", False),
    int_to_float_case("i32", "f32", False)]


@pytest.mark.parametrize("case", STALL_CASES, ids=lambda case: case.id)
def test_stalls_and_gaps_lose_nothing(case):
    rng = _rng(case, salt=1)
    operands = operands_for(case, rng, knobs.vectors(DEFAULT_VECTORS), directed=False)
    operations = _operations(case, operands)
    for index, operation in enumerate(operations):
        operation["tag"] = index & 0xFF
    idle = rng.random(4 * len(operations) + 1000) < 0.3
    stall = rng.random(4 * len(operations) + 1000) < 0.4
    # Bursts of backpressure longer than the pipeline, too.
    stall[200:240] = True
    dut = case.build(tag_width=8)
    run = simulate(dut, operations, idle=lambda cycle: bool(idle[cycle]),
                   stall=lambda cycle: bool(stall[cycle]), max_cycles=len(idle))
    tags = [out["tag"] for out in run.outputs]
    assert tags == [index & 0xFF for index in range(len(operations))], (
        f"{case.id}: tags out of order or lost; {knobs.describe(DEFAULT_VECTORS)}")
    _check_results(case, operations, run.outputs, expected_for(case, operands), DEFAULT_VECTORS)


ELABORATIONS = {
    "add": lambda: FloatAdder(),
    "sub-bf16-flush-tag": lambda: FloatAdder(fmt="bf16", flush_subnormals=True, subtract=True, tag_width=4),
    "mul": lambda: FloatMultiplier(),
    "fma-bf16-flush": lambda: FloatFusedMultiplyAdd(fmt="bf16", flush_subnormals=True),
    "eq": lambda: FloatCompare(operation="eq"),
    "min": lambda: FloatMinMax(),
    "f16-f32": lambda: FloatConverter(source="f16", target="f32"),
    "f32-u32": lambda: FloatToInteger(integer="u32"),
    "i32-f16": lambda: IntegerToFloat(fmt="f16"),
}


@pytest.mark.parametrize("name", ELABORATIONS)
def test_elaborates_to_verilog(name):
    text = verilog.convert(ELABORATIONS[name](), name="top")
    assert "module top" in text


@pytest.mark.parametrize("name", ["fp_add", "fp_mul", "fp_fma", "fp_compare", "fp_min_max", "fp_convert",
                                  "fp_to_int", "int_to_fp"])
def test_registered_with_defaults(name):
    block = get_block(name)
    unit = block.build()
    unit._MustUse__silence = True  # built in the registry's file, only to read its latency
    assert block.family == "fp"
    assert unit.latency >= 1


@pytest.mark.parametrize("build, message", [
    (lambda: FloatAdder(fmt="f64"), "fmt"),
    (lambda: FloatAdder(flush_subnormals=1), "flush_subnormals"),
    (lambda: FloatAdder(subtract="yes"), "subtract"),
    (lambda: FloatMultiplier(tag_width=-1), "tag_width"),
    (lambda: FloatMultiplier(dsp_tile=4), "dsp_tile"),
    (lambda: FloatCompare(operation="gt"), "operation"),
    (lambda: FloatMinMax(operation="median"), "operation"),
    (lambda: FloatConverter(source="f32", target="f32"), "target"),
    (lambda: FloatConverter(source="f8"), "source"),
    (lambda: FloatToInteger(integer="i64"), "integer"),
    (lambda: IntegerToFloat(integer="s32"), "integer"),
])
def test_bad_parameters_are_named(build, message):
    with pytest.raises(ValueError, match=message):
        build()
