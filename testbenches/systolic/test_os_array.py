# amaranth: UnusedElaboratable=no
"""os_array: cocotb tests of :class:`rtl.systolic.os_array.OutputStationaryArray` against golden.systolic,
and their pytest runners (at the bottom).

The cocotb tests are :mod:`.os_cocotb`'s, put in this module's namespace so that cocotb runs them here;
``test_tensor_array`` runs the same ones on :class:`rtl.systolic.tensor_array.TensorArray`.

Each GEMM is cut into the array's tiles exactly as the block's docstring says, streamed in,
and every result row is checked bit for bit against :func:`golden.systolic.gemm` on the
zero-padded matrices. Without stalls the cycle count, measured here from the first ``a``
transfer to the last ``c`` transfer and reported by the block's ``cycles`` port, must equal
:func:`golden.systolic.gemm_cycles` with the documented latencies (:mod:`.schedule`), never the
block's own latency attributes; :func:`test_latency_attributes_are_the_documented_ones` holds every
dense array's latency attributes to that schedule.
"""

import gc

import pytest
from amaranth._unused import MustUse

from rtl.systolic.os_array import OutputStationaryArray
from rtl.systolic.sparse_tensor_array import SparseTensorArray
from rtl.systolic.tensor_array import TensorArray
from rtl.systolic.tiled_gemm import TiledGemm
from rtl.systolic.ws_array import WeightStationaryArray
from scripts.sim.runner import run_cocotb
from testbenches.systolic.os_cocotb import OS_TESTS
from testbenches.systolic.schedule import array_schedule
from testbenches.systolic.tb import parametrize_cases

globals().update(OS_TESTS)  # the output-stationary array's cocotb tests, run on this block
MODULE = __name__
CASES = [
    {"rows": 3, "cols": 4, "element": "int8", "slots": 2, "accumulate": True},
    {"rows": 2, "cols": 1, "element": "f16", "slots": 1},
    {"rows": 1, "cols": 2, "element": "f32", "slots": 7, "accumulate": True},
]
SLOW_CASES = [
    {"rows": 2, "cols": 2, "element": "f16", "slots": 1},
    {"rows": 2, "cols": 1, "element": "bf16", "slots": 6, "accumulate": True},
    {"rows": 4, "cols": 4, "element": "f16", "slots": 6, "accumulate": True},
    {"rows": 3, "cols": 4, "element": "f32", "slots": 4},
    {"rows": 4, "cols": 3, "element": "int8", "slots": 1},
]


@parametrize_cases(CASES, SLOW_CASES)
def test_os_array(params):
    run_cocotb("os_array", MODULE, params={**params, "max_k": 64, "max_tiles": 64})


@pytest.mark.parametrize("element", ["f32", "f16", "bf16", "int8"])
def test_latency_attributes_are_the_documented_ones(element, monkeypatch):
    """Every dense array's ``mac_latency`` / ``acc_latency`` (what scripts read) equal docs/systolic.md's
    table (``schedule.array_schedule``), which the cocotb benches give the cycle model instead."""
    monkeypatch.setattr(MustUse, "_MustUse__silence", True)  # built only to read attributes
    os_schedule, ws_schedule = array_schedule(element, slots=3), array_schedule(element, "weight_stationary")
    assert os_schedule["mac_latency"] == ws_schedule["mac_latency"] + 2
    output_stationary = [OutputStationaryArray(element=element, slots=3),
                         TensorArray(element=element, slots=3, tensor=2),
                         SparseTensorArray(element=element, slots=3), TiledGemm(element=element, slots=3)]
    for array in output_stationary:
        latencies = {"tile": 3, "mac_latency": array.mac_latency, "acc_latency": array.acc_latency}
        assert latencies == os_schedule, type(array).__name__
    weight_stationary = [WeightStationaryArray(element=element),
                         TiledGemm(element=element, dataflow="weight_stationary")]
    for array in weight_stationary:
        assert array.mac_latency == ws_schedule["mac_latency"], type(array).__name__
    del array, output_stationary, weight_stationary
    gc.collect()  # while silenced: the arrays' never-elaborated parts would warn
