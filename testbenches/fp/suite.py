"""The standard pytest tests of an FP unit, defined once; each unit's ``test_<rtl module>.py`` binds them.

Every unit is tested the same way and differs only in its block, its class, the configurations
it runs on Verilator, what it elaborates and which bad parameters it refuses. A unit's file says
only that, and binds the tests into its own namespace::

    globals().update(unit_tests(__name__, FloatAdder,
                                configurations=[...], elaborations={...}, bad_parameters=[...]))

(the block's name is the module's, less ``test_``: ``testbenches.fp.test_fp_add`` tests ``fp_add``)

followed by the tests that are its own. :func:`unit_tests` makes the tests of a pipelined unit
(the ``amaranth.sim`` checks of :mod:`testbenches.fp.sim_checks`), :func:`divsqrt_tests` those
of the divider and the square root (the bodies of :mod:`testbenches.fp.sim_divsqrt`); both start
with the same runners on Verilator (:func:`testbenches.fp.tb.run_unit` and its 16-lane
relatives), which run the cocotb tests found in ``module``. Those cocotb tests stay imported by
name in each unit's file, where cocotb and ``bench_fp.py`` look for them.

Why a factory of module-level functions rather than a base test class that each unit subclasses:

* The node ids stay as they are, ``test_fp_add.py::test_fp_add[fmt=f32]``: a class would add
  ``::TestAdder`` to every id (and to every ``-k`` and command that names one), and a ``Test*``
  base class would itself be collected wherever it is imported.
* pytest collects the ``test_*`` functions of a module's ``__dict__`` by name. Each function
  made here takes the unit module's ``__module__``, name and qualified name, so it is collected
  there even with ``collect_imported_tests = false``, and reported under its own name. Every
  call makes new function objects, so one unit's marks (``parametrize``, ``slow``) never reach
  another's.
* A unit gets the tests it has cases for: its share of the shared tables (``CASES``,
  ``GENERIC_CASES``, the 16-bit conversions, the unary 16-bit configurations) decides, and a
  test whose share is empty is left out rather than collected as one skipped ``NOTSET`` case.
"""

import pytest
from amaranth.back import verilog

from scripts.sim import knobs

