"""The GCU's delayed-update step (golden) against ``torch.optim.Adam`` on the leaves' mean gradient.

The oracle rule is the optim golden's (``testbenches/optim/golden_oracle.py``): after every
step, the golden's parameters are at most twice as far from a float64 transcription of torch's
documented algorithm as torch's own float32 result is (or within 1e-6 relative).
"""

import numpy as np
import pytest

from golden.collective import LINE_WORDS, delayed_update_step, mean_scale, reduce_leaf_order
from golden.optim import adam
from scripts.sim import knobs
from testbenches.optim.golden_oracle import reference64  # torch's Adam/AdamW in float64

HYPER = {
    "adam": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0),
    # L2 decay makes the step depend on the gradient's scale: a sum taken for the mean fails here.
    "adam_l2": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-1),
    "adamw": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, decoupled=True),
}


@pytest.mark.parametrize("leaves", [2, 3, 8, 16])
@pytest.mark.parametrize("name", HYPER)
def test_delayed_update_follows_torch_adam_on_the_mean_gradient(name, leaves):
    torch = knobs.oracle("torch", "torch is the parity oracle: pip install torch==2.13.0")
    hyper, steps = HYPER[name], 20
    lines = max(1, knobs.vectors(2048) // LINE_WORDS)
    rng = knobs.rng(31 + leaves)
    shape = (lines, LINE_WORDS)
    p0 = (np.where(rng.random(shape) < 0.5, -1.0, 1.0) * 2.0 ** rng.uniform(-8, 4, shape)).astype(np.float32)
    param, m, v = p0.view(np.uint32), np.zeros(shape, np.uint32), np.zeros(shape, np.uint32)
    torch_param = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    torch_class = torch.optim.AdamW if hyper.get("decoupled") else torch.optim.Adam
    torch_opt = torch_class([torch_param], foreach=False,
                            **{k: value for k, value in hyper.items() if k != "decoupled"})
    reference, state = p0.astype(np.float64), {"m": 0.0, "v": 0.0}
    for step in range(1, steps + 1):
        # Data-parallel gradients: one signal, and per-leaf noise of the same size.
        signal = rng.standard_normal(shape)
        grads = (signal + rng.standard_normal((leaves, *shape))).astype(np.float32)
        param, m, v = delayed_update_step(grads.view(np.uint32), param, m, v, step=step, **hyper)
        torch_param.grad = torch.from_numpy(grads).mean(0)
        torch_opt.step()
        reference = reference64("adam", hyper, reference, grads.astype(np.float64).mean(0), state, step)
        golden, torch_result = param.view(np.float32), torch_param.detach().numpy()
        allowed = np.maximum(2 * np.abs(torch_result - reference), 1e-6 * np.maximum(1, np.abs(reference)))
        bad = np.flatnonzero(np.abs(golden - reference) > allowed)
        assert bad.size == 0, (f"{knobs.describe(2048)} {name}, {leaves} leaves, step {step}: {bad.size} "
                               f"beyond the rule, e.g. golden {golden.flat[bad[:3]]} torch "
                               f"{torch_result.flat[bad[:3]]} float64 {reference.flat[bad[:3]]}")


def test_delayed_update_is_adam_on_the_leaf_order_sum():
    """The step is exactly the optim golden on the reduction table's sum with grad_scale = 1/leaves."""
    rng = knobs.rng(37)
    leaves, shape = 5, (max(1, knobs.vectors(256) // LINE_WORDS), LINE_WORDS)
    grads = rng.standard_normal((leaves, *shape)).astype(np.float32).view(np.uint32)
    p, m, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    v = np.abs(v)
    hyper = HYPER["adam"]
    got = delayed_update_step(grads, p.view(np.uint32), m.view(np.uint32), v.view(np.uint32), step=3, **hyper)
    want = adam(p, reduce_leaf_order(grads).view(np.float32), m, v, step=3, grad_scale=0.2, **hyper)
    for name, ours, theirs in zip(("param", "exp_avg", "exp_avg_sq"), got, want, strict=True):
        expected = np.asarray(theirs, np.float32).view(np.uint32)
        assert np.array_equal(ours, expected), f"{name}: {knobs.describe()}"
    assert mean_scale(5) == float(np.float32(0.2)) and mean_scale(16) == 1 / 16
