"""What the host hands the RTL updater, and what it must get back: the register-level view of one step.

The RTL updater (``rtl.optim``) takes the step's host scalars as binary32 bit patterns,
a few run-level flags and format codes, and streams raw bits. This module turns the
golden models' keyword arguments into those register values (:func:`scalar_bits`,
:func:`run_flags`) and computes the expected raw outputs of a whole step from raw inputs
(:func:`reference_update`, :func:`reference_statistics`), so that the testbenches, the
device API and the benchmarks all compare against one definition. Every number comes from
the golden models (:func:`golden.optim.adam`, :func:`~golden.optim.sgd`,
:func:`~golden.optim.adagrad`, :func:`~golden.optim.gradient_to_f32`,
:func:`~golden.optim.param_copy_16`, :func:`~golden.optim.gradient_statistics`).

Format codes (the RTL's ``grad_format`` and ``copy_format`` registers) are the positions
in :data:`GRAD_FORMAT_CODES` and :data:`COPY_FORMAT_CODES`.
"""

import numpy as np

from .adagrad_model import adagrad
from .adam_model import adam
from .precision import gradient_to_f32, param_copy_16
from .scalars import step_scalars
from .sgd_model import sgd
from .statistics import gradient_statistics, nonfinite_gradient

__all__ = ["GRAD_FORMAT_CODES", "COPY_FORMAT_CODES", "STATE_NAMES", "scalar_bits", "run_flags",
           "reference_update", "reference_statistics"]

GRAD_FORMAT_CODES = ("f32", "f16", "bf16")
COPY_FORMAT_CODES = ("none", "f16", "bf16")
# Optimizer-state tensors, in the RTL's order, named as the golden models' keywords.
STATE_NAMES = {"adam": ("exp_avg", "exp_avg_sq"), "sgd": ("momentum_buffer",), "adagrad": ("state_sum",)}
_MODELS = {"adam": adam, "sgd": sgd, "adagrad": adagrad}


def scalar_bits(optimizer, hyper):
    """The step's host scalars as binary32 bit patterns (``dict`` of name to ``int``).

    ``hyper`` holds the golden model's keywords, ``step`` included.
    """
    scalars = step_scalars(optimizer, **hyper)
    return {name: int(np.float32(value).view(np.uint32)) for name, value in scalars.items()}


def run_flags(optimizer, hyper):
    """The one-bit run-level inputs: SGD's ``first_step`` (step 1) and ``nesterov``; none otherwise."""
    if optimizer != "sgd":
        return {}
    return {"first_step": int(hyper["step"] == 1), "nesterov": int(bool(hyper["nesterov"]))}


def _f32(bits):
    return np.ascontiguousarray(bits, dtype=np.uint32).view(np.float32)


def reference_update(optimizer, *, param, grad, states, hyper, grad_format="f32", copy_format="none"):
    """Expected raw outputs of one update step from raw inputs.

    Parameters
    ----------
    optimizer : {"adam", "sgd", "adagrad"}
    param : numpy.ndarray
        uint32 bits of the binary32 parameters.
    grad : numpy.ndarray
        Gradient bits: uint32 for ``"f32"``, uint16 for ``"f16"`` and ``"bf16"``.
    states : dict of str to numpy.ndarray
        uint32 bits of each state in :data:`STATE_NAMES` ``[optimizer]``.
    hyper : dict
        The golden model's keywords, ``step`` included.
    grad_format : {"f32", "f16", "bf16"}
    copy_format : {"none", "f16", "bf16"}

    Returns
    -------
    dict
        ``"param"`` and each state (uint32 bits), ``"param16"`` (uint16 bits, or None for
        ``"none"``) and ``"nonfinite"`` (bool, the sticky status bit).
    """
    grad_f32 = gradient_to_f32(np.asarray(grad), grad_format)
    arrays = [_f32(param), grad_f32] + [_f32(states[name]) for name in STATE_NAMES[optimizer]]
    results = _MODELS[optimizer](*arrays, **hyper)
    outputs = {"param": results[0].view(np.uint32)}
    for name, value in zip(STATE_NAMES[optimizer], results[1:], strict=True):
        outputs[name] = np.asarray(value, np.float32).view(np.uint32)
    outputs["param16"] = None if copy_format == "none" else param_copy_16(results[0], copy_format)
    outputs["nonfinite"] = nonfinite_gradient(grad_f32)
    return outputs


def reference_statistics(grad, grad_format="f32"):
    """Expected statistics-mode result (:class:`golden.optim.GradientStatistics`) of a raw gradient."""
    return gradient_statistics(gradient_to_f32(np.asarray(grad), grad_format))
