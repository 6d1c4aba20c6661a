"""``neartrain demo allreduce``: data-parallel training through the GCU with Adam in the network.

Fast: bad arguments and a missing torch are one line and exit 2 without simulating. Slow (since CI
ran over its 45 minutes): the CLI trains a small model (2-6-6-3, 81 parameters) on 3 leaves for 10
steps on ``test_gcu``'s ``3_leaves_adam`` build (the same Verilog, so no build of its own): every
leaf's fetched parameters bit-exact with the golden at every step, the loss within the bound of
``torch.optim.Adam``'s, the GCU's counters clear; a result with one leaf's step off, or a loss
outside the bound, fails its check and the exit status; and the default demo (4 leaves, the
1,251-parameter model, an 8-port switch build of its own) and 2 leaves.
"""

import dataclasses
import sys

import pytest

from rtl.registry import get_block
from scripts.cli.main import main
from scripts.demo import allreduce as demo
from scripts.sim import knobs

# One worker for this module and test_gcu (make test's --dist loadgroup): the module-scoped demo run
# would otherwise run once per worker that takes one of its tests, each waiting for the other on
# the shared 3_leaves_adam build folder (11 min of a cold CI run, a core idle meanwhile).
pytestmark = pytest.mark.xdist_group("gcu_3_leaves_adam")

TORCH = "torch.optim.Adam is the demo's reference"
SMALL = {"leaves": 3, "hidden": 6, "steps": 10}


@pytest.mark.parametrize("options,message", [
    ({"leaves": 1}, "leaves must be an integer in 2..7"),
    ({"leaves": 8}, "leaves must be an integer in 2..7"),
    ({"leaves": True}, "leaves must be an integer"),
    ({"steps": 0}, r"steps must be an integer in \[1, 200\]"),
    ({"hidden": 65}, "hidden must be an integer in 2..64"),
    ({"seed": -1}, "seed must be an integer >= 0"),
])
def test_bad_arguments_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        demo.check_arguments(**options)


def test_cli_rejects_bad_leaves_without_simulating(capsys):
    assert main(["demo", "allreduce", "--leaves", "16"]) == 2
    error = capsys.readouterr().err
    assert "leaves must be an integer in 2..7" in error and len(error.strip().splitlines()) == 1


def test_cli_without_torch_is_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    assert main(["demo", "allreduce"]) == 2
    error = capsys.readouterr().err
    assert "needs torch" in error and len(error.strip().splitlines()) == 1


def test_cluster_params_fit_the_model():
    size = 1251  # the default model, 2-32-32-3
    params = demo.cluster_params(4, size)
    assert params == {"nodes": 8, "leaves": 4, "partitions": 4, "chunks": 23, "update": "adam"}
    lines = params["partitions"] * params["chunks"]
    assert lines * 14 >= size > (lines - params["partitions"]) * 14  # no partition's worth of padding
    # The small model on 3 leaves is test_gcu's 3_leaves_adam build (its parameters, resolved).
    block = get_block("gcu_cluster")
    assert block.resolve(demo.cluster_params(3, 81)) == block.resolve({"update": "adam", "partitions": 4,
                                                                        "chunks": 2})


@pytest.fixture(scope="module")
def small_run():  # make test-full only since CI ran over its 45 minutes (128 s of a core, cold)
    """The CLI's run of the small demo: its exit status and printout, and the same run's result."""
    knobs.oracle("torch", TORCH)
    capture = pytest.MonkeyPatch()
    lines = []
    capture.setattr(demo, "format_report", _keeping(demo.format_report, lines))
    status = main(["demo", "allreduce", *(f"--{key}={value}" for key, value in SMALL.items())])
    capture.undo()
    return status, lines


def _keeping(format_report, results):
    def wrapped(result):
        results.append(result)
        return format_report(result)
    return wrapped


@pytest.mark.slow
def test_small_demo_trains_bit_exact_within_the_bound(small_run):
    status, results = small_run
    result = results[0]
    report = demo.format_report(result)
    assert status == 0 and result.ok, report
    assert len(result.bit_exact) == SMALL["steps"], report
    assert all(len(step) == 3 and all(step) for step in result.bit_exact), report
    assert result.loss_ratio <= 1 and result.loss[-1] < result.loss[0], report
    assert not any(result.counters.values()) and result.counters, result.counters
    for check in "abc":
        assert f"check ({check}) PASS" in report
    assert report.splitlines()[-1].startswith("PASS")


@pytest.mark.slow
@pytest.mark.parametrize("change,check", [
    (lambda r: {"bit_exact": [*r.bit_exact[:-1], [True, False, True]]}, "a"),
    (lambda r: {"loss": [r.loss[0] * (1 + 2 * demo.LOSS_BOUND), *r.loss[1:]]}, "b"),
    (lambda r: {"counters": {**r.counters, "malformed": 1}}, "c"),
    (lambda r: {"nonfinite": 1}, "c"),
])
def test_any_failed_check_fails_the_demo(small_run, change, check):
    result = dataclasses.replace(small_run[1][0], **change(small_run[1][0]))
    report = demo.format_report(result)
    assert not result.ok and not result.checks[check], report
    assert f"check ({check}) FAIL" in report and report.splitlines()[-1].startswith("FAIL")


@pytest.mark.slow
@pytest.mark.parametrize("leaves", [4, 2])
def test_default_demo_trains_bit_exact(leaves):
    knobs.oracle("torch", TORCH)
    result = demo.run_demo(leaves=leaves)
    report = demo.format_report(result)
    assert result.ok, report
    assert result.steps >= 10 and all(len(step) == leaves for step in result.bit_exact), report
    assert result.loss[-1] < result.loss[0], report
