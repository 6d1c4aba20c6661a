"""The sizing arithmetic of ``bench_systolic.py sizing`` (:mod:`testbenches.systolic.sizing_fit`) on
synthetic sweeps with known costs.

The committed sizing tables (docs/systolic.md, Section 6.4) come from least-squares fits of measured
sweep points and a search for the largest square-ish array inside each board budget. These tests
feed the fit points generated from known per-PE, per-edge and fixed costs and check that it recovers
them exactly, that too few or degenerate points give no fit, and that the largest array and its
binding resource are the ones a hand calculation gives.
"""

import numpy as np
import pytest

from testbenches.systolic.sizing_fit import (
    SIZING_RESOURCES,
    cost_features,
    fit_costs,
    largest_array,
    predict_use,
)

COSTS = {  # per PE, per edge element (rows + cols), fixed
    "LUT": (100.0, 20.0, 500.0), "FF": (150.0, 30.0, 800.0), "CARRY": (4.0, 2.0, 10.0),
    "DSP48E2": (1.0, 0.0, 0.0), "BRAM": (0.0, 0.5, 2.0),
}


def _point(rows, cols):
    point = {"rows": rows, "cols": cols}
    for key, (pe, edge, fixed) in COSTS.items():
        point[key] = pe * rows * cols + edge * (rows + cols) + fixed
    return point


def test_fit_recovers_linear_costs():
    fit = fit_costs("OS", [_point(r, c) for r, c in ((1, 1), (2, 2), (4, 4), (1, 4))])
    for key in SIZING_RESOURCES:
        np.testing.assert_allclose(fit[key], COSTS[key], atol=1e-6)
    assert predict_use("OS", fit, 8, 8, {})["LUT"] == pytest.approx(100 * 64 + 20 * 16 + 500)


def test_fit_needs_independent_points():
    """Square arrays alone cannot separate per-PE from per-edge cost; too few points give no fit."""
    assert fit_costs("OS", [_point(1, 1), _point(2, 2)]) is None
    assert fit_costs("OS", []) is None


def test_largest_array_and_binding_resource():
    fit = fit_costs("OS", [_point(r, c) for r, c in ((1, 1), (2, 2), (4, 4), (1, 4))])
    # 30 x 30 needs 900 DSPs and 100 * 900 + 20 * 60 + 500 = 91,700 LUTs; 31 x 31 needs 961 DSPs.
    budgets = {"LUT": 1e6, "FF": 1e7, "CARRY": 1e6, "DSP48E2": 960, "BRAM": 1e3}
    assert largest_array("OS", fit, {}, budgets, (1, 1)) == (30, "DSP48E2")
    # A LUT budget below 31 x 31's 97,840 (and above 30 x 30's 91,700) binds at 30 x 30 instead.
    budgets = {**budgets, "DSP48E2": 1e4, "LUT": 95_000}
    assert largest_array("OS", fit, {}, budgets, (1, 1)) == (30, "LUT")
    # Shape (2, 1): 2n x n arrays; 2n^2 <= 960 DSPs gives n = 21.
    budgets = {**budgets, "LUT": 1e7, "DSP48E2": 960}
    assert largest_array("OS", fit, {}, budgets, (2, 1)) == (21, "DSP48E2")


def test_block_fp_features_count_group_units_and_deskew():
    """Block FP charges one unit per ``block`` PEs of a row and the cols (cols - 1) / 2 de-skew."""
    assert cost_features("block FP", 4, 20, {"block": 16}) == (80, 4 * 2, 20 * 19 // 2, 1)
    assert cost_features("OS", 4, 20, {}) == (80, 24, 1)
