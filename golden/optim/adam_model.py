"""Bit-exact model of the Adam / AdamW updater.

It follows torch's ``_single_tensor_adam`` (torch 2.13, ``foreach=False``, ``amsgrad=False``,
``maximize=False``) operation for operation. The scalars ``k[...]`` come from
:func:`golden.optim.step_scalars` ``("adam", ...)``. Every line is one binary32 operation
with round-to-nearest-even; ``fma(a, b, c)`` is a fused multiply-add ``a * b + c`` with one
rounding. FMA is chosen on purpose: torch's AVX2/AVX512 CPU kernels for ``add(alpha=)``,
``lerp`` and ``addcmul`` are fused (measured, see docs/optim_golden.md), and ``rtl.fp`` has a
pipelined FMA unit that takes the place of a multiplier followed by an adder::

    g  = grad * k.grad_scale                         # unscale (exact when grad_scale == 1)
    if decoupled:                                    # AdamW: param.mul_(1 - lr * wd)
        p = param * k.decay_factor
    else:
        p = param
        if k.weight_decay != 0:                      # Adam L2: grad.add(param, alpha=wd)
            g = fma(p, k.weight_decay, g)
    d  = g - exp_avg                                 # exp_avg.lerp_(g, 1 - beta1)
    m  = fma(d, k.beta1_weight, g if signbit(k.beta1_weight) else exp_avg)
    v2 = exp_avg_sq * k.beta2                        # exp_avg_sq.mul_(beta2)
    t  = g * k.one_minus_beta2                       # .addcmul_(g, g, value=1 - beta2)
    v  = fma(t, g, v2)
    r  = sqrt(v)                                     # exp_avg_sq.sqrt()
    q  = r / k.bias_correction2_sqrt                 #   / bias_correction2_sqrt
    den = q + k.eps                                  #   .add_(eps)
    n  = m * k.neg_step_size                         # param.addcdiv_(m, den, value=-step_size)
    u  = n / den
    p  = p + u

The results ``(p, m, v)`` have every NaN replaced by the canonical quiet NaN 0x7FC00000,
which is what the ``rtl.fp`` units produce. Per element this is 1 sqrt, 2 divisions,
3 FMAs, 4 multiplications and 3 additions/subtractions with L2 decay (AdamW replaces the
L2 FMA by one multiplication; without decay it is skipped). The ``signbit`` selection is a
per-step constant mux (torch's lerp switches formula at weight 0.5, i.e. beta1 <= 0.5).
AMSGrad is not modelled.

``sqrt`` is the IEEE square root. torch's vectorised CPU ``sqrt`` is not correctly rounded
(12 to 17% of results are 1 ulp off), which is the only reason this model and torch 2.13 on an
AVX2/AVX512 CPU can differ; with torch's square root swapped in they agree bit for bit
(see docs/optim_golden.md).
"""

import numpy as np

from . import _float32 as binary32
from .scalars import step_scalars

__all__ = ["adam"]


@binary32.ieee_quiet
def adam(param, grad, exp_avg, exp_avg_sq, *, step, lr, betas, eps, weight_decay, decoupled=False,
         grad_scale=1.0):
    """One Adam (``decoupled=False``) or AdamW (``decoupled=True``) step, bit-exact.

    The operation order is the one in the module docstring.

    Parameters
    ----------
    param, grad, exp_avg, exp_avg_sq : numpy.ndarray
        float32 arrays of one shape: parameters, gradient (already widened to float32),
        first and second moments (zeros before step 1). They are not modified.
    step : int
        1-based step number, 1 to 2**24.
    lr : float
        Learning rate, >= 0.
    betas : tuple of float
        ``(beta1, beta2)``, each in [0, 1).
    eps : float
        Denominator term, >= 0.
    weight_decay : float
        >= 0; an L2 term added to the gradient, or with ``decoupled`` the AdamW decay.
    decoupled : bool, optional
        AdamW's decoupled weight decay.
    grad_scale : float, optional
        Multiplier applied to the gradient first: ``1 / combined_scale`` for a loss-scaled
        (and clipped) gradient. In (0, inf).

    Returns
    -------
    tuple of numpy.ndarray
        New ``(param, exp_avg, exp_avg_sq)``, float32.

    Raises
    ------
    ValueError
        If an array is not float32 or the shapes differ, or a hyper-parameter is out of range.
    """
    param, grad, exp_avg, exp_avg_sq = binary32.checked_arrays(
        param=param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)
    k = step_scalars("adam", step=step, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                     decoupled=decoupled, grad_scale=grad_scale)
    g = grad * k["grad_scale"]
    if decoupled:
        p = param * k["decay_factor"]
    else:
        p = param
        if k["weight_decay"] != 0:
            g = binary32.fma(p, k["weight_decay"], g)
    d = g - exp_avg
    lerp_base = g if np.signbit(k["beta1_weight"]) else exp_avg
    m = binary32.fma(d, k["beta1_weight"], lerp_base)
    v2 = exp_avg_sq * k["beta2"]
    t = g * k["one_minus_beta2"]
    v = binary32.fma(t, g, v2)
    r = binary32.sqrt(v)
    q = r / k["bias_correction2_sqrt"]
    den = q + k["eps"]
    n = m * k["neg_step_size"]
    u = n / den
    p = p + u
    return binary32.canonical_nan(p), binary32.canonical_nan(m), binary32.canonical_nan(v)
