"""fp_div (:class:`rtl.fp.divider.FloatDivider`): its tests and runners.

On Verilator (cocotb): the generic FP unit tests of :mod:`testbenches.fp.tb` against
``golden.fp``, on the unit itself (fast: two formats; slow: two more configurations) and through
16 copies in lockstep (slow: 10**6 vectors in every configuration).

In ``amaranth.sim`` (the bodies shared with the square root are in
:mod:`testbenches.fp.sim_divsqrt`): random and directed operands against SoftFloat in every
format and flush mode, every e3m4 pair against ``golden.fp``, back-to-back issue, stalls, more
bits per stage, the Verilog and the parameters.
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
    configuration_id,
    configurations,
    golden_match_parallel,
    golden_match_under_stalls,
    one_operation_per_cycle,
    reset_mid_transfer,
    run_million,
    run_unit,
)

BLOCK = "fp_div"
OP = "div"
MODULE = __name__


# ---------------------------------------------------------------- cocotb on Verilator

@pytest.mark.parametrize("params", [{"fmt": "f32"}, {"fmt": "f16"}], ids=configuration_id)
def test_fp_div(params):
    run_unit(BLOCK, MODULE, params)


@pytest.mark.slow
@pytest.mark.parametrize("params", [
    {"fmt": "f32"},
    {"fmt": "bf16", "flush_subnormals": True},
], ids=configuration_id)
def test_verilator(params):
    """The generated Verilog on Verilator (cocotb, against golden.fp, with stalls and II = 1)."""
    run_unit(BLOCK, MODULE, params)


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


@pytest.mark.parametrize("flush", FLUSH)
@pytest.mark.parametrize("fmt", FORMATS)
def test_div_directed(fmt, flush):
    """Every directed class value against every other, and each against binade scalings.

    Scaling the smallest normals and the largest subnormals by powers of two walks the
    quotient down through the subnormal range (exact results, ties, and results rounding
    up to the smallest normal); scaling the largest values walks it into overflow.
    """
    fmt = float_format(fmt)
    special = [int(x) for x in gfp.special_values(fmt)]
    pairs = [(a, b) for a in special for b in special]
    pairs += [(a, b) for a in special for b in scales(fmt)]
    pairs += [(b, a) for a in special for b in scales(fmt)]
    run_and_check("div", fmt, list(zip(*pairs, strict=True)), flush=flush, label="directed div")


@pytest.mark.parametrize("flush", FLUSH_EXHAUSTIVE)
def test_generic_format_div_exhaustive(flush):
    """Every pair of e3m4 encodings, against golden.fp."""
    fmt = GENERIC["e3m4"]
    a, b = np.meshgrid(np.arange(1 << fmt.width), np.arange(1 << fmt.width))
    run_and_check("div", fmt, [a.reshape(-1), b.reshape(-1)], flush=flush, reference=gfp.div,
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
