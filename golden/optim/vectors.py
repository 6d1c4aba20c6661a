"""Random operands for the optimizer testbenches (no cocotb tests of its own).

Tensors are raw binary32 bits (``numpy.uint32``) or 16-bit bits (``numpy.uint16``) that
mix realistic training values with every IEEE class, so that bit-exactness is checked on
signed zeros, subnormals, infinities, NaNs and overflow as well as on ordinary numbers.
Hyper-parameters are drawn so that every control decision of the models (weight decay on
or off, AdamW, the lerp base, SGD's first step, momentum 0, Nesterov) is exercised.
"""

import numpy as np

from golden.fp.vectors import special_values

__all__ = ["f32_tensor", "f16_tensor", "gradient_tensor", "random_hyper", "VARIANTS"]


def f32_tensor(rng, n, *, scale=1.0, positive=False, specials=0.1):
    """``n`` binary32 encodings: mostly ``scale * N(0, 1)``, plus specials and raw encodings.

    ``specials`` is the fraction of IEEE special values (zeros, subnormals, max, Inf, NaN)
    and, as much again, of uniformly random encodings (any class).
    """
    normal = (rng.standard_normal(n) * scale).astype(np.float32)
    if positive:
        normal = np.abs(normal)
    bits = normal.view(np.uint32).copy()
    pick = rng.random(n)
    special = special_values("f32").astype(np.uint32)
    raw = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    bits = np.where(pick < specials, rng.choice(special, n), bits)
    bits = np.where((pick >= specials) & (pick < 2 * specials), raw, bits)
    if positive:
        bits = np.where(pick < 2 * specials, bits & np.uint32(0x7FFF_FFFF), bits)
    return bits.astype(np.uint32)


def f16_tensor(rng, n, fmt, *, specials=0.1):
    """``n`` 16-bit encodings of ``fmt`` ("f16" or "bf16"): mostly N(0, 1) plus specials and raw bits."""
    normal = rng.standard_normal(n).astype(np.float32)
    if fmt == "f16":
        bits = normal.astype(np.float16).view(np.uint16)
    else:
        bits = (normal.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    pick = rng.random(n)
    raw = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    bits = np.where(pick < specials, rng.choice(special_values(fmt).astype(np.uint16), n), bits)
    bits = np.where((pick >= specials) & (pick < 2 * specials), raw, bits)
    return bits.astype(np.uint16)


def gradient_tensor(rng, n, fmt, *, specials=0.1):
    """A gradient in ``fmt`` ("f32", "f16", "bf16"): uint32 bits for f32, uint16 otherwise."""
    if fmt == "f32":
        return f32_tensor(rng, n, scale=1e-2, specials=specials)
    return f16_tensor(rng, n, fmt, specials=specials)


# Control decisions of each model, one row per variant (see random_hyper). Together the rows
# take every branch: L2 on and off, AdamW with and without decay, both lerp bases (beta1 of
# 0.9 gives a weight below 0.5; 0.5, 0.3 and 0.0 the other base), eps 0, step 1; SGD with
# momentum 0, plain momentum with dampening, Nesterov, each at the first step and later;
# AdaGrad with and without lr_decay and L2.
VARIANTS = {
    "adam": [
        {"decoupled": False, "weight_decay": 1e-2, "betas": (0.9, 0.999), "step": 2},
        {"decoupled": True, "weight_decay": 0.1, "betas": (0.3, 0.9), "step": 10},
        {"decoupled": False, "weight_decay": 0.0, "betas": (0.0, 0.999), "step": 1},
        {"decoupled": True, "weight_decay": 0.0, "betas": (0.9, 0.9), "step": 1000},
        {"decoupled": False, "weight_decay": 0.1, "betas": (0.5, 0.999), "step": 1, "eps": 0.0},
        {"decoupled": True, "weight_decay": 1e-2, "betas": (0.9, 0.999), "step": 1},
    ],
    "sgd": [
        {"momentum": 0.0, "dampening": 0.0, "nesterov": False, "weight_decay": 0.0, "step": 3},
        {"momentum": 0.9, "dampening": 0.1, "nesterov": False, "weight_decay": 1e-2, "step": 1},
        {"momentum": 0.9, "dampening": 0.1, "nesterov": False, "weight_decay": 0.0, "step": 7},
        {"momentum": 0.5, "dampening": 0.0, "nesterov": True, "weight_decay": 0.1, "step": 2},
        {"momentum": 0.9, "dampening": 0.0, "nesterov": True, "weight_decay": 0.0, "step": 1},
        {"momentum": 0.0, "dampening": 0.0, "nesterov": False, "weight_decay": 1e-2, "step": 1},
    ],
    "adagrad": [
        {"lr_decay": 0.0, "weight_decay": 0.0, "step": 1},
        {"lr_decay": 1e-3, "weight_decay": 1e-2, "step": 100},
        {"lr_decay": 0.0, "weight_decay": 0.1, "step": 2},
        {"lr_decay": 1e-3, "weight_decay": 0.0, "step": 5},
    ],
}


def random_hyper(rng, optimizer, variant=None):
    """Random hyper-parameters (the golden models' keywords) and the step number.

    With ``variant`` (an int), the control decisions come from row
    ``variant % len(VARIANTS[optimizer])`` and only the values are random, so that a test
    running consecutive variants takes every branch of the model for certain.
    """
    grad_scale = float(rng.choice([1.0, 2.0**-10, 1 / 3, 1e-3]))
    weight_decay = float(rng.choice([0.0, 0.0, 1e-2, 0.1]))
    lr = float(rng.choice([1e-3, 1e-2, 0.5]))
    if optimizer == "adam":
        step = int(rng.choice([1, 2, 10, 1000]))
        beta1 = float(rng.choice([0.9, 0.3, 0.5, 0.0]))
        hyper = {"step": step, "lr": lr, "betas": (beta1, float(rng.choice([0.999, 0.9]))),
                 "eps": float(rng.choice([1e-8, 1e-6, 0.0])), "weight_decay": weight_decay,
                 "decoupled": bool(rng.integers(2)), "grad_scale": grad_scale}
    elif optimizer == "sgd":
        momentum = float(rng.choice([0.0, 0.9, 0.5]))
        nesterov = bool(momentum and rng.integers(2))
        dampening = 0.0 if nesterov else float(rng.choice([0.0, 0.1]))
        hyper = {"step": int(rng.choice([1, 2, 7])), "lr": lr, "momentum": momentum, "dampening": dampening,
                 "weight_decay": weight_decay, "nesterov": nesterov, "grad_scale": grad_scale}
    else:
        hyper = {"step": int(rng.choice([1, 2, 100])), "lr": lr, "lr_decay": float(rng.choice([0.0, 1e-3])),
                 "weight_decay": weight_decay, "eps": float(rng.choice([1e-10, 1e-6])),
                 "grad_scale": grad_scale}
    if variant is not None:
        rows = VARIANTS[optimizer]
        hyper.update(rows[variant % len(rows)])
    return hyper
