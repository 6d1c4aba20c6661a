"""fp_div (:class:`rtl.fp.fp_div.FloatDivider`): its tests and runners.

The standard tests of the divider and the square root (:func:`testbenches.fp.suite.divsqrt_tests`)
on the configurations below: cocotb on Verilator against ``golden.fp``; in ``amaranth.sim``, random
operands against SoftFloat in every format and flush mode, back-to-back issue, stalls, more bits
per stage, the Verilog and the parameters. Here: directed class-by-class and scaling operands,
and every pair of e3m4 encodings against ``golden.fp``.
"""

import numpy as np
import pytest

import golden.fp as gfp
from golden.fp.formats import float_format

from .sim_divsqrt import FLUSH, FLUSH_EXHAUSTIVE, FORMATS, GENERIC, run_and_check, scales
from .suite import divsqrt_tests

# cocotb runs the tests in this module's namespace: the generic ones are imported by name.
from .tb import golden_match_parallel, golden_match_under_stalls, one_operation_per_cycle, reset_mid_transfer  # noqa: F401

globals().update(divsqrt_tests(
    __name__, "div",
    configurations=[{"fmt": "f32"}, {"fmt": "f16"}],
    slow_configurations=[
        {"fmt": "f32"},
        {"fmt": "bf16", "flush_subnormals": True},
    ],
))


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
