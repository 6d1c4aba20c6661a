"""pytest runners: the sparse systolic tensor array (padded CSR, gathered B) in cocotb on Verilator."""

import pytest

from rtl.systolic.sparse_array import SparseTensorArray
from scripts.sim.runner import run_cocotb

MODULE = "testbenches.systolic.cocotb_sparse_array"

CASES = [
    {"rows": 2, "cols": 2, "tensor": 2, "element": "int8", "slots": 1, "accumulate": True},
    {"rows": 1, "cols": 1, "tensor": 2, "element": "f16", "slots": 2, "accumulate": True},
]
SLOW_CASES = [
    {"rows": 2, "cols": 1, "tensor": 2, "element": "bf16", "slots": 6, "accumulate": True},
    {"rows": 2, "cols": 2, "tensor": 1, "element": "f32", "slots": 1},
]


def _id(params):
    return "-".join(f"{key}={value}" for key, value in params.items())


@pytest.mark.parametrize("params", CASES + [pytest.param(p, marks=pytest.mark.slow) for p in SLOW_CASES],
                         ids=_id)
def test_sparse_tensor_array(params):
    run_cocotb("sparse_tensor_array", MODULE, params={**params, "max_k": 64, "max_tiles": 16})


@pytest.mark.parametrize("kwargs, match", [
    ({"tensor": 0}, "tensor"), ({"max_k": 0}, "max_k"), ({"max_k": 1 << 17}, "max_k"),
    ({"cols": 300}, "cols"), ({"element": "int4"}, "element"), ({"accumulate": 1}, "accumulate"),
])
def test_sparse_tensor_array_rejects_bad_parameters(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        SparseTensorArray(**kwargs)
