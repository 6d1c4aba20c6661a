"""The register stages of the systolic PEs' arithmetic per element type, stated here, not read from rtl/.

The cycle model (:mod:`golden.systolic.cycles`) takes a PE's ``mac_latency`` and ``acc_latency`` from
these: an output-stationary PE has ``mac_latency = multiply + add + 2`` and ``acc_latency = add``
(``docs/systolic.md``). f32 multiplies in ``fp_mul`` (7 cycles) and f16/bf16 in the widening
multiplier; every float element accumulates in the f32 ``fp_add`` (6 cycles); int8 takes one cycle
for each. ``testbenches/test_design_constants.py`` holds ``rtl/systolic/arithmetic.py`` equal to it.
"""

__all__ = ["PE_LATENCY"]

#: element: (multiplier latency, adder latency), in cycles.
PE_LATENCY = {"f32": (7, 6), "f16": (2, 6), "bf16": (3, 6), "int8": (1, 1)}
