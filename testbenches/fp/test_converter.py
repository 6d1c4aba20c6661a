# amaranth: UnusedElaboratable=no
# (Units built only to check their parameters are never elaborated.)
"""fp_convert (:class:`rtl.fp.converter.FloatConverter`): its tests and runners.

On Verilator (cocotb): the generic FP unit tests of :mod:`testbenches.fp.tb` against
``golden.fp``, on the unit itself (fast: a few configurations) and through 16 copies in lockstep
(slow: 10**6 vectors in every configuration). Every f16/bf16 encoding goes through every
conversion from those formats (one fast, the rest slow).

In ``amaranth.sim``: the checks of :mod:`testbenches.fp.sim_checks` on every format x flush mode
of the unit (against SoftFloat and ``golden.fp``, with the timing contract) and its handshake
under stalls. In pure Python: its Verilog, its registration and its parameter checks.
"""

import pytest
from amaranth.back import verilog

from rtl.fp.converter import FloatConverter
from scripts.sim import knobs

from .sim_checks import (
    CASES,
    SIXTEEN_BIT_SOURCES,
    SLOW_VECTORS,
    STALL_CASES,
    case_id,
    cases_of,
    check_16_bit_exhaustive,
    check_oracles_and_timing,
    check_registered,
    check_stalls_and_gaps,
    run_case,
)

# cocotb runs the tests in this module's namespace: the generic ones (golden_match_under_stalls,
# one_operation_per_cycle, reset_mid_transfer, golden_match_parallel) are imported by name.
from .tb import (  # noqa: F401
    MILLION_LANES,
    configuration_id,
    configurations,
    golden_match_parallel,
    golden_match_under_stalls,
    one_operation_per_cycle,
    reset_mid_transfer,
    run_lanes,
    run_million,
    run_unit,
    unary_16_bit_configurations,
)

BLOCK = "fp_convert"
MODULE = __name__


# ---------------------------------------------------------------- cocotb on Verilator

@pytest.mark.parametrize("params", [
    {"source": "f32", "target": "f16"},
    {"source": "bf16", "target": "f32"},
], ids=configuration_id)
def test_fp_convert(params):
    run_unit(BLOCK, MODULE, params)


def test_exhaustive_16_bit_unary_fast():
    """Every f16 encoding converted to f32 (the rest of the set is in the slow suite)."""
    run_lanes(BLOCK, MODULE, {"source": "f16", "target": "f32"}, 4, job="exhaustive")


@pytest.mark.slow
@pytest.mark.parametrize("params", configurations(BLOCK, unary_16_bit_configurations), ids=configuration_id)
def test_exhaustive_16_bit_unary(params):
    """All 65,536 inputs of every unary f16/bf16 operation of the unit."""
    run_lanes(BLOCK, MODULE, params, MILLION_LANES, job="exhaustive")


@pytest.mark.slow
@pytest.mark.parametrize("params", configurations(BLOCK), ids=configuration_id)
def test_million_vectors(params):
    run_million(BLOCK, MODULE, params)


# ---------------------------------------------------------------- amaranth.sim and pure Python

@pytest.mark.parametrize("case", cases_of(FloatConverter, CASES), ids=case_id)
def test_unit_matches_oracles(case):
    check_oracles_and_timing(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", cases_of(FloatConverter, CASES), ids=case_id)
def test_unit_matches_oracles_long(case):
    run_case(case, knobs.vectors(SLOW_VECTORS), SLOW_VECTORS)


@pytest.mark.slow
@pytest.mark.parametrize("case", cases_of(FloatConverter, SIXTEEN_BIT_SOURCES), ids=case_id)
def test_16_bit_conversions_exhaustive(case):
    check_16_bit_exhaustive(case)


@pytest.mark.parametrize("case", cases_of(FloatConverter, STALL_CASES), ids=case_id)
def test_stalls_and_gaps_lose_nothing(case):
    check_stalls_and_gaps(case)


ELABORATIONS = {
    "f16-f32": lambda: FloatConverter(source="f16", target="f32"),
}


@pytest.mark.parametrize("name", ELABORATIONS)
def test_elaborates_to_verilog(name):
    text = verilog.convert(ELABORATIONS[name](), name="top")
    assert "module top" in text


def test_registered_with_defaults():
    check_registered(BLOCK)


@pytest.mark.parametrize("build, message", [
    (lambda: FloatConverter(source="f32", target="f32"), "target"),
    (lambda: FloatConverter(source="f8"), "source"),
])
def test_bad_parameters_are_named(build, message):
    with pytest.raises(ValueError, match=message):
        build()
