"""``neartrain demo train``: the RTL updater as the optimizer of a NumPy MLP.

The two simulated tests reuse one Verilator build (the registry's 1-lane Adam kernel, the
one ``device.run_jobs`` and ``make run`` use): AdamW dense, and Adam with L2 decay in the
dense / Top-K 1 % / Top-K 1 % + error feedback comparison. At every step the kernel's new
parameters, moments and status must equal ``golden.optim`` bit for bit; the loss curves
must agree with the software optimizer's within ``demo_train.LOSS_TOLERANCE`` and fall.
The number of steps is ``NEARTRAIN_VECTORS`` (default 4), the data and initial parameters
follow ``NEARTRAIN_SEED``. The other tests need no simulation.
"""

import asyncio

import numpy as np
import pytest

from golden.compress import keep_count
from golden.optim.host import STATE_NAMES, reference_update
from scripts.cli import main
from scripts.demo import train as demo_train
from scripts.sim import knobs
from scripts.sim.devices.updater import DeviceResult

STEPS = knobs.vectors(4, limit=40)  # each step is a kernel run per mode; demo_train's 1000 would take hours


def _check_curves(result):
    for index, mode in enumerate(result.modes):
        rtl = result.rtl[index]
        assert all(rtl["bit_exact"]), f"{mode.label}: RTL != golden.optim at steps " \
            f"{[s + 1 for s, ok in enumerate(rtl['bit_exact']) if not ok]}"
        assert all(rtl["clean"]), f"{mode.label}: error bits or guard bytes at some step"
        difference = result.max_loss_difference(index)
        assert difference <= demo_train.LOSS_TOLERANCE, f"{mode.label}: loss curves differ by {difference}"
        assert rtl["loss"][-1] < rtl["loss"][0], f"{mode.label}: loss did not decrease: {rtl['loss']}"
        # One kernel run on all parameters: at least n cycles on one lane.
        assert min(rtl["cycles"]) >= result.size
    assert result.bit_exact


def test_demo_train_adamw():
    result = demo_train.run_demo(optimizer="adamw", steps=STEPS, seed=knobs.seed())
    print(demo_train.format_report(result))
    _check_curves(result)
    assert result.rtl[0]["sent"] == [result.size] * STEPS


def test_demo_train_topk_compare():
    steps = max(STEPS, 3)
    result = demo_train.run_demo(optimizer="adam", steps=steps, seed=knobs.seed(), compare=True)
    print(demo_train.format_report(result))
    _check_curves(result)
    dense, topk, feedback = result.rtl
    kept = keep_count(0.01, result.size)
    assert topk["sent"] == feedback["sent"] == [kept] * steps
    # Step 1 has no residual yet, so both Top-K runs send the same pairs; later they must not.
    assert np.array_equal(topk["params"][0], feedback["params"][0])
    assert not np.array_equal(topk["params"][-1], feedback["params"][-1])
    assert not np.array_equal(dense["params"][0], topk["params"][0])


# -------------------------------------------------------------------- without simulation
class _FakeDevice:
    """Answers update() with golden.optim's outputs, optionally with one bit flipped at one step."""

    def __init__(self, flip_step=None):
        self.flip_step, self.calls = flip_step, 0

    async def update(self, param, grad, states, hyper):
        self.calls += 1
        kernel = "adam"
        expected = reference_update(kernel, param=param.view(np.uint32), grad=grad.view(np.uint32),
                                    states={k: v.view(np.uint32) for k, v in states.items()}, hyper=hyper)
        outputs = {name: expected[name].copy() for name in ("param",) + STATE_NAMES[kernel]}
        if self.calls == self.flip_step:
            outputs["exp_avg_sq"][7] ^= 1
        return DeviceResult(outputs=outputs, cycles=1, read_beats=0, write_beats=0,
                            status=int(expected["nonfinite"]), error=0)


@pytest.mark.parametrize("flip_step", [None, 2])
def test_session_detects_a_wrong_bit(flip_step):
    kernel, hyper, modes = demo_train.check_arguments(optimizer="adamw", steps=3)
    payload = {"kernel": kernel, "hyper": hyper, "steps": 3, "seed": knobs.seed(), "modes": modes}
    (run,) = asyncio.run(demo_train.rtl_session(_FakeDevice(flip_step), payload))
    assert run["bit_exact"] == [step != flip_step for step in (1, 2, 3)]


@pytest.mark.parametrize("argv,message", [
    (["--optimizer", "lamb"], "optimizer must be one of"),
    (["--topk", "0"], "top-k ratio must be in (0, 1]"),
    (["--topk", "1.5"], "top-k ratio must be in (0, 1]"),
    (["--topk", "nan"], "top-k ratio must be in (0, 1]"),
    (["--steps", "0"], "steps must be an integer in [1,"),
    (["--steps", "two"], "invalid int value"),
    (["--error-feedback"], "error feedback needs a top-k ratio"),
    (["--lanes", "33"], "lanes must be in 1..32"),
    (["--seed", "-1"], "seed must be an integer >= 0"),
    (["--lr", "-1"], "lr must be in"),
    (["--optimizer", "sgd", "--lr", "inf"], "lr must be in"),
])
def test_cli_bad_arguments(capsys, argv, message):
    assert main(["demo", "train", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("neartrain: error: ") and message in lines[0], lines


@pytest.mark.parametrize("optimizer", list(demo_train.OPTIMIZERS))
def test_numpy_fallback_matches_torch(optimizer):
    knobs.oracle("torch", "torch is the oracle the NumPy fallback is compared with")
    kernel, hyper, _ = demo_train.check_arguments(optimizer=optimizer)
    mode = demo_train.Mode(0.05, True)
    for current in (demo_train.Mode(), mode):
        with_torch = demo_train.software_run(optimizer, hyper, current, 12, knobs.seed(), backend="torch")
        with_numpy = demo_train.software_run(optimizer, hyper, current, 12, knobs.seed(), backend="numpy")
        for a, b in zip(with_torch["loss"], with_numpy["loss"], strict=True):
            assert abs(a - b) <= demo_train.LOSS_TOLERANCE * max(1.0, b), (current, with_torch["loss"],
                                                                           with_numpy["loss"])
        assert with_torch["loss"][-1] < with_torch["loss"][0]


def test_software_backend_without_torch(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # makes "import torch" raise ImportError
    backend, description = demo_train.software_backend()
    assert backend == "numpy" and "torch is not installed" in description
    with pytest.raises(ImportError):
        demo_train.software_backend("torch")


# `--lr` whose binary32 step scalars overflow: golden.optim.scalars.step_scalars accepts any finite
# lr >= 0, but the kernel takes its scalars in binary32 (lr = 1e300 once made Adam's step size -inf).
# The CLI refuses such a value in one line with exit status 2, and takes the largest that fit.
@pytest.mark.parametrize("argv", [
    ["--lr", "1e300"],
    ["--optimizer", "adam", "--lr", "3.5e38"],
    ["--optimizer", "sgd", "--lr", "1e39"],
    ["--optimizer", "adagrad", "--lr", "1e300"],
])
def test_lr_that_overflows_binary32_is_refused(capsys, argv):
    assert main(["demo", "train", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("neartrain: error: lr ") and "too large" in lines[0], lines


@pytest.mark.parametrize("optimizer, lr", [("adamw", 1e30), ("sgd", 3e38), ("adagrad", 1e30)])
def test_large_lr_that_fits_is_taken(optimizer, lr):
    _kernel, hyper, _modes = demo_train.check_arguments(optimizer=optimizer, lr=lr)
    assert hyper["lr"] == lr
