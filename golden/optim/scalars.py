"""The host-side scalars of one optimizer step: everything that depends only on the step and
the hyper-parameters.

:func:`step_scalars` is the single place these are computed; the golden models, the RTL
driver (which writes them into the updater's coefficient registers before each step) and
the tests all call it. torch computes the same quantities in Python floats (binary64) and
hands them to its float32 kernels, which round each scalar once to binary32. This module
does exactly that: every value is evaluated in binary64 with torch's own expression and
rounded once with ``np.float32``. The one exception is torch's ``lerp`` for weights >= 0.5,
whose kernel forms ``1 - weight`` in binary32 from the already rounded weight; that
subtraction is mirrored in binary32 (see ``beta1_weight`` below).

Returned keys (all ``numpy.float32``):

``"adam"`` (``adamw`` is ``decoupled=True``)
    ``grad_scale``; ``weight_decay`` (L2 coefficient, 0 when decoupled); ``decay_factor``
    ``1 - lr * weight_decay`` when decoupled, else 1; ``beta1_weight`` the first-moment
    coefficient ``w = 1 - beta1`` if ``w < 0.5``, else ``-(1 - w)`` (a negative value or -0
    selects the gradient as the base of the moving average); ``beta2``; ``one_minus_beta2``;
    ``bias_correction2_sqrt`` ``sqrt(1 - beta2**step)``; ``eps``; ``neg_step_size``
    ``-lr / (1 - beta1**step)``.
``"sgd"``
    ``grad_scale``; ``weight_decay``; ``momentum``; ``one_minus_dampening``; ``neg_lr``.
``"adagrad"``
    ``grad_scale``; ``weight_decay``; ``eps``; ``neg_clr`` ``-lr / (1 + (step - 1) * lr_decay)``.

A ``weight_decay`` that is 0 in binary32 means "no L2 term": the models skip that
multiply-add, as torch does for ``weight_decay == 0`` (it would otherwise turn a -0 gradient
into +0 and an infinite parameter into a NaN gradient).
"""

import math

import numpy as np

__all__ = ["step_scalars", "MAX_COUNTED_STEP", "OPTIMIZERS"]

# torch keeps Adam's and AdaGrad's step count in a float32 tensor, which stops counting at 2**24.
MAX_COUNTED_STEP = 1 << 24

OPTIMIZERS = ("adam", "sgd", "adagrad")


