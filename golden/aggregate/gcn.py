"""A two-layer GCN forward pass as the hardware runs it, a float64 reference and the bound between them.

``logits = Â relu(Â (X W1)) W2`` evaluated as ``Â ((relu(Â (X W1))) W2)`` (the seed's Section
2.4.1, combination before aggregation), with ``Â = D^-1/2 (A + I) D^-1/2`` in float32:

* combination ``X W`` is the systolic array's binary32 GEMM, :func:`golden.systolic.gemm`
  (``element="f32"``: per output, a chain of rounded products added in increasing ``k``);
* aggregation ``Â Y`` is :func:`golden.aggregate.aggregate` (weighted, two roundings per term);
* ``relu`` returns +0.0 for every value with the sign bit set (``-0.0`` included) and every
  other value unchanged (the canonical NaN has sign 0), as the pipeline's drain does.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from golden.systolic import gemm, gemm_error_bound

from .model import U_F64, aggregate, aggregate_bound, gamma

__all__ = ["relu", "GcnResult", "gcn_forward", "gcn_reference", "gcn_bound", "gcn_weights"]


def relu(values):
    """+0.0 where the sign bit is set, the value elsewhere (float32)."""
    values = np.asarray(values, np.float32)
    return np.where(np.signbit(values), np.float32(0.0), values).astype(np.float32)


@dataclass
class GcnResult:
    """Every intermediate of one forward pass (float32)."""

    xw: np.ndarray
    hidden: np.ndarray
    hw: np.ndarray
    logits: np.ndarray


def _gemm(a, b):
    return gemm(a, b, element="f32").view(np.float32)


def gcn_forward(normalised, x, w1, w2, *, lanes=4):
    """The hardware's forward pass, bit for bit (see the module docstring)."""
    xw = _gemm(x, w1)
    hidden = relu(aggregate(normalised, xw, lanes=lanes, weighted=True))
    hw = _gemm(hidden, w2)
    return GcnResult(xw, hidden, hw, aggregate(normalised, hw, lanes=lanes, weighted=True))


def gcn_reference(normalised, x, w1, w2):
    """The same network in float64 (scipy.sparse and NumPy, any order) from the same float32 inputs."""
    a = sp.csr_matrix(normalised).astype(np.float64)
    hidden = np.maximum(a @ (x.astype(np.float64) @ w1.astype(np.float64)), 0.0)
    return a @ (hidden @ w2.astype(np.float64))


def gcn_bound(normalised, x, w1, w2, result):
    """Elementwise bound on ``|result.logits - gcn_reference(...)|``, propagated layer by layer.

    Each step adds its own rounding error, computed from its actual (rounded) inputs, to the
    error it inherits: a GEMM ``fl(Y W)`` with ``|Y - Y_exact| <= E`` is within
    ``gamma_{K+1} |Y| |W| + 2 K eta + E |W|`` of ``Y_exact W`` (:func:`golden.systolic.gemm_error_bound`),
    an aggregation within ``gamma_d |Â| |Y| + d eta + |Â| E`` (:func:`aggregate_bound`), and
    ``relu`` is 1-Lipschitz. The float64 reference's own error is bounded by
    ``gamma64_n`` of the magnitudes, ``n`` the longest chain of operations.
    """
    a = sp.csr_matrix(normalised)
    e_xw = gemm_error_bound(x, w1, element="f32", include_f64_reference=False)
    e_hidden = aggregate_bound(a, result.xw, weighted=True, feature_error=e_xw, include_f64_reference=False)
    e_hw = (gemm_error_bound(result.hidden, w2, element="f32", include_f64_reference=False)
            + e_hidden @ np.abs(w2.astype(np.float64)))
    e_logits = aggregate_bound(a, result.hw, weighted=True, feature_error=e_hw, include_f64_reference=False)
    absolute = abs(a.astype(np.float64))
    magnitude = absolute @ ((absolute @ (np.abs(x.astype(np.float64)) @ np.abs(w1.astype(np.float64))))
                            @ np.abs(w2.astype(np.float64)))
    chain = x.shape[1] + w2.shape[0] + 2 * int(np.diff(a.indptr).max()) + 4
    return e_logits + gamma(chain, U_F64) * magnitude


def gcn_weights(features, hidden, classes, seed=0):
    """Glorot-uniform float32 weights ``W1 (features x hidden)`` and ``W2 (hidden x classes)``."""
    rng = np.random.default_rng(seed)

    def glorot(fan_in, fan_out):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)

    return glorot(features, hidden), glorot(hidden, classes)
