"""The golden entry point ``aggregate`` and its float64 error bound.

``aggregate(A, B, lanes=P, weighted=w)`` is exactly what the pipeline returns for the packets
of :func:`~golden.aggregate.spawner.spawn` (default options: bank balancing, the RTL's
hazard window, one B bank per read), un-permuted to the rows of A:

    OUT[r] = (((+0 + t_1) + t_2) + ... + t_d),   t_j = B[c_j]  or  fl(a_rj * B[c_j]),

over the nonzeros ``c_1 .. c_d`` of row ``r`` **in the order of their packets** (not column
order: the spawner interleaves rows to hide the adder latency), each ``+`` and ``*`` one
binary32 round-to-nearest-even operation, subnormals kept, NaNs canonical.
"""

import numpy as np
import scipy.sparse as sp

from .pipeline import HAZARD_WINDOW, execute
from .spawner import coo_of, spawn

__all__ = ["aggregate", "aggregate_bound", "U_F32", "U_F64", "ETA_F32", "gamma"]

U_F32 = 2.0**-24
U_F64 = 2.0**-53
# Half the smallest binary32 subnormal: the largest error of one binary32 product that underflows.
ETA_F32 = 2.0**-150


def gamma(n, unit_roundoff=U_F32):
    """Higham's ``gamma_n = n u / (1 - n u)`` (elementwise for arrays)."""
    n = np.asarray(n, dtype=np.float64)
    if np.any(n * unit_roundoff >= 1):
        raise ValueError("n u must be below 1 for a rounding-error bound")
    return n * unit_roundoff / (1 - n * unit_roundoff)


def _check_features(adjacency, features):
    features = np.asarray(features)
    if features.dtype != np.float32 or features.ndim != 2:
        raise ValueError(f"features must be a 2-D float32 array, not {features.dtype} {features.ndim}-D")
    if adjacency.shape[1] != features.shape[0]:
        raise ValueError(f"adjacency has {adjacency.shape[1]} columns but features has "
                         f"{features.shape[0]} rows")
    return features


def aggregate(adjacency, features, *, lanes=4, weighted=False, window=HAZARD_WINDOW, b_banks=1,
              balance=True):
    """``OUT = A B`` in binary32, accumulated in the pipeline's order (see the module docstring).

    Parameters
    ----------
    adjacency : scipy.sparse matrix, shape (n, m)
        A; its values are used when ``weighted`` (rounded to float32), otherwise every nonzero
        counts as 1.
    features : numpy.ndarray of float32, shape (m, F)
        B.
    lanes : int
        Pipeline lanes P (1 to 8).
    weighted : bool
        ``OUT[r] += fl(a * B[c])`` rather than ``OUT[r] += B[c]``.
    window, b_banks, balance
        Spawner options (:func:`~golden.aggregate.spawner.spawn`); the defaults are the
        pipeline's.

    Returns
    -------
    numpy.ndarray of float32, shape (n, F)
    """
    if not sp.issparse(adjacency):
        raise ValueError("adjacency must be a scipy.sparse matrix")
    features = _check_features(adjacency, features)
    spawned = spawn(adjacency, lanes=lanes, weighted=weighted, window=window, b_banks=b_banks,
                    balance=balance)
    out, _ = execute(spawned.packets, features, n_rows=spawned.n_rows, weighted=weighted, b_banks=b_banks)
    return spawned.unpermute(out)


def aggregate_bound(adjacency, features, *, weighted=False, feature_error=None, include_f64_reference=True):
    """Elementwise bound on ``|aggregate(A, B) - A B|`` (exact, float64 operands), for finite results.

    Row ``r`` with ``d_r`` nonzeros is a recursive sum of ``d_r`` terms (the first addition to
    +0 is exact), each term a rounded product in weighted mode, so (Higham, *Accuracy and
    Stability of Numerical Algorithms*, 2nd ed., sections 3.1 and 4.2)::

        |OUT - A B|[r, f] <= gamma_{d_r} (|A| |B|)[r, f] + d_r eta   (eta = 2^-150, weighted only)

    which grows with the row degree. ``feature_error`` (an elementwise bound on the error of
    ``features`` itself) adds ``|A| feature_error``. ``include_f64_reference`` adds the error of
    a float64 reference computed in any order, ``gamma64_{d_r} (|A| |B|)``.
    """
    rows, cols, values, shape = coo_of(adjacency, weighted)
    features = np.asarray(features, dtype=np.float64)
    magnitude_a = sp.csr_matrix((np.abs(values.astype(np.float64)), (rows, cols)), shape=shape)
    magnitude = magnitude_a @ np.abs(features)
    degrees = np.bincount(rows, minlength=shape[0]).astype(np.float64)[:, None]
    bound = gamma(degrees) * magnitude
    if weighted:
        bound = bound + degrees * ETA_F32
    if feature_error is not None:
        bound = bound + magnitude_a @ np.asarray(feature_error, np.float64)
    if include_f64_reference:
        bound = bound + gamma(degrees, U_F64) * magnitude
    return bound
