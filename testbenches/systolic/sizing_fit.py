"""The sizing arithmetic of ``bench_systolic.py sizing``: linear cost fits and the largest array in a budget.

Each resource of an array is fitted, by least squares over measured sweep points, as a per-PE cost,
a per-edge cost (rows + cols; block FP's group units and output de-skew instead) and a fixed cost;
the largest (shape[0] n) x (shape[1] n) array inside every board budget is then searched from the fit.
:mod:`testbenches.systolic.bench_systolic_sizing` runs it on the committed sweeps, and
``test_sizing_fit.py`` on synthetic sweeps with known costs.
"""

__all__ = ["SIZING_RESOURCES", "cost_features", "fit_costs", "predict_use", "largest_array"]

SIZING_RESOURCES = ("LUT", "FF", "CARRY", "DSP48E2", "BRAM")


def cost_features(kind, rows, cols, fixed):
    """The regressors of one array: PEs, edge (rows + cols, or block FP's group units), 1.

    Block FP also has the output de-skew, ``cols (cols - 1) / 2`` registers of 33 bits (Section
    7c), which dominates the FFs of its 1 x 16 point and would otherwise be charged to the PEs.
    """
    if kind == "block FP":
        return (rows * cols, rows * -(-cols // fixed["block"]), cols * (cols - 1) // 2, 1)
    return (rows * cols, rows + cols, 1)


def fit_costs(kind, points):
    """Least squares per resource over ``points``; None when they do not fix every coefficient."""
    import numpy as np

    if not points:
        return None
    x = np.array([cost_features(kind, p["rows"], p["cols"], p) for p in points], dtype=float)
    if len(points) < x.shape[1] or np.linalg.matrix_rank(x) < x.shape[1]:
        return None
    return {key: np.linalg.lstsq(x, np.array([p[key] for p in points]), rcond=None)[0]
            for key in SIZING_RESOURCES}


def predict_use(kind, fit, rows, cols, fixed):
    """The resources of a ``rows`` x ``cols`` array under ``fit`` (each at least 0)."""
    features = cost_features(kind, rows, cols, fixed)
    return {key: max(float(sum(a * f for a, f in zip(fit[key], features, strict=True))), 0.0)
            for key in SIZING_RESOURCES}


def largest_array(kind, fit, fixed, budgets, shape):
    """Largest n with the (shape[0] n) x (shape[1] n) array inside every budget; binding resource."""
    def fits(n):
        use = predict_use(kind, fit, shape[0] * n, shape[1] * n, fixed)
        return all(use[k] <= budgets[k] for k in SIZING_RESOURCES)

    n = 0
    while n < 4096 and fits(n + 1):
        n += 1
    over = predict_use(kind, fit, shape[0] * (n + 1), shape[1] * (n + 1), fixed)
    binding = max(SIZING_RESOURCES, key=lambda k: over[k] / budgets[k])
    return n, binding
