"""Bit-exact model of the AdaGrad updater.

It follows torch's ``_single_tensor_adagrad`` (torch 2.13, dense gradients, ``foreach=False``,
``maximize=False``) operation for operation. The scalars ``k[...]`` come from
:func:`golden.optim.step_scalars` ``("adagrad", ...)``; each line is one binary32
round-to-nearest-even operation and ``fma`` a fused multiply-add with one rounding::

    g   = grad * k.grad_scale                        # unscale (exact when grad_scale == 1)
    if k.weight_decay != 0:                          # grad.add(param, alpha=wd)
        g = fma(param, k.weight_decay, g)
    s   = fma(g, g, state_sum)                       # state_sum.addcmul_(g, g, value=1)
    r   = sqrt(s)                                    # std = state_sum.sqrt().add_(eps)
    std = r + k.eps
    n   = g * k.neg_clr                              # param.addcdiv_(g, std, value=-clr)
    u   = n / std
    p   = param + u

``clr = lr / (1 + (step - 1) * lr_decay)`` is a host scalar. torch's ``addcmul`` computes
``(value * g) * g``; with ``value == 1`` the first product is exact, so it is left out.
``initial_accumulator_value`` is only the initial ``state_sum``: see
:func:`adagrad_init_state`. Outputs have NaNs replaced by the canonical quiet NaN 0x7FC00000.
``sqrt`` is the IEEE square root; torch's vectorised CPU ``sqrt`` is not correctly rounded,
the only difference from torch 2.13 on AVX2/AVX512 CPUs (see :mod:`golden.optim.adam_model`).
"""

import numpy as np

from . import _float32 as binary32
from .scalars import check_range, step_scalars

__all__ = ["adagrad", "adagrad_init_state"]


def adagrad_init_state(shape, value=0.0):
    """The initial AdaGrad ``state_sum``, torch's ``initial_accumulator_value`` everywhere.

    Parameters
    ----------
    shape : int or tuple of int
        Shape of the parameter tensor.
    value : float, optional
        ``initial_accumulator_value``, >= 0; rounded once to float32 (as ``torch.full_like``).

    Returns
    -------
    numpy.ndarray
        A float32 array filled with ``value``.

    Raises
    ------
    ValueError
        If ``value`` is negative, infinite or NaN.
    """
    value = check_range("value", value, 0.0, np.inf, high_open=True)
    return np.full(shape, np.float32(value), dtype=np.float32)


@binary32.ieee_quiet
def adagrad(param, grad, state_sum, *, step, lr, lr_decay, weight_decay, eps, grad_scale=1.0):
    """One AdaGrad step, bit-exact.

    The operation order is the one in the module docstring.

    Parameters
    ----------
    param, grad, state_sum : numpy.ndarray
        float32 arrays of one shape; not modified.
    step : int
        1-based step number, 1 to 2**24.
    lr : float
        Learning rate, >= 0.
    lr_decay : float
        >= 0; the step's rate is ``lr / (1 + (step - 1) * lr_decay)``.
    weight_decay : float
        L2 coefficient, >= 0.
    eps : float
        Denominator term, >= 0.
    grad_scale : float, optional
        Multiplier applied to the gradient first (``1 / combined_scale``), in (0, inf).

    Returns
    -------
    tuple of numpy.ndarray
        New ``(param, state_sum)``, float32.

    Raises
    ------
    ValueError
        If an array is not float32 or the shapes differ, or a hyper-parameter is out of range.
    """
    param, grad, state_sum = binary32.checked_arrays(param=param, grad=grad, state_sum=state_sum)
    k = step_scalars("adagrad", step=step, lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps,
                     grad_scale=grad_scale)
    g = grad * k["grad_scale"]
    if k["weight_decay"] != 0:
        g = binary32.fma(param, k["weight_decay"], g)
    s = binary32.fma(g, g, state_sum)
    r = binary32.sqrt(s)
    std = r + k["eps"]
    n = g * k["neg_clr"]
    u = n / std
    p = param + u
    return binary32.canonical_nan(p), binary32.canonical_nan(s)
