"""pytest hooks shared by every NearTrain test."""

import pytest

from scripts.sim import knobs
from scripts.sim.runner import SimulationError


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
