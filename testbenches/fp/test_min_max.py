# amaranth: UnusedElaboratable=no
# (Units built only to check their parameters are never elaborated.)
"""fp_min_max (:class:`rtl.fp.min_max.FloatMinMax`): its tests and runners.

On Verilator (cocotb): the generic FP unit tests of :mod:`testbenches.fp.tb` against
``golden.fp``, on the unit itself (fast: a few configurations) and through 16 copies in lockstep
(slow: 10**6 vectors in every configuration).

In ``amaranth.sim``: the checks of :mod:`testbenches.fp.sim_checks` on every format x flush mode
of the unit (against SoftFloat and ``golden.fp``, with the timing contract) and its handshake
under stalls. In pure Python: its Verilog, its registration and its parameter checks.
"""

import pytest
from amaranth.back import verilog

from rtl.fp.min_max import FloatMinMax
from scripts.sim import knobs

from .sim_checks import (
    CASES,
    SLOW_VECTORS,
    STALL_CASES,
    case_id,
    cases_of,
    check_oracles_and_timing,
    check_registered,
    check_stalls_and_gaps,
    run_case,
)

# cocotb runs the tests in this module's namespace: the generic ones (golden_match_under_stalls,
# one_operation_per_cycle, reset_mid_transfer, golden_match_parallel) are imported by name.
from .tb import (  # noqa: F401
    configuration_id,
    configurations,
    golden_match_parallel,
    golden_match_under_stalls,
    one_operation_per_cycle,
    reset_mid_transfer,
    run_million,
    run_unit,
)

BLOCK = "fp_min_max"
MODULE = __name__


# ---------------------------------------------------------------- cocotb on Verilator

@pytest.mark.parametrize("params", [
    {"fmt": "bf16", "operation": "min"},
], ids=configuration_id)
def test_fp_min_max(params):
    run_unit(BLOCK, MODULE, params)


@pytest.mark.slow
@pytest.mark.parametrize("params", configurations(BLOCK), ids=configuration_id)
def test_million_vectors(params):
    run_million(BLOCK, MODULE, params)


# ---------------------------------------------------------------- amaranth.sim and pure Python

@pytest.mark.parametrize("case", cases_of(FloatMinMax, CASES), ids=case_id)
def test_unit_matches_oracles(case):
    check_oracles_and_timing(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", cases_of(FloatMinMax, CASES), ids=case_id)
def test_unit_matches_oracles_long(case):
    run_case(case, knobs.vectors(SLOW_VECTORS), SLOW_VECTORS)


@pytest.mark.parametrize("case", cases_of(FloatMinMax, STALL_CASES), ids=case_id)
def test_stalls_and_gaps_lose_nothing(case):
    check_stalls_and_gaps(case)


ELABORATIONS = {
    "min": lambda: FloatMinMax(),
}


@pytest.mark.parametrize("name", ELABORATIONS)
def test_elaborates_to_verilog(name):
    text = verilog.convert(ELABORATIONS[name](), name="top")
    assert "module top" in text


def test_registered_with_defaults():
    check_registered(BLOCK)


@pytest.mark.parametrize("build, message", [
    (lambda: FloatMinMax(operation="median"), "operation"),
])
def test_bad_parameters_are_named(build, message):
    with pytest.raises(ValueError, match=message):
        build()
