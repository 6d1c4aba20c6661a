"""The cocotb side of :func:`testbenches.optim.device.run_jobs`: runs the pickled jobs, pickles the results.

Not a test of its own: the jobs come from the file named by ``NEARTRAIN_DEVICE_JOB`` and the
results go to ``results.pickle`` beside it.
"""

import os
import pathlib
import pickle

import cocotb

from testbenches import knobs
from testbenches.harness import component_from_env
from testbenches.optim.device import JOB_ENV, UpdaterDevice
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
