# amaranth: UnusedElaboratable=no
# (Units built only to check their parameters are never elaborated.)
"""fp_fma (:class:`rtl.fp.fp_fma.FloatFusedMultiplyAdd`): its tests and runners.

The standard FP unit tests (:func:`testbenches.fp.suite.unit_tests`) on the configurations below:
cocotb on Verilator against ``golden.fp``, the ``amaranth.sim`` checks of every format x flush
mode (with e4m3, e5m2 and a single DSP product tile), the Verilog and the registration. Here
too, fast: the 16-copy fixture itself, on this three-operand unit.
"""

from rtl.fp.fp_fma import FloatFusedMultiplyAdd

from .suite import unit_tests

# cocotb runs the tests in this module's namespace: the generic ones are imported by name.
from .tb import (  # noqa: F401
    golden_match_parallel,
    golden_match_under_stalls,
    one_operation_per_cycle,
    reset_mid_transfer,
    run_lanes,
)

BLOCK = "fp_fma"
MODULE = __name__

globals().update(unit_tests(
    MODULE, FloatFusedMultiplyAdd,
    configurations=[
        {"fmt": "f32"},
        {"fmt": "bf16"},
    ],
    elaborations={"fma-bf16-flush": lambda: FloatFusedMultiplyAdd(fmt="bf16", flush_subnormals=True)},
    bad_parameters=[(lambda: FloatFusedMultiplyAdd(fmt="f16", lut_bits=12), "lut_bits")],
))


def test_parallel_fixture():
    """The 16-copy fixture itself, on a three-operand unit with random and directed operands."""
    run_lanes(BLOCK, MODULE, {"fmt": "f16"}, 3)
