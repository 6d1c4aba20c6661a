# amaranth: UnusedElaboratable=no
# (Units built only to check their parameters are never elaborated.)
"""int_to_fp (:class:`rtl.fp.int_to_fp.IntegerToFloat`): its tests and runners.

The standard FP unit tests (:func:`testbenches.fp.suite.unit_tests`) on the configuration below:
cocotb on Verilator against ``golden.fp``, the ``amaranth.sim`` checks from i32 and u32 to every
format x flush mode, the Verilog, the registration and the parameter checks.
"""

from rtl.fp.int_to_fp import IntegerToFloat

from .suite import unit_tests

# cocotb runs the tests in this module's namespace: the generic ones are imported by name.
from .tb import golden_match_parallel, golden_match_under_stalls, one_operation_per_cycle, reset_mid_transfer  # noqa: F401

globals().update(unit_tests(
    __name__, IntegerToFloat,
    configurations=[{"fmt": "bf16", "integer": "u32"}],
    elaborations={"i32-f16": lambda: IntegerToFloat(fmt="f16")},
    bad_parameters=[(lambda: IntegerToFloat(integer="s32"), "integer")],
))
