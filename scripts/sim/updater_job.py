"""The cocotb side of :func:`scripts.sim.updater_device.run_jobs`.

Not a test of its own: ``run_jobs`` runs the pickled jobs of the file named by
``NEARTRAIN_DEVICE_JOB`` and pickles their results to ``results.pickle`` beside it.
"""

import os
import pathlib
import pickle

import cocotb

from scripts.sim import knobs
from scripts.sim.runner import component_from_env
from scripts.sim.tb import ClockedTB
from scripts.sim.updater_device import JOB_ENV, UpdaterDevice


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
