"""pytest hooks shared by every NearTrain test."""

import pytest

from scripts.sim import knobs
from scripts.sim.runner import SimulationError


def pytest_configure(config):
    # The knobs are checked once, here: a bad NEARTRAIN_SEED / NEARTRAIN_VECTORS /
    # NEARTRAIN_SIM_CAP_GB stops the session with one line before any test runs (pytest exits 4),
    # instead of failing every test, or the report hook, on its own.
    try:
        knobs.check()
    except knobs.KnobError as error:
        raise pytest.UsageError(str(error)) from None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Every failing test, cocotb-backed or not, says how to reproduce its random choices.
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.sections.append(("NearTrain reproduction", knobs.describe()))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    # The runner's one-line reason (module, selection, build folder, knobs) is the report; the
    # traceback through the runner would only bury it.
    try:
        return (yield)
    except SimulationError as failure:
        pytest.fail(str(failure), pytrace=False)
