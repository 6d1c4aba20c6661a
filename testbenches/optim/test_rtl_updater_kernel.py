"""pytest runners: the updater kernels in cocotb on Verilator, with AxiRam memory and an AxiLiteMaster host.

The fast suite covers both port modes and all three lanes-to-beats conversions (split,
equal, gather), and lane counts that are not powers of two (3 and 6: the gearbox and a 1:3
converter), on a 64-bit bus with small chunks; the 512-bit, 16-lane configurations and the
million-element runs are slow.
"""

import numpy as np
import pytest

from golden.optim.host import STATE_NAMES, reference_update
from golden.optim.vectors import VARIANTS, f32_tensor, gradient_tensor, random_hyper
from scripts.sim import knobs
from scripts.sim import updater_device as device
from scripts.sim.runner import run_cocotb

MODULE = "testbenches.optim.cocotb_updater_kernel"
SMALL = {"data_width": 64, "chunk_elements": 16, "max_burst": 4, "max_outstanding": 2}
CASES = [
    ("sgd", {"lanes": 2, "ports": "shared", **SMALL}),
    ("adagrad", {"lanes": 4, "ports": "separate", **SMALL}),
    # Lane counts that are not powers of two: 3 lanes against 2- and 4-word beats (gearboxes
    # both ways); 6 lanes against 2-word beats (a 1:3 converter) and 4-half-word beats (a gearbox).
    ("sgd", {"lanes": 3, "ports": "shared", **SMALL, "chunk_elements": 24}),
    ("adagrad", {"lanes": 6, "ports": "separate", **SMALL, "chunk_elements": 24}),
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
    """At least 10**6 elements per optimizer through the kernel, bit-exact with golden.

    The registry's kernel (1 lane, one shared 512-bit port, 1024-element chunks, the
    configuration ``make run`` checks) runs one step per control variant of
    ``VARIANTS[optimizer]`` in one simulation, cycling through the gradient formats
    (f32, f16, bf16) and copy formats (none, f16, bf16); 10 % of every tensor is IEEE
    specials and another 10 % random encodings. The element count is ``NEARTRAIN_VECTORS``
    (default 10**6) split over the variants, each a length that is not a multiple of the
    chunk or the beat. About 20 minutes of simulation per optimizer here.
    """
    rng = knobs.rng(61)
    total = knobs.vectors(1_000_000)
    variants = len(VARIANTS[optimizer])
    formats = ("f32", "f16", "bf16")
    copies = ("bf16", "none", "f16")
    jobs, expected = [], []
    for variant in range(variants):
        n = -(-total // variants) + (variant % 3)
        hyper = random_hyper(rng, optimizer, variant)
        grad_format, copy_format = formats[variant % 3], copies[(variant // 3 + variant) % 3]
        param, grad = f32_tensor(rng, n), gradient_tensor(rng, n, grad_format)
        states = {name: f32_tensor(rng, n, scale=1e-3, positive=name != "exp_avg")
                  for name in STATE_NAMES[optimizer]}
        jobs.append({"kind": "update", "param": param, "grad": grad, "states": states, "hyper": hyper,
                     "grad_format": grad_format, "copy_format": copy_format, "stall": 0.0})
        expected.append(reference_update(optimizer, param=param, grad=grad, states=states, hyper=hyper,
                                         grad_format=grad_format, copy_format=copy_format))
    results = device.run_jobs(optimizer, jobs)
    checked = 0
    for variant, (job, result, reference) in enumerate(zip(jobs, results, expected, strict=True)):
        where = f"variant {variant} ({job['grad_format']} gradient, {job['copy_format']} copy)"
        for name in ("param", *STATE_NAMES[optimizer]):
            differ = np.flatnonzero(result.outputs[name] != reference[name])
            assert differ.size == 0, (f"{name}, {where}: {differ.size} of {len(job['param'])} elements "
                                      f"differ, first at {differ[:1]}; {knobs.describe(total)}")
        if job["copy_format"] == "none":
            assert result.outputs["param16"] is None
        else:
            assert np.array_equal(result.outputs["param16"], reference["param16"]), \
                f"param16, {where}; {knobs.describe(total)}"
        assert result.status == int(reference["nonfinite"]) and result.error == 0, where
        assert result.guards_intact, where
        checked += len(job["param"])
    assert checked >= total
