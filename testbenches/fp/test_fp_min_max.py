# amaranth: UnusedElaboratable=no
# (Units built only to check their parameters are never elaborated.)
"""fp_min_max (:class:`rtl.fp.fp_min_max.FloatMinMax`): its tests and runners.

The standard FP unit tests (:func:`testbenches.fp.suite.unit_tests`) on the configuration below:
cocotb on Verilator against ``golden.fp``, the ``amaranth.sim`` checks of min and max in every
format x flush mode, the Verilog, the registration and the parameter checks.
"""

from rtl.fp.fp_min_max import FloatMinMax

from .suite import unit_tests

# cocotb runs the tests in this module's namespace: the generic ones are imported by name.
from .tb import golden_match_parallel, golden_match_under_stalls, one_operation_per_cycle, reset_mid_transfer  # noqa: F401

globals().update(unit_tests(
    __name__, FloatMinMax,
    configurations=[{"fmt": "bf16", "operation": "min"}],
    elaborations={"min": lambda: FloatMinMax()},
    bad_parameters=[(lambda: FloatMinMax(operation="median"), "operation")],
))