from . import sim_divsqrt as divsqrt
from .sim_checks import (
    CASES,
    DEFAULT_VECTORS,
    GENERIC_CASES,
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
from .tb import (
    MILLION_LANES,
    configuration_id,
    configurations,
    run_lanes,
    run_million,
    run_unit,
    unary_16_bit_configurations,
)

__all__ = ["unit_tests", "divsqrt_tests"]


class _Tests(dict):
    """Test functions by name, each renamed and re-homed into the unit's ``module``."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def add(self, name=None):
        def bind(function):
            function.__name__ = function.__qualname__ = name or function.__name__
            function.__module__ = self.module
            self[function.__name__] = function
            return function
        return bind

    def add_each(self, argnames, values, ids, *, slow=False):
        """Add the decorated test parametrised over ``values`` (marked slow if ``slow``); with no
        values, leave it out rather than collect one skipped ``NOTSET`` case."""
        def bind(function):
            if not values:
                return function
            function = pytest.mark.parametrize(argnames, values, ids=ids)(function)
            return self.add()(pytest.mark.slow(function) if slow else function)
        return bind


def _verilator_tests(tests, block, module, fast, slow=()):
    """``test_<block>`` on the configurations ``fast`` (and ``test_verilator`` on ``slow``, slow);
    slow, every f16/bf16 input of the block's unary 16-bit configurations and 10**6 vectors in
    each of its configurations."""
    @tests.add(f"test_{block}")
    @pytest.mark.parametrize("params", fast, ids=configuration_id)
    def runner(params):
        """The unit's cocotb tests on the unit itself, in one configuration."""
        run_unit(block, module, params)

    if slow:
        @tests.add()
        @pytest.mark.slow
        @pytest.mark.parametrize("params", slow, ids=configuration_id)
        def test_verilator(params):
            """The generated Verilog on Verilator (cocotb, against golden.fp, with stalls and II = 1)."""
            run_unit(block, module, params)

    @tests.add_each("params", configurations(block, unary_16_bit_configurations), configuration_id, slow=True)
    def test_exhaustive_16_bit_unary(params):
        """All 65,536 inputs of every unary f16/bf16 operation of the unit."""
        run_lanes(block, module, params, MILLION_LANES, job="exhaustive")

    @tests.add()
    @pytest.mark.slow
    @pytest.mark.parametrize("params", configurations(block), ids=configuration_id)
    def test_million_vectors(params):
        run_million(block, module, params)


def _block_of(module):
    """The block a unit's test module tests: ``testbenches.fp.test_fp_add`` tests ``fp_add``."""
    return module.rpartition(".")[2].removeprefix("test_")


def unit_tests(module, component, *, configurations, elaborations, bad_parameters=()):
    """The standard tests of a pipelined unit, by name, for the test module named ``module``.

    On Verilator: ``test_<block>`` runs the unit's cocotb tests on each of ``configurations``;
    the slow runners put every configuration through 10**6 vectors and every unary 16-bit one
    through all its inputs. In ``amaranth.sim``, on the cases of ``component`` (a class of
    :mod:`rtl.fp`): the oracles and timing contract, the generic formats, the long runs (slow),
    every input of the 16-bit conversions (slow), stalls and gaps. In pure Python: each of
    ``elaborations`` (name: a function that builds a unit) converts to Verilog, the block is
    registered, and each of ``bad_parameters`` (``(build, message)``: ``build()`` raises a
    ``ValueError`` naming ``message``) is refused.
    """
    block = _block_of(module)
    tests = _Tests(module)
    _verilator_tests(tests, block, module, configurations)

    @tests.add()
    @pytest.mark.parametrize("case", cases_of(component, CASES), ids=case_id)
    def test_unit_matches_oracles(case):
        check_oracles_and_timing(case)

    @tests.add_each("case", cases_of(component, GENERIC_CASES), case_id)
    def test_generic_format_matches_golden(case):
        """Formats beyond the three named ones (e4m3, e5m2), against golden.fp alone."""
        run_case(case, knobs.vectors(DEFAULT_VECTORS), DEFAULT_VECTORS)

    @tests.add()
    @pytest.mark.slow
    @pytest.mark.parametrize("case", cases_of(component, CASES + GENERIC_CASES), ids=case_id)
    def test_unit_matches_oracles_long(case):
        run_case(case, knobs.vectors(SLOW_VECTORS), SLOW_VECTORS)

    @tests.add_each("case", cases_of(component, SIXTEEN_BIT_SOURCES), case_id, slow=True)
    def test_16_bit_conversions_exhaustive(case):
        check_16_bit_exhaustive(case)

    @tests.add()
    @pytest.mark.parametrize("case", cases_of(component, STALL_CASES), ids=case_id)
    def test_stalls_and_gaps_lose_nothing(case):
        check_stalls_and_gaps(case)

    @tests.add()
    @pytest.mark.parametrize("name", elaborations)
    def test_elaborates_to_verilog(name):
        text = verilog.convert(elaborations[name](), name="top")
        assert "module top" in text

    @tests.add()
    def test_registered_with_defaults():
        check_registered(block)

    if bad_parameters:
        @tests.add()
        @pytest.mark.parametrize("build, message", bad_parameters)
        def test_bad_parameters_are_named(build, message):
            with pytest.raises(ValueError, match=message):
                build()

    return tests


def divsqrt_tests(module, op, *, configurations, slow_configurations):
    """The standard tests of the divider (``op="div"``) or the square root (``op="sqrt"``), by name.

    On Verilator: as :func:`unit_tests`, and ``slow_configurations`` in the slow suite. In
    ``amaranth.sim``, with the bodies of :mod:`testbenches.fp.sim_divsqrt`: random operands in
    every format and flush mode (more in the slow suite), back-to-back issue, stalls, more bits
    per stage; the Verilog and the parameters.
    """
    block = _block_of(module)
    tests = _Tests(module)
    _verilator_tests(tests, block, module, configurations, slow_configurations)

    @tests.add()
    @pytest.mark.parametrize("flush", divsqrt.FLUSH)
    @pytest.mark.parametrize("fmt", divsqrt.FORMATS)
    def test_random(fmt, flush):
        divsqrt.random_test(op, fmt, flush, divsqrt.FAST_VECTORS)

    @tests.add()
    @pytest.mark.slow
    @pytest.mark.parametrize("flush", divsqrt.FLUSH)
    @pytest.mark.parametrize("fmt", divsqrt.FORMATS)
    def test_random_slow(fmt, flush):
        divsqrt.random_test(op, fmt, flush, divsqrt.SLOW_VECTORS)

    @tests.add()
    def test_back_to_back_issue():
        divsqrt.back_to_back_issue(op)

    @tests.add()
    @pytest.mark.parametrize("fmt", divsqrt.FORMATS)
    def test_stalls_keep_order(fmt):
        divsqrt.stalls_keep_order(op, fmt)

    @tests.add()
    @pytest.mark.parametrize("bits_per_stage", [2, 3, 4])
    @pytest.mark.parametrize("fmt", divsqrt.FORMATS)
    def test_bits_per_stage(fmt, bits_per_stage):
        divsqrt.bits_per_stage(op, fmt, bits_per_stage)

    @tests.add()
    @pytest.mark.parametrize("fmt", divsqrt.FORMATS)
    @pytest.mark.parametrize("flush", divsqrt.FLUSH)
    def test_verilog(fmt, flush):
        divsqrt.verilog(op, fmt, flush)

    # An Elaboratable whose constructor raises is still created (and never elaborated).
    @tests.add()
    @pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
    def test_parameters():
        divsqrt.parameters(op)

    return tests
