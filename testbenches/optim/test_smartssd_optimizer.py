"""``SmartInfinityOptimizer`` (golden backend) against ``torch.optim``, and the N-device flow's rules.

The parity tests train a small torch model it was never tuned on (a 5-7-4 MLP on random data) for
``STEPS`` steps on 3 devices without compression: at every step the same gradient goes to our
optimizer and to ``torch.optim.AdamW`` / ``SGD`` (momentum, Nesterov) / ``Adagrad``
(``foreach=False``) on a copy of the parameters, and ``max |p_ours - p_torch|`` must stay within
the documented bound (:func:`scripts.sim.devices.smartssd_torch.torch_bound`), which is a few ulps.
The flow tests need no torch: sharding, skipping a non-finite step, clipping and Top-K with error
feedback against the golden models applied by hand.
"""

import numpy as np
import pytest

from golden.compress import ErrorFeedbackCompressor, scatter
from golden.optim import adam
from scripts.sim import knobs
from scripts.sim.devices.smartssd import SmartSSDArray

STEPS = 6
CASES = {
    "adamw": ({"lr": 0.05, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": 0.1},
              "AdamW", {"lr": 0.05, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": 0.1}),
    "adam": ({"lr": 0.01, "weight_decay": 0.02}, "Adam", {"lr": 0.01, "weight_decay": 0.02}),
    "sgd": ({"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
            "SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    "adagrad": ({"lr": 0.1, "lr_decay": 0.01, "eps": 1e-10, "initial_accumulator_value": 0.1},
                "Adagrad", {"lr": 0.1, "lr_decay": 0.01, "eps": 1e-10, "initial_accumulator_value": 0.1}),
}


@pytest.mark.parametrize("name", CASES)
def test_follows_torch_within_the_documented_bound(name):
    torch = knobs.oracle("torch", "torch is the parity oracle: pip install torch==2.13.0")
    from scripts.sim.devices.smartssd_torch import SmartInfinityOptimizer, torch_bound

    ours_options, torch_name, torch_options = CASES[name]
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 4))
    shadow = [p.detach().clone().requires_grad_(True) for p in model.parameters()]
    x, y = torch.randn(32, 5), torch.randint(0, 4, (32,))
    ours = SmartInfinityOptimizer(model.parameters(), name, devices=3, backend="golden", **ours_options)
    reference = getattr(torch.optim, torch_name)(shadow, foreach=False, **torch_options)
    bound, losses = 0.0, []
    for step in range(STEPS):
        ours.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        losses.append(float(loss.detach()))
        for p, q in zip(model.parameters(), shadow, strict=True):
            q.grad = p.grad.clone()
        before = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy().copy()
        ours.step()
        reference.step()
        after = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()
        expected = torch.cat([q.detach().reshape(-1) for q in shadow]).numpy()
        bound = torch_bound(bound, before, after)
        difference = float(np.max(np.abs(after.astype(np.float64) - expected)))
        assert difference <= bound, f"{name} step {step + 1}: |p - p_torch| {difference:.3e} > {bound:.3e}"
        assert not np.array_equal(after, before), f"{name} step {step + 1}: nothing moved"
    assert [r.step for r in ours.reports] == list(range(1, STEPS + 1))
    assert [len(r.sent) for r in ours.reports] == [3] * STEPS
    assert losses[-1] < losses[0], f"{name}: loss did not fall: {losses}"


def _array(**options):
    rng = np.random.default_rng(3)
    param = rng.standard_normal(1000).astype(np.float32)
    hyper = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01, "decoupled": True}
    return param, hyper, SmartSSDArray(param, "adam", hyper, **options)


def test_shards_are_even_and_nonfinite_steps_are_skipped():
    param, _, array = _array(devices=3)
    assert [d.param.size for d in array.devices] == [334, 333, 333]
    grad = np.ones(param.size, np.float32)
    grad[[5, 700]] = [np.inf, np.nan]
    report = array.step(grad)
    assert report.skipped and report.nonfinite == 2 and array.skipped == 1 and array.steps_done == 0
    assert np.array_equal(array.param, param) and sum(map(sum, report.links.values())) == 0
    report = array.step(np.ones(param.size, np.float32))
    assert report.step == 1 and not report.skipped
    assert report.links["host_to_device"] == [334 * 4, 333 * 4, 333 * 4]
    assert report.links["ssd_to_fpga"] == [334 * 12, 333 * 12, 333 * 12]  # param and two moments


def test_topk_clipping_and_error_feedback_equal_the_golden_models():
    param, hyper, array = _array(devices=4, topk=0.05, max_grad_norm=0.5)
    compressor = ErrorFeedbackCompressor(param.size, ratio=0.05, value_format="f16")
    rng = np.random.default_rng(4)
    expected, m, v = param, np.zeros_like(param), np.zeros_like(param)
    for step in range(1, 4):
        grad = rng.standard_normal(param.size).astype(np.float32)
        report = array.step(grad)
        scale = float(np.float32(min(1.0, 0.5 / (np.linalg.norm(grad.astype(np.float64)) + 1e-6))))
        assert report.grad_scale == scale < 1
        indices, values = compressor.compress(grad)
        assert sum(report.sent) == indices.size == 50  # 5 % of one 1000-element block
        dense = scatter(indices, values.astype(np.float32), param.size)
        expected, m, v = adam(expected, dense, m, v, step=step, grad_scale=scale, **hyper)
        assert array.param.view(np.uint32).tobytes() == expected.view(np.uint32).tobytes(), f"step {step}"
    assert all(b < 4 * 250 for b in report.links["host_to_device"]), report.links  # compressed


def test_bad_arguments_name_themselves():
    param = np.zeros(10, np.float32)
    for options, word in (({"devices": 0}, "devices"), ({"devices": 11}, "devices"), ({"topk": 0.0}, "topk"),
                          ({"backend": "gpu"}, "backend"), ({"max_grad_norm": -1.0}, "max_grad_norm")):
        with pytest.raises(ValueError, match=word):
            SmartSSDArray(param, "sgd", {"lr": 0.1, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0,
                                         "nesterov": False}, **options)
