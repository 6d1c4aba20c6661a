"""The cocotb side of ``run_jobs`` and ``run_session`` in :mod:`testbenches.optim.device`.

Not tests of their own: ``run_jobs`` runs the pickled jobs of the file named by
``NEARTRAIN_DEVICE_JOB``; ``run_session`` awaits the function named in the file given by
``NEARTRAIN_DEVICE_SESSION`` with an :class:`~testbenches.optim.device.UpdaterDevice`. Either
pickles its results to ``results.pickle`` beside its input file. The runner selects one of them
by name (``run_session`` is skipped when its file is not given).
"""

import importlib
import os
import pathlib
import pickle

import cocotb

from testbenches import knobs
from testbenches.harness import component_from_env
from testbenches.optim.device import JOB_ENV, SESSION_ENV, UpdaterDevice
from testbenches.tb import ClockedTB


@cocotb.test()
async def run_jobs(dut):
    """Run every job of the job file on the kernel, in order."""
    job_file = pathlib.Path(os.environ[JOB_ENV])
    jobs = pickle.loads(job_file.read_bytes())
    tb = ClockedTB(dut)
    device = UpdaterDevice(dut, component_from_env(), tb.clock, rng=knobs.rng(5))
    await tb.reset()
    results = [await device.run_job(job) for job in jobs]
    assert not device.violations, device.violations[:5]
    (job_file.parent / "results.pickle").write_bytes(pickle.dumps(results))


@cocotb.test(skip=SESSION_ENV not in os.environ)
async def run_session(dut):
    """Await ``function(device, payload)`` from the session file; pickle its return value."""
    session_file = pathlib.Path(os.environ[SESSION_ENV])
    request = pickle.loads(session_file.read_bytes())
    module_name, _, qualname = request["function"].partition(":")
    function = importlib.import_module(module_name)
    for part in qualname.split("."):
        function = getattr(function, part)
    tb = ClockedTB(dut)
    device = UpdaterDevice(dut, component_from_env(), tb.clock, rng=knobs.rng(5))
    await tb.reset()
    result = await function(device, request["payload"])
    assert not device.violations, device.violations[:5]
    (session_file.parent / "results.pickle").write_bytes(pickle.dumps(result))
