"""The cocotb side of :func:`scripts.sim.updater_device.run_jobs`.

Not a test of its own: ``run_jobs`` passes its jobs through :mod:`scripts.sim.channel`, and
this runs them in order and replies with their results.
"""

import cocotb

from scripts.sim import channel, knobs
from scripts.sim.runner import component_from_env
from scripts.sim.tb import ClockedTB
from scripts.sim.updater_driver import UpdaterDevice


@cocotb.test()
async def run_jobs(dut):
    """Run every job the caller passed, in order."""
    tb = ClockedTB(dut)
    device = UpdaterDevice(dut, component_from_env(), tb.clock, rng=knobs.rng(5))
    await tb.reset()
    results = [await device.run_job(job) for job in channel.job()]
    assert not device.violations, device.violations[:5]
    channel.reply(results)
