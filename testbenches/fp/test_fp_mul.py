# amaranth: UnusedElaboratable=no
# (Units built only to check their parameters are never elaborated.)
"""fp_mul (:class:`rtl.fp.fp_mul.FloatMultiplier`): its tests and runners.

The standard FP unit tests (:func:`testbenches.fp.suite.unit_tests`) on the configurations below:
cocotb on Verilator against ``golden.fp``, the ``amaranth.sim`` checks of every format x flush
mode (with e4m3, e5m2 and a single DSP product tile), the Verilog, the registration and the
parameter checks.
"""

from rtl.fp.fp_mul import FloatMultiplier

from .suite import unit_tests

# cocotb runs the tests in this module's namespace: the generic ones are imported by name.
from .tb import golden_match_parallel, golden_match_under_stalls, one_operation_per_cycle, reset_mid_transfer  # noqa: F401

globals().update(unit_tests(
    __name__, FloatMultiplier,
    configurations=[
        {"fmt": "f32"},
        {"fmt": "f16"},
        {"fmt": "bf16"},
        {"fmt": "f16", "flush_subnormals": True},
    ],
    elaborations={"mul": lambda: FloatMultiplier()},
    bad_parameters=[
        (lambda: FloatMultiplier(tag_width=-1), "tag_width"),
        (lambda: FloatMultiplier(dsp_tile=4), "dsp_tile"),
        (lambda: FloatMultiplier(lut_bits=25), "lut_bits"),
    ],
))
