"""pytest runners: the updater kernels in cocotb on Verilator, with AxiRam memory and an AxiLiteMaster host.

The fast suite covers both port modes and all three lanes-to-beats conversions (split,
equal, gather) on a 64-bit bus with small chunks; the 512-bit, 16-lane configurations and
the million-element runs are slow.
"""

import numpy as np
import pytest

from golden.optim.host import STATE_NAMES, reference_update
from testbenches import knobs
from testbenches.harness import run_cocotb
from testbenches.optim import device
from testbenches.optim.cocotb_optim_vectors import f32_tensor, gradient_tensor, random_hyper

MODULE = "testbenches.optim.cocotb_updater_kernel"
SMALL = {"data_width": 64, "chunk_elements": 16, "max_burst": 4, "max_outstanding": 2}
CASES = [
    ("sgd", {"lanes": 2, "ports": "shared", **SMALL}),
    ("adagrad", {"lanes": 4, "ports": "separate", **SMALL}),
    pytest.param("adam", {"lanes": 1, "ports": "shared", **SMALL}, marks=pytest.mark.slow),
    pytest.param("adam", {"lanes": 16, "ports": "shared"}, marks=pytest.mark.slow),
    pytest.param("adam", {"lanes": 4, "ports": "separate", "data_width": 512, "chunk_elements": 64},
                 marks=pytest.mark.slow),
]


def _id(value):
    return value if isinstance(value, str) else "-".join(f"{k}={v}" for k, v in value.items())


@pytest.mark.parametrize("optimizer,params", CASES, ids=_id)
def test_updater_kernel(optimizer, params):
    run_cocotb(f"{optimizer}_updater", MODULE, params=params)


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["adam", "sgd", "adagrad"])
def test_million_elements(optimizer):
    """10**6 elements per optimizer through the 16-lane kernel, bit-exact with golden."""
    rng = knobs.rng(61)
    n = knobs.vectors(1_000_000)
    hyper = random_hyper(rng, optimizer)
    param, grad = f32_tensor(rng, n), gradient_tensor(rng, n, "bf16")
    states = {name: f32_tensor(rng, n, scale=1e-3, positive=name != "exp_avg")
              for name in STATE_NAMES[optimizer]}
    result = device.update(optimizer, param, grad, states, hyper, grad_format="bf16", copy_format="bf16",
                           lanes=16)
    expected = reference_update(optimizer, param=param, grad=grad, states=states, hyper=hyper,
                                grad_format="bf16", copy_format="bf16")
    for name in ("param", "param16", *STATE_NAMES[optimizer]):
        assert np.array_equal(result.outputs[name], expected[name]), f"{name}: {knobs.describe(1_000_000)}"
    assert result.status == int(expected["nonfinite"]) and result.error == 0
