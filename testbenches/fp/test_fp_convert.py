# amaranth: UnusedElaboratable=no
# (Units built only to check their parameters are never elaborated.)
"""fp_convert (:class:`rtl.fp.fp_convert.FloatConverter`): its tests and runners.

The standard FP unit tests (:func:`testbenches.fp.suite.unit_tests`) on the configurations below:
cocotb on Verilator against ``golden.fp``, the ``amaranth.sim`` checks of every pair of formats x
flush mode, the Verilog, the registration and the parameter checks. Every f16/bf16 encoding goes
through every conversion from those formats, on Verilator and in ``amaranth.sim`` (slow; one
fast, here).
"""

from rtl.fp.fp_convert import FloatConverter

from .suite import unit_tests

# cocotb runs the tests in this module's namespace: the generic ones are imported by name.
from .tb import (  # noqa: F401
    golden_match_parallel,
    golden_match_under_stalls,
    one_operation_per_cycle,
    reset_mid_transfer,
    run_lanes,
)

BLOCK = "fp_convert"
MODULE = __name__

globals().update(unit_tests(
    MODULE, FloatConverter,
    configurations=[
        {"source": "f32", "target": "f16"},
        {"source": "bf16", "target": "f32"},
    ],
    elaborations={"f16-f32": lambda: FloatConverter(source="f16", target="f32")},
    bad_parameters=[
        (lambda: FloatConverter(source="f32", target="f32"), "target"),
        (lambda: FloatConverter(source="f8"), "source"),
    ],
))


def test_exhaustive_16_bit_unary_fast():
    """Every f16 encoding converted to f32 (the rest of the set is in the slow suite)."""
    run_lanes(BLOCK, MODULE, {"source": "f16", "target": "f32"}, 4, job="exhaustive")
