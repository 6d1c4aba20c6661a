"""``SmartInfinityOptimizer``: a ``torch.optim.Optimizer`` whose ``step()`` runs on N simulated SmartSSDs.

::

    from scripts.sim.devices.smartssd_torch import SmartInfinityOptimizer
    opt = SmartInfinityOptimizer(model.parameters(), "adamw", lr=1e-3, weight_decay=0.01,
                                 devices=4, topk=0.01, backend="golden")   # or backend="rtl"

It is a drop-in for ``torch.optim.AdamW`` (or ``Adam``, ``SGD``, ``Adagrad``) on float32 CPU
parameters: ``loss.backward(); opt.step(); opt.zero_grad()``. ``step()`` flattens the gradients, runs
:meth:`scripts.sim.devices.smartssd.SmartSSDArray.step` (the host flow of Smart-Infinity) and copies
the devices' updated parameters back into the model. Each step's
:class:`~scripts.sim.devices.smartssd.StepReport` is appended to ``opt.reports``.
"""

import numpy as np
import torch

from scripts.sim.devices.smartssd import SmartSSDArray

__all__ = ["SmartInfinityOptimizer", "OPTIMIZER_NAMES", "TORCH_BOUND_ULPS", "torch_bound"]

# optimizer name -> the updater kernel
OPTIMIZER_NAMES = {"adam": "adam", "adamw": "adam", "sgd": "sgd", "adagrad": "adagrad"}
# See torch_bound: per step, the relative error of the update and of the stored parameter.
TORCH_BOUND_ULPS = {"update": 2.0 ** -20, "param": 2.0 ** -20}


def torch_bound(previous, param, new_param):
    """The documented bound on ``max |p_ours - p_torch|`` after one more step (float64).

    Both optimizers take the same gradients and start from the same parameters and state. Then,
    by :mod:`golden.optim`'s models, every state tensor (Adam's moments, AdaGrad's sum, SGD's
    buffer) comes from the same binary32 operations as torch's, and only the square root differs
    (torch's vectorised CPU ``sqrt`` is within 1 ulp, ``2**-23`` relative; the models' is correctly
    rounded). That error reaches the update ``u`` through at most three more roundings on each side
    (Adam: ``/ c``, ``+ eps``, ``n / den``; AdaGrad: two), each ``<= 2**-24`` relative, so
    ``|u_ours - u_torch| <= (1 + 3) * 2**-23 * |u| = 2**-21 * |u|`` to first order; the bound takes
    ``2**-20 * |u|``, which also covers a CPU without fused multiply-add kernels (SGD's buffer then
    rounds once more per step: ``t * 2**-23 * |u|`` after ``t <= 8`` steps). The decay
    ``p * (1 - lr * wd)`` and the sum ``p + u`` round once on each side, ``<= 2**-23 * |p|`` apart, and
    ``|u| <= |p_t - p_{t-1}| + lr * wd * |p| + 2**-23 |p|``, so with ``lr * wd <= 1/2`` a per-step
    ``2**-20 * |p|`` term covers both. The decay factor is at most 1, so an earlier difference does not
    grow. With ``E_t = max |p_ours - p_torch|`` after step ``t``:

        E_t <= E_{t-1} + 2**-20 * max|p_t - p_{t-1}| + 2**-20 * max|p_t|,   E_0 = 0.

    Parameters
    ----------
    previous : float
        ``E_{t-1}``.
    param, new_param : numpy.ndarray
        This optimizer's parameters before and after step ``t``.

    Returns
    -------
    float
        ``E_t``.
    """
    param, new_param = np.asarray(param, np.float64), np.asarray(new_param, np.float64)
    return (previous + TORCH_BOUND_ULPS["update"] * float(np.max(np.abs(new_param - param)))
            + TORCH_BOUND_ULPS["param"] * float(np.max(np.abs(new_param))))