def check_range(name, value, low, high, *, low_open=False, high_open=False):
    """Raise ValueError unless ``low (<|<=) value (<|<=) high``, naming ``name`` and the range."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{name} must be a real number, not {value!r}")
    value = float(value)
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if math.isnan(value) or too_low or too_high:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be in {interval}, not {value!r}")
    return value


def _check_step(step, limit):
    """Validate the 1-based step number; ``limit`` is the largest step torch can count."""
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or not 1 <= step <= limit:
        raise ValueError(f"step must be an integer in [1, {limit}], not {step!r}")
    return int(step)


def _common(grad_scale, weight_decay):
    """The two scalars every optimizer has: the unscale multiplier and the L2 coefficient."""
    grad_scale = check_range("grad_scale", grad_scale, 0.0, math.inf, low_open=True, high_open=True)
    weight_decay = check_range("weight_decay", weight_decay, 0.0, math.inf, high_open=True)
    return grad_scale, weight_decay


def _adam(*, step, lr, betas, eps, weight_decay, decoupled=False, grad_scale=1.0):
    step = _check_step(step, MAX_COUNTED_STEP)
    lr = check_range("lr", lr, 0.0, math.inf, high_open=True)
    eps = check_range("eps", eps, 0.0, math.inf, high_open=True)
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), not {betas!r}")
    beta1 = check_range("betas[0]", betas[0], 0.0, 1.0, high_open=True)
    beta2 = check_range("betas[1]", betas[1], 0.0, 1.0, high_open=True)
    grad_scale, weight_decay = _common(grad_scale, weight_decay)
    # torch's lerp kernel: weight rounded to float32, small weights use self + w * (end - self),
    # others end - (end - self) * (1 - w) with 1 - w formed in float32.
    weight = np.float32(1 - beta1)
    beta1_weight = weight if abs(weight) < np.float32(0.5) else -(np.float32(1) - weight)
    return {
        "grad_scale": np.float32(grad_scale),
        "weight_decay": np.float32(0.0 if decoupled else weight_decay),
        "decay_factor": np.float32(1 - lr * weight_decay if decoupled else 1.0),
        "beta1_weight": np.float32(beta1_weight),
        "beta2": np.float32(beta2),
        "one_minus_beta2": np.float32(1 - beta2),
        "bias_correction2_sqrt": np.float32((1 - beta2**step) ** 0.5),
        "eps": np.float32(eps),
        "neg_step_size": np.float32(-(lr / (1 - beta1**step))),
    }


def _sgd(*, step, lr, momentum, dampening, weight_decay, nesterov, grad_scale=1.0):
    _check_step(step, math.inf)
    lr = check_range("lr", lr, 0.0, math.inf, high_open=True)
    momentum = check_range("momentum", momentum, 0.0, math.inf, high_open=True)
    dampening = check_range("dampening", dampening, -math.inf, math.inf, low_open=True, high_open=True)
    grad_scale, weight_decay = _common(grad_scale, weight_decay)
    if nesterov and (momentum == 0 or dampening != 0):
        raise ValueError(f"nesterov needs momentum in (0, inf) and dampening == 0, "
                         f"not momentum={momentum!r}, dampening={dampening!r}")
    return {
        "grad_scale": np.float32(grad_scale),
        "weight_decay": np.float32(weight_decay),
        "momentum": np.float32(momentum),
        "one_minus_dampening": np.float32(1 - dampening),
        "neg_lr": np.float32(-lr),
    }


def _adagrad(*, step, lr, lr_decay, weight_decay, eps, grad_scale=1.0):
    step = _check_step(step, MAX_COUNTED_STEP)
    lr = check_range("lr", lr, 0.0, math.inf, high_open=True)
    lr_decay = check_range("lr_decay", lr_decay, 0.0, math.inf, high_open=True)
    eps = check_range("eps", eps, 0.0, math.inf, high_open=True)
    grad_scale, weight_decay = _common(grad_scale, weight_decay)
    return {
        "grad_scale": np.float32(grad_scale),
        "weight_decay": np.float32(weight_decay),
        "eps": np.float32(eps),
        "neg_clr": np.float32(-(lr / (1 + (step - 1) * lr_decay))),
    }


_BUILDERS = {"adam": _adam, "sgd": _sgd, "adagrad": _adagrad}


def step_scalars(optimizer, *, step, **hyper):
    """The binary32 scalars of one step of ``optimizer``, computed on the host.

    Each value is torch's own Python (binary64) expression rounded once to binary32, so a
    float32 kernel that receives it sees exactly what torch's kernel sees. The keys and their
    meaning are listed in the module docstring.

    Parameters
    ----------
    optimizer : {"adam", "sgd", "adagrad"}
        Which optimizer; AdamW is ``"adam"`` with ``decoupled=True``.
    step : int
        The 1-based number of the step being taken (torch's ``state["step"]`` after its
        increment). Adam and AdaGrad accept 1 to 2**24, where torch's float32 counter stops.
    **hyper
        The optimizer's hyper-parameters, with the same names and meaning as the golden
        model's keywords: ``lr, betas, eps, weight_decay, decoupled, grad_scale`` for Adam;
        ``lr, momentum, dampening, weight_decay, nesterov, grad_scale`` for SGD;
        ``lr, lr_decay, weight_decay, eps, grad_scale`` for AdaGrad.

    Returns
    -------
    dict of str to numpy.float32

    Raises
    ------
    ValueError
        If ``optimizer`` is unknown or a hyper-parameter is outside its allowed range.
    TypeError
        If a hyper-parameter is missing or unknown for ``optimizer``.
    """
    try:
        builder = _BUILDERS[optimizer]
    except (KeyError, TypeError):
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, not {optimizer!r}") from None
    return builder(step=step, **hyper)
