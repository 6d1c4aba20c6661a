# amaranth: UnusedElaboratable=no
# (Units built only to check their parameters are never elaborated.)
"""fp_to_int (:class:`rtl.fp.fp_to_int.FloatToInteger`): its tests and runners.

The standard FP unit tests (:func:`testbenches.fp.suite.unit_tests`) on the configuration below:
cocotb on Verilator against ``golden.fp``, the ``amaranth.sim`` checks of every format x flush
mode to i32 and u32, the Verilog, the registration and the parameter checks. Every f16/bf16
encoding goes through every conversion to i32 and u32, on Verilator and in ``amaranth.sim``
(slow).
"""

from rtl.fp.fp_to_int import FloatToInteger

from .suite import unit_tests

# cocotb runs the tests in this module's namespace: the generic ones are imported by name.
from .tb import golden_match_parallel, golden_match_under_stalls, one_operation_per_cycle, reset_mid_transfer  # noqa: F401

globals().update(unit_tests(
    __name__, FloatToInteger,
    configurations=[{"fmt": "f32", "integer": "i32"}],
    elaborations={"f32-u32": lambda: FloatToInteger(integer="u32")},
    bad_parameters=[(lambda: FloatToInteger(integer="i64"), "integer")],
))
