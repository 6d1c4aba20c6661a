"""The one cocotb module of the host devices: run the job's named session.

:func:`scripts.sim.devices.run_session` passes ``{"session": name, "job": job}`` through
:mod:`scripts.sim.channel`; the test below looks the name up in :data:`SESSIONS` (each device
module's ``SESSIONS``, prefixed with the module's name), awaits ``session(dut, job)`` and
replies with what it returned. Not a test of its own, and never collected by pytest.
"""

import cocotb

from scripts.sim import channel
from scripts.sim.devices import (
    aggregate,
    bus,
    collective,
    compress,
    compress_dram,
    dlrm,
    dlrm_bag,
    fp,
    runtime,
    runtime_gcn,
    runtime_sessions,
    smartssd,
    stream,
    topk,
    updater,
)

__all__ = ["SESSIONS"]

SESSIONS = {f"{module.__name__.rsplit('.', 1)[-1]}.{name}": function
            for module in (aggregate, bus, collective, compress, compress_dram, dlrm, dlrm_bag, fp, runtime,
                           runtime_gcn, runtime_sessions, smartssd, stream, topk, updater)
            for name, function in module.SESSIONS.items()}


@cocotb.test()
async def session(dut):
    """Run the caller's session on ``dut``; reply with its result."""
    request = channel.job()
    try:
        function = SESSIONS[request["session"]]
    except KeyError:
        raise ValueError(f"no session {request['session']!r}; "
                         f"the sessions are {', '.join(SESSIONS)}") from None
    channel.reply(await function(dut, request["job"]))
