"""torch's documented optimizer algorithms in float64: the reference of the optim golden's parity rule.

The rule (``testbenches/optim/test_golden_optim.py``, and the GCU's delayed update in
``testbenches/collective/test_golden_delayed_update.py``): after every step, the golden's
parameters are at most twice as far from this float64 transcription as torch's own float32 result
is (or within 1e-6 relative). It is written from torch's documentation, not from the golden model,
so that both are checked against a third, exact-enough account of the same algorithm.
"""

import numpy as np

__all__ = ["reference64"]


def reference64(optimizer, hyper, p, g, state, step):
    """torch's documented algorithms in float64 (docs.pytorch.org/docs/stable/optim.html)."""
    lr, wd = hyper["lr"], hyper["weight_decay"]
    if optimizer == "adam":
        beta1, beta2 = hyper["betas"]
        if hyper.get("decoupled"):
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        state["m"] = beta1 * state["m"] + (1 - beta1) * g
        state["v"] = beta2 * state["v"] + (1 - beta2) * g * g
        m_hat, v_hat = state["m"] / (1 - beta1**step), state["v"] / (1 - beta2**step)
        return p - lr * m_hat / (np.sqrt(v_hat) + hyper["eps"])
    g = g + wd * p
    if optimizer == "sgd":
        mu = hyper["momentum"]
        if mu:
            state["b"] = g if step == 1 else mu * state["b"] + (1 - hyper["dampening"]) * g
            g = g + mu * state["b"] if hyper["nesterov"] else state["b"]
        return p - lr * g
    state["s"] = state["s"] + g * g
    return p - lr / (1 + (step - 1) * hyper["lr_decay"]) * g / (np.sqrt(state["s"]) + hyper["eps"])
