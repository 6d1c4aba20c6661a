"""The ``amaranth.sim`` checks of the pipelined FP units (all but divide and square root).

Every unit x format x flush mode (:data:`CASES`) runs all pairs of
:func:`golden.fp.special_values` (with a random addend for fma, a stride through every
16-bit encoding for 16-bit conversions) and ``NEARTRAIN_VECTORS`` (default 300) random
operands from :func:`golden.fp.random_operand_tuples`, fed one per cycle, and compares bits
and flags with the oracles named in :mod:`testbenches.fp.sim_cases` (SoftFloat for f32/f16,
SoftFloat and ``golden.fp`` for bf16). The same run checks the timing contract: an operation
is accepted every cycle and each result leaves exactly the documented latency later
(:data:`golden.fp.latencies.LATENCY`, not the unit's own ``latency`` attribute;
:func:`check_oracles_and_timing`). :func:`check_stalls_and_gaps` drops ``o.ready`` and
``i.valid`` at random, with tags, and checks that nothing is lost, duplicated or reordered.

Each unit's ``test_<rtl module>.py`` runs the cases of its class (:func:`cases_of`), with the
tests that :func:`testbenches.fp.suite.unit_tests` makes.
``NEARTRAIN_SEED`` (default 1) seeds everything; a failure prints it with the inputs,
expected and actual values in hex. The ``slow`` tests run 20,000 random vectors per
configuration and every 16-bit encoding through each 16-bit conversion.
"""

import zlib

import numpy as np

from golden.fp.latencies import LATENCY
from rtl.fp.format import FloatFormat
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

__all__ = ["CASES", "GENERIC_CASES", "SIXTEEN_BIT_SOURCES", "STALL_CASES", "DEFAULT_VECTORS", "SLOW_VECTORS",
           "cases_of", "case_id", "run_case", "check_oracles_and_timing", "check_16_bit_exhaustive",
           "check_stalls_and_gaps", "check_registered"]

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
    # Low significand bits multiplied in LUT rows beside one DSP tile, and products all in LUTs.
    + [arithmetic_case(op, "f32", False, dsp_tile=24, lut_bits=bits)
       for op in ("mul", "fma") for bits in (7, 24)]
    + [arithmetic_case(op, "f16", True, lut_bits=3) for op in ("mul", "fma")]
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

SIXTEEN_BIT_SOURCES = [case for case in CASES if case.op == "convert" and case.source in ("f16", "bf16")]

# One configuration per unit for the handshake tests: the flow control is shared, the
# datapaths differ only in their register count.
STALL_CASES = [arithmetic_case(op, "f32", False) for op in ("add", "mul", "fma", "min")] + [
    arithmetic_case("add", "bf16", True), compare_case("lt", "f16", False), convert_case("f32", "f16", False),
    convert_case("f16", "f32", False), float_to_int_case("f32", "i32", False),
    int_to_float_case("i32", "f32", False)]


def cases_of(unit, cases):
    """The cases of ``cases`` that build ``unit`` (a class of :mod:`rtl.fp`)."""
    return [case for case in cases if case.unit is unit]


def case_id(case):
    return case.id


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


def run_case(case, vectors, default_vectors):
    """Directed and ``vectors`` random operands through ``case``'s unit: bits and flags as the oracles."""
    operands = operands_for(case, _rng(case), vectors)
    dut = case.build()
    operations = _operations(case, operands)
    run = simulate(dut, operations)
    _check_results(case, operations, run.outputs, expected_for(case, operands), default_vectors)
    return dut, run


def check_oracles_and_timing(case):
    """:func:`run_case` at the default vector count, and the timing contract."""
    dut, run = run_case(case, knobs.vectors(DEFAULT_VECTORS), DEFAULT_VECTORS)
    # II = 1 with nothing stalling: one acceptance per cycle, each result `latency` cycles later.
    accepted = np.array(run.accepted_cycles)
    assert (np.diff(accepted) == 1).all(), f"{case.id}: an operation was refused while the output was free"
    delays = set((np.array(run.output_cycles) - accepted).tolist())
    documented = LATENCY[case.id]
    assert delays == {documented}, f"{case.id}: result delays {sorted(delays)}, documented {documented}"


def check_16_bit_exhaustive(case):
    """Every 16-bit encoding through a conversion from f16 or bf16."""
    operands = [np.arange(1 << 16, dtype=np.uint64)]
    operations = _operations(case, operands)
    run = simulate(case.build(), operations)
    _check_results(case, operations, run.outputs, expected_for(case, operands), None)


def check_stalls_and_gaps(case):
    """Random ``i.valid`` gaps and ``o.ready`` stalls (and a burst longer than the pipeline), with tags."""
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


def check_registered(name):
    """Registered block ``name`` is in the fp family and builds with its defaults."""
    block = get_block(name)
    unit = block.build()
    unit._MustUse__silence = True  # built in the registry's file, only to read its latency
    assert block.family == "fp"
    assert unit.latency >= 1
