"""fp_sqrt (:class:`rtl.fp.square_root.FloatSquareRoot`): its tests and runners.

On Verilator (cocotb): the generic FP unit tests of :mod:`testbenches.fp.tb` against
``golden.fp``, on the unit itself (fast: two configurations; slow: two more) and through 16
copies in lockstep (slow: 10**6 vectors in every configuration, and every f16/bf16 encoding;
bf16 without flushing in the fast suite).

In ``amaranth.sim`` (the bodies shared with the divider are in
:mod:`testbenches.fp.sim_divsqrt`): random and directed operands against SoftFloat in every
format and flush mode, every f16 and bf16 encoding, every encoding of small generic formats
against ``golden.fp``, back-to-back issue, stalls, more bits per stage, the Verilog and the
parameters.
"""

import numpy as np
import pytest

import golden.fp as gfp
from rtl.fp.format import float_format

from . import sim_divsqrt as divsqrt
from .sim_divsqrt import (
    FAST_VECTORS,
    FLUSH,
    FLUSH_EXHAUSTIVE,
    FORMATS,
    GENERIC,
    SLOW_VECTORS,
    run_and_check,
    scales,
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

BLOCK = "fp_sqrt"
OP = "sqrt"
MODULE = __name__


# ---------------------------------------------------------------- cocotb on Verilator

@pytest.mark.parametrize("params", [{"fmt": "f32"}, {"fmt": "bf16", "flush_subnormals": True}],
                         ids=configuration_id)
def test_fp_sqrt(params):
    run_unit(BLOCK, MODULE, params)


@pytest.mark.slow
@pytest.mark.parametrize("params", [
    {"fmt": "f32", "flush_subnormals": True, "tag_width": 4},
    {"fmt": "f16"},
], ids=configuration_id)
def test_verilator(params):
    """The generated Verilog on Verilator (cocotb, against golden.fp, with stalls and II = 1)."""
    run_unit(BLOCK, MODULE, params)


def test_exhaustive_16_bit_unary_fast():
    """Every bf16 encoding through the square root (the rest of the set is in the slow suite)."""
    run_lanes(BLOCK, MODULE, {"fmt": "bf16"}, 4, job="exhaustive")


@pytest.mark.slow
@pytest.mark.parametrize("params", configurations(BLOCK, unary_16_bit_configurations), ids=configuration_id)
def test_exhaustive_16_bit_unary(params):
    """All 65,536 inputs of the f16 and bf16 square roots, both flush modes."""
    run_lanes(BLOCK, MODULE, params, MILLION_LANES, job="exhaustive")


@pytest.mark.slow
@pytest.mark.parametrize("params", configurations(BLOCK), ids=configuration_id)
def test_million_vectors(params):
    run_million(BLOCK, MODULE, params)


# ---------------------------------------------------------------- amaranth.sim and pure Python

@pytest.mark.parametrize("flush", FLUSH)
@pytest.mark.parametrize("fmt", FORMATS)
def test_random(fmt, flush):
    divsqrt.random_test(OP, fmt, flush, FAST_VECTORS)


@pytest.mark.slow
@pytest.mark.parametrize("flush", FLUSH)
@pytest.mark.parametrize("fmt", FORMATS)
def test_random_slow(fmt, flush):
    divsqrt.random_test(OP, fmt, flush, SLOW_VECTORS)


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
@pytest.mark.parametrize("flush", FLUSH_EXHAUSTIVE)
def test_sqrt_exhaustive(fmt, flush):
    """The square root of every 16-bit encoding."""
    run_and_check("sqrt", fmt, [np.arange(1 << 16)], flush=flush, label="exhaustive sqrt")


@pytest.mark.parametrize("fmt", FORMATS)
def test_sqrt_directed(fmt):
    fmt = float_format(fmt)
    values = [int(x) for x in gfp.special_values(fmt)] + scales(fmt)
    for flush in (False, True):
        run_and_check("sqrt", fmt, [values], flush=flush, label="directed sqrt")


@pytest.mark.parametrize("flush", FLUSH)
@pytest.mark.parametrize("name", sorted(GENERIC))
def test_generic_format_sqrt_exhaustive(name, flush):
    """Every encoding of e3m4, e2m5 and e4m3, against golden.fp."""
    fmt = GENERIC[name]
    run_and_check("sqrt", fmt, [np.arange(1 << fmt.width)], flush=flush, reference=gfp.sqrt,
                  label="exhaustive generic")


def test_back_to_back_issue():
    divsqrt.back_to_back_issue(OP)


@pytest.mark.parametrize("fmt", FORMATS)
def test_stalls_keep_order(fmt):
    divsqrt.stalls_keep_order(OP, fmt)


@pytest.mark.parametrize("bits_per_stage", [2, 3, 4])
@pytest.mark.parametrize("fmt", FORMATS)
def test_bits_per_stage(fmt, bits_per_stage):
    divsqrt.bits_per_stage(OP, fmt, bits_per_stage)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("flush", FLUSH)
def test_verilog(fmt, flush):
    divsqrt.verilog(OP, fmt, flush)


# An Elaboratable whose constructor raises is still created (and never elaborated).
@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_parameters():
    divsqrt.parameters(OP)
