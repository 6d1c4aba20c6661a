"""Per-element datapaths of the optimizer updaters, in the exact operation order of :mod:`golden.optim`.

Each datapath builds one lane on a :class:`~rtl.optim.dataflow.Dataflow` from the binary32
``rtl.fp`` units. The line comments quote the golden model's docstring
(``golden/optim/adam_model.py``, ``sgd_model.py``, ``adagrad_model.py``); every operation
there is one unit here, so the RTL rounds exactly where the model does. The per-step
control decisions of the models (skip the L2 term when ``weight_decay == 0``, the lerp
base chosen by the sign of ``beta1_weight``, SGD's first step, momentum 0 and Nesterov)
are multiplexers with run-level selects, so the latency is the same in every mode.

The gradient arrives as raw bits and is widened to binary32 exactly (f16 and bf16 through
:class:`~rtl.fp.fp_convert.FloatConverter`; an f32 gradient passes unchanged, and any NaN
it carries becomes the canonical NaN in the first multiplication). The 16-bit parameter
copy is rounded to nearest even by a converter as well.
"""

from dataclasses import dataclass

from amaranth.hdl import Const

from ..fp.fp_add import FloatAdder
from ..fp.fp_convert import FloatConverter
from ..fp.fp_div import FloatDivider
from ..fp.fp_fma import FloatFusedMultiplyAdd
from ..fp.fp_mul import FloatMultiplier
from ..fp.fp_sqrt import FloatSquareRoot

__all__ = ["OptimizerSpec", "OPTIMIZERS", "GRAD_FORMATS", "COPY_FORMATS", "widen_gradient", "param_copy"]

# Run-level format selects: index = code written by the host.
GRAD_FORMATS = ("f32", "f16", "bf16")
COPY_FORMATS = ("none", "f16", "bf16")


def widen_gradient(df, grad, grad_format):
    """The gradient as binary32: ``grad`` (32 raw bits, 16-bit formats in the low half) by format code."""
    half = df.wire(grad, lambda bits: bits[:16], "grad16")
    from_f16 = df.unit(FloatConverter(source="f16", target="f32"), "widen_f16", a=half)
    from_bf16 = df.unit(FloatConverter(source="bf16", target="f32"), "widen_bf16", a=half)
    return df.choose(grad_format, [grad, from_f16, from_bf16], "g0")


def param_copy(df, param, copy_format):
    """The 16-bit copy of ``param`` by format code (0 when there is no copy)."""
    to_f16 = df.unit(FloatConverter(source="f32", target="f16"), "copy_f16", a=param)
    to_bf16 = df.unit(FloatConverter(source="f32", target="bf16"), "copy_bf16", a=param)
    return df.choose(copy_format, [df.constant(Const(0, 16), "no_copy"), to_f16, to_bf16], "param16")


def _product_units(products):
    """``(mul, fma)``: builders of the multiplier and FMA units with the significand-product
    options ``products`` (``dsp_tile``, ``lut_bits``), which change the mapping, never the result."""
    def mul(df, name, a, b):
        return df.unit(FloatMultiplier(**products), name, a=a, b=b)

    def fma(df, name, a, b, c):
        return df.unit(FloatFusedMultiplyAdd(**products), name, a=a, b=b, c=c)
    return mul, fma


def _add(df, name, a, b, subtract=False):
    return df.unit(FloatAdder(subtract=subtract), name, a=a, b=b)


def _div(df, name, a, b):
    return df.unit(FloatDivider(), name, a=a, b=b)


def _sqrt(df, name, a):
    return df.unit(FloatSquareRoot(), name, a=a)


def _nonzero(df, scalar, name):
    """Run-level test ``scalar != 0`` (either zero sign counts as zero, as in ``k.x != 0``)."""
    return df.wire(scalar, lambda bits: bits[:31].any(), name).value


def _unscale_and_decay(df, g0, param, k, products):
    """``g = grad * grad_scale``, then ``g = fma(param, weight_decay, g)`` unless ``weight_decay == 0``."""
    _mul, _fma = _product_units(products)
    g = _mul(df, "unscale", g0, k["grad_scale"])
    with_l2 = _fma(df, "l2", param, k["weight_decay"], g)
    return df.select(_nonzero(df, k["weight_decay"], "has_l2"), with_l2, g, "g")


