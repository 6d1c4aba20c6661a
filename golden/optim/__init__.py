"""Bit-exact golden models of the optimizer updaters (SmartUpdate, Smart-Infinity Section IV-A).

Each model is one step of a torch optimizer written as an explicit sequence of binary32
round-to-nearest-even operations (add, sub, mul, div, sqrt and fused multiply-add), the
exact sequence the RTL updater implements; the per-element order is in each model's module
docstring. Scalars that depend only on the step and hyper-parameters are computed on the
host by :func:`step_scalars`. Arrays are float32 NumPy arrays; inputs are never modified.

Models
    :func:`adam` (Adam and AdamW), :func:`sgd`, :func:`adagrad` (with
    :func:`adagrad_init_state`).
Mixed precision
    :func:`gradient_to_f32` (exact f16/bf16 widening), :func:`param_copy_16` (RNE copy).
Statistics and status
    :func:`gradient_statistics` (exact Kulisch sum of squares, NaN/Inf counts),
    :func:`nonfinite_gradient` and :data:`STATUS_NONFINITE_GRADIENT`.
"""

from ._float32 import CANONICAL_NAN_BITS, fma
from .adagrad_model import adagrad, adagrad_init_state
from .adam_model import adam
from .precision import COPY_FORMATS, GRADIENT_FORMATS, gradient_to_f32, param_copy_16
from .scalars import MAX_COUNTED_STEP, OPTIMIZERS, step_scalars
from .sgd_model import sgd
from .statistics import (
    ACCUMULATOR_FRACTION_BITS,
    ACCUMULATOR_INTEGER_BITS,
    ACCUMULATOR_WIDTH,
    MAX_STATISTICS_ELEMENTS,
    STATUS_NONFINITE_GRADIENT,
    GradientStatistics,
    gradient_statistics,
    nonfinite_gradient,
)

__all__ = ["adam", "sgd", "adagrad", "adagrad_init_state", "step_scalars", "gradient_to_f32",
           "param_copy_16", "gradient_statistics", "nonfinite_gradient", "GradientStatistics", "fma",
           "STATUS_NONFINITE_GRADIENT", "CANONICAL_NAN_BITS", "MAX_COUNTED_STEP", "OPTIMIZERS",
           "GRADIENT_FORMATS", "COPY_FORMATS", "ACCUMULATOR_FRACTION_BITS", "ACCUMULATOR_INTEGER_BITS",
           "ACCUMULATOR_WIDTH", "MAX_STATISTICS_ELEMENTS"]