class SmartInfinityOptimizer(torch.optim.Optimizer):
    """Adam/AdamW, SGD (momentum, Nesterov) or AdaGrad, run by N simulated SmartSSDs.

    Follows ``torch.optim.<Optimizer>(..., foreach=False)`` within :func:`torch_bound` when both
    take the same gradients without compression (``tests: testbenches/optim/test_smartssd_optimizer.py``);
    with ``topk`` it is Smart-Infinity's SmartComp, which is a different optimizer.

    Parameters
    ----------
    params : iterable of torch.Tensor
        float32 CPU parameters, one group (per-group options are not supported).
    optimizer : {"adamw", "adam", "sgd", "adagrad"}
    lr, betas, eps, weight_decay, momentum, dampening, nesterov, lr_decay, initial_accumulator_value
        torch's hyper-parameters of that optimizer, with torch's defaults (the ones it does not take
        are ignored).
    devices : int
        Number of SmartSSDs (even shards of the flattened parameters).
    topk : float or None
        Top-K kept fraction of the gradient sent to the devices, or None (dense).
    error_feedback : bool
        With ``topk``, carry what was not sent into the next step.
    backend : {"golden", "rtl"}
        NumPy golden models (fast) or the Verilated kernels (same bits, checked at every step).
    max_grad_norm : float or None
        Global gradient-norm clipping, applied on the devices.

    Notes
    -----
    A parameter without ``.grad`` takes a zero gradient (torch skips it instead). The optimizer state
    lives on the devices (``self.array.devices``), not in ``state_dict()``. A step whose gradient has
    a NaN or an Inf is skipped and counted (``self.array.skipped``).
    """

    def __init__(self, params, optimizer="adamw", *, lr=None, betas=(0.9, 0.999), eps=None, weight_decay=None,
                 momentum=0.0, dampening=0.0, nesterov=False, lr_decay=0.0, initial_accumulator_value=0.0,
                 devices=1, topk=None, error_feedback=True, backend="golden", max_grad_norm=None):
        if optimizer not in OPTIMIZER_NAMES:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZER_NAMES)}, not {optimizer!r}")
        # torch's defaults: AdamW decays by 0.01, the others not; Adagrad's lr and eps differ from Adam's.
        if weight_decay is None:
            weight_decay = 0.01 if optimizer == "adamw" else 0.0
        if lr is None:
            lr = 1e-2 if optimizer == "adagrad" else 1e-3
        if eps is None:
            eps = 1e-10 if optimizer == "adagrad" else 1e-8
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay})
        if len(self.param_groups) != 1:
            raise ValueError("SmartInfinityOptimizer takes one parameter group")
        self.parameters_ = self.param_groups[0]["params"]
        for p in self.parameters_:
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise ValueError(f"parameters must be float32 CPU tensors, not {p.dtype} on {p.device}")
        kernel = OPTIMIZER_NAMES[optimizer]
        hyper = {"adam": {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                          "decoupled": optimizer == "adamw"},
                 "sgd": {"lr": lr, "momentum": momentum, "dampening": dampening, "weight_decay": weight_decay,
                         "nesterov": nesterov},
                 "adagrad": {"lr": lr, "lr_decay": lr_decay, "weight_decay": weight_decay,
                             "eps": eps}}[kernel]
        flat = torch.cat([p.detach().reshape(-1) for p in self.parameters_]).numpy().astype(np.float32)
        self.array = SmartSSDArray(flat, kernel, hyper, devices=devices, topk=topk,
                                   error_feedback=error_feedback, backend=backend,
                                   max_grad_norm=max_grad_norm,
                                   initial_accumulator_value=initial_accumulator_value)
        self.reports = []

    def close(self):
        """End the rtl backend's simulation (it otherwise ends with the process)."""
        self.array.close()

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every parameter on the devices; returns the closure's loss (or None)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        grad = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).detach().reshape(-1).float()
                          for p in self.parameters_]).numpy()
        # A learning-rate scheduler writes the group's lr (and a user may change its weight decay).
        group = self.param_groups[0]
        self.array.hyper.update(lr=group["lr"], weight_decay=group["weight_decay"])
        report = self.array.step(np.ascontiguousarray(grad, np.float32))
        self.reports.append(report)
        if not report.skipped:
            flat = torch.from_numpy(self.array.param)
            offset = 0
            for p in self.parameters_:
                p.copy_(flat[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
        return loss
