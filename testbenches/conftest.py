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


# The fast suite's longest tests (each a Verilator build of a composed design and minutes of CPU),
# started first: pytest-xdist hands tests out in collection order, so a long one collected late
# ran alone at the end of `make test` while the other core idled. A scheduling hint only: a test
# missing from it still runs, just in its collected place. test_demo_allreduce shares test_gcu's
# 3-leaf build; both are in one xdist group (one worker), see their modules.
LONGEST_FIRST = (
    "testbenches/runtime/test_cluster.py::test_deadlock_flood[",
    "testbenches/optim/test_updater_kernel.py::test_stalled_elements",
    "testbenches/collective/test_gcu.py::test_gcu[",
    "testbenches/optim/test_updater_kernel.py::test_updater_kernel[",
    "testbenches/collective/test_reduction_unit.py::test_reduction_unit[",
    "testbenches/dlrm/test_embedding_bag.py",
    "testbenches/compress/test_axi_decompressor.py",
)


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        for index, prefix in enumerate(LONGEST_FIRST):
            if item.nodeid.startswith(prefix):
                return index
        return len(LONGEST_FIRST)
    items.sort(key=rank)  # stable: every other test keeps its collected order
