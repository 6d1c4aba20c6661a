"""pytest hooks shared by every NearTrain test."""

import pytest

from scripts.sim import knobs


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Every failing test, cocotb-backed or not, says how to reproduce its random choices.
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.sections.append(("NearTrain reproduction", knobs.describe()))
