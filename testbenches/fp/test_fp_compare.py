# amaranth: UnusedElaboratable=no
# (Units built only to check their parameters are never elaborated.)
"""fp_compare (:class:`rtl.fp.fp_compare.FloatCompare`): its tests and runners.

The standard FP unit tests (:func:`testbenches.fp.suite.unit_tests`) on the configurations below:
cocotb on Verilator against ``golden.fp``, the ``amaranth.sim`` checks of every comparison x
format x flush mode (and the quiet ones), the Verilog, the registration and the parameter checks.
"""

from rtl.fp.fp_compare import FloatCompare

from .suite import unit_tests

# cocotb runs the tests in this module's namespace: the generic ones are imported by name.
from .tb import golden_match_parallel, golden_match_under_stalls, one_operation_per_cycle, reset_mid_transfer  # noqa: F401

globals().update(unit_tests(
    __name__, FloatCompare,
    configurations=[
        {"fmt": "f32", "operation": "lt"},
        {"fmt": "f16", "operation": "eq"},
    ],
    elaborations={"eq": lambda: FloatCompare(operation="eq")},
    bad_parameters=[(lambda: FloatCompare(operation="gt"), "operation")],
))
