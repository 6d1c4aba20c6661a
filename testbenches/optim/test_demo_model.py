"""The NumPy MLP of ``neartrain demo train`` (``scripts/demo/model.py``): its backpropagation."""

import numpy as np

from scripts.demo.model import MLP, spiral
from scripts.sim import knobs


def test_model_gradient():
    """Backpropagation against central differences, in float64."""
    model = MLP()
    x, y = spiral(seed=knobs.seed())
    flat = model.init(knobs.seed(), dtype=np.float64)
    _, grad = model.loss_and_grad(flat, x, y)
    rng = knobs.rng(71)
    for index in rng.choice(model.size, 40, replace=False):
        step = np.zeros(model.size)
        step[index] = 1e-6
        numeric = (model.loss(flat + step, x, y) - model.loss(flat - step, x, y)) / 2e-6
        assert abs(numeric - grad[index]) <= 1e-6 * max(1.0, np.abs(grad).max()), index