def adam(df, x, k, flags, products):
    """Adam / AdamW (``golden/optim/adam_model.py``). AdamW's ``decay_factor`` is 1 for Adam,
    and ``param * 1`` is ``param`` bit for bit (NaN payloads aside, and every output NaN is
    canonical), so the multiplication is always done; AdamW's ``weight_decay`` scalar is 0."""
    _mul, _fma = _product_units(products)
    p = _mul(df, "decay", x["param"], k["decay_factor"])            # p = param * k.decay_factor
    g = _unscale_and_decay(df, x["g0"], p, k, products)              # g = grad * k.grad_scale [+ L2]
    d = _add(df, "d", g, x["exp_avg"], subtract=True)                # d = g - exp_avg
    base_is_g = df.wire(k["beta1_weight"], lambda bits: bits[31], "base_is_g").value
    base = df.select(base_is_g, g, x["exp_avg"], "lerp_base")        # g if signbit(k.beta1_weight)
    m = _fma(df, "m", d, k["beta1_weight"], base)                    # m = fma(d, k.beta1_weight, base)
    v2 = _mul(df, "v2", x["exp_avg_sq"], k["beta2"])                 # v2 = exp_avg_sq * k.beta2
    t = _mul(df, "t", g, k["one_minus_beta2"])                       # t = g * k.one_minus_beta2
    v = _fma(df, "v", t, g, v2)                                      # v = fma(t, g, v2)
    r = _sqrt(df, "r", v)                                            # r = sqrt(v)
    q = _div(df, "q", r, k["bias_correction2_sqrt"])                 # q = r / k.bias_correction2_sqrt
    den = _add(df, "den", q, k["eps"])                               # den = q + k.eps
    n = _mul(df, "n", m, k["neg_step_size"])                         # n = m * k.neg_step_size
    u = _div(df, "u", n, den)                                        # u = n / den
    p = _add(df, "p", p, u)                                          # p = p + u
    return {"param": p, "exp_avg": m, "exp_avg_sq": v}


def sgd(df, x, k, flags, products):
    """SGD with momentum, dampening, Nesterov and weight decay (``golden/optim/sgd_model.py``).
    With momentum 0 the buffer passes through unchanged, as the model returns it."""
    _mul, _fma = _product_units(products)
    g = _unscale_and_decay(df, x["g0"], x["param"], k, products)    # g = grad * k.grad_scale [+ L2]
    b = _mul(df, "b", x["momentum_buffer"], k["momentum"])          # b = momentum_buffer * k.momentum
    accumulated = _fma(df, "buf", g, k["one_minus_dampening"], b)   # buf = fma(g, k.one_minus_dampening, b)
    buf = df.select(flags["first_step"], g, accumulated, "buf_sel")  # step 1: buf = g
    nesterov = _fma(df, "nesterov", buf, k["momentum"], g)          # g = fma(buf, k.momentum, g)
    has_momentum = _nonzero(df, k["momentum"], "has_momentum")
    direction = df.select(has_momentum, df.select(flags["nesterov"], nesterov, buf, "momentum_g"), g, "g2")
    p = _fma(df, "p", direction, k["neg_lr"], x["param"])          # p = fma(g, k.neg_lr, param)
    buf_out = df.select(has_momentum, buf, x["momentum_buffer"], "buf_out")
    return {"param": p, "momentum_buffer": buf_out}


def adagrad(df, x, k, flags, products):
    """AdaGrad (``golden/optim/adagrad_model.py``)."""
    _mul, _fma = _product_units(products)
    g = _unscale_and_decay(df, x["g0"], x["param"], k, products)    # g = grad * k.grad_scale [+ L2]
    s = _fma(df, "s", g, g, x["state_sum"])                          # s = fma(g, g, state_sum)
    r = _sqrt(df, "r", s)                                            # r = sqrt(s)
    std = _add(df, "std", r, k["eps"])                               # std = r + k.eps
    n = _mul(df, "n", g, k["neg_clr"])                               # n = g * k.neg_clr
    u = _div(df, "u", n, std)                                        # u = n / std
    p = _add(df, "p", x["param"], u)                                 # p = param + u
    return {"param": p, "state_sum": s}


@dataclass(frozen=True)
class OptimizerSpec:
    """What the updater of one optimizer streams and needs.

    Attributes
    ----------
    name : str
        ``"adam"``, ``"sgd"`` or ``"adagrad"`` (the :func:`golden.optim.step_scalars` name).
    states : tuple of str
        Optimizer-state tensors, read and written with the parameters (golden keyword names).
    scalars : tuple of str
        Host scalars (binary32 bits), the keys of :func:`golden.optim.step_scalars`.
    flags : tuple of str
        One-bit run-level inputs beyond the scalars.
    datapath : callable
        ``datapath(df, x, k, flags, products)`` returning the new ``param`` and states as Timed
        values; ``products`` holds the multipliers' and FMAs' mapping options.
    """

    name: str
    states: tuple
    scalars: tuple
    flags: tuple
    datapath: object


OPTIMIZERS = {
    "adam": OptimizerSpec("adam", ("exp_avg", "exp_avg_sq"),
                          ("grad_scale", "weight_decay", "decay_factor", "beta1_weight", "beta2",
                           "one_minus_beta2", "bias_correction2_sqrt", "eps", "neg_step_size"), (), adam),
    "sgd": OptimizerSpec("sgd", ("momentum_buffer",),
                         ("grad_scale", "weight_decay", "momentum", "one_minus_dampening", "neg_lr"),
                         ("first_step", "nesterov"), sgd),
    "adagrad": OptimizerSpec("adagrad", ("state_sum",), ("grad_scale", "weight_decay", "eps", "neg_clr"),
                             (), adagrad),
}
