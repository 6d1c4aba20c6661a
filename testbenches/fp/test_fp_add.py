# amaranth: UnusedElaboratable=no
# (Units built only to check their parameters are never elaborated.)
"""fp_add (:class:`rtl.fp.fp_add.FloatAdder`, also with ``subtract``): its tests and runners.

The standard FP unit tests (:func:`testbenches.fp.suite.unit_tests`) on the configurations below:
cocotb on Verilator against ``golden.fp``, the ``amaranth.sim`` checks of every format x flush
mode (with e4m3 and e5m2), the Verilog, the registration and the parameter checks.
"""

from rtl.fp.fp_add import FloatAdder

from .suite import unit_tests

# cocotb runs the tests in this module's namespace: the generic ones are imported by name.
from .tb import golden_match_parallel, golden_match_under_stalls, one_operation_per_cycle, reset_mid_transfer  # noqa: F401

globals().update(unit_tests(
    __name__, FloatAdder,
    configurations=[
        {"fmt": "f32"},
        {"fmt": "f16"},
        {"fmt": "bf16"},
        {"fmt": "f32", "subtract": True, "tag_width": 5},
        {"fmt": "f32", "flush_subnormals": True},
    ],
    elaborations={
        "add": lambda: FloatAdder(),
        "sub-bf16-flush-tag":
            lambda: FloatAdder(fmt="bf16", flush_subnormals=True, subtract=True, tag_width=4),
    },
    bad_parameters=[
        (lambda: FloatAdder(fmt="f64"), "fmt"),
        (lambda: FloatAdder(flush_subnormals=1), "flush_subnormals"),
        (lambda: FloatAdder(subtract="yes"), "subtract"),
    ],
))
