"""fp_sqrt (:class:`rtl.fp.fp_sqrt.FloatSquareRoot`): its tests and runners.

The standard tests of the divider and the square root (:func:`testbenches.fp.suite.divsqrt_tests`)
on the configurations below: cocotb on Verilator against ``golden.fp`` (and, slow, every f16/bf16
encoding); in ``amaranth.sim``, random operands against SoftFloat in every format and flush mode,
back-to-back issue, stalls, more bits per stage, the Verilog and the parameters. Here: every bf16
encoding on Verilator (fast), and in ``amaranth.sim`` directed operands, every f16 and bf16
encoding, and every encoding of small generic formats against ``golden.fp``.
"""

import numpy as np
import pytest

import golden.fp as gfp
from golden.fp.formats import float_format

from .sim_divsqrt import FLUSH, FLUSH_EXHAUSTIVE, FORMATS, GENERIC, run_and_check, scales
from .suite import divsqrt_tests

# cocotb runs the tests in this module's namespace: the generic ones are imported by name.
from .tb import (  # noqa: F401
    golden_match_parallel,
    golden_match_under_stalls,
    one_operation_per_cycle,
    reset_mid_transfer,
    run_lanes,
)

BLOCK = "fp_sqrt"
MODULE = __name__

globals().update(divsqrt_tests(
    MODULE, "sqrt",
    configurations=[{"fmt": "f32"}, {"fmt": "bf16", "flush_subnormals": True}],
    slow_configurations=[
        {"fmt": "f32", "flush_subnormals": True, "tag_width": 4},
        {"fmt": "f16"},
    ],
))


def test_exhaustive_16_bit_unary_fast():
    """Every bf16 encoding through the square root (the rest of the set is in the slow suite)."""
    run_lanes(BLOCK, MODULE, {"fmt": "bf16"}, 4, job="exhaustive")


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
