"""Shared cocotb checks of the systolic blocks: command validation and reset in the middle of a job.

Every systolic block that takes sizes on ``cmd`` (the arrays and ``tiled_gemm``) must consume a
command whose size is 0 or past its maximum without running it: ``cmd_error`` rises, ``busy``
stays low, nothing leaves on ``c``, and the next good command clears ``cmd_error`` and runs
normally (:func:`reject_then_run`).

Every systolic block with a stream port must survive a reset in the middle of a transfer
(:func:`reset_then_clean`): after it, nothing from before the reset comes out, and a clean job
runs to the golden result, bit for bit, within its cycle bound.
"""

import cocotb
from cocotb.triggers import RisingEdge, with_timeout

from scripts.sim import knobs
from scripts.sim.runner import resolved_params_from_env
from scripts.sim.tb import CLOCK_PERIOD_NS


def size_limits(sizes):
    """``{field: maximum}`` for the command fields ``sizes`` (``{field: parameter name}``) of the
    block under simulation, defaults included."""
    params = resolved_params_from_env()
    return {field: params[name] for field, name in sizes.items()}


def bad_commands(good, limits):
    """Commands that must be rejected: each size of ``good`` set to 0 and to its maximum + 1.

    A maximum + 1 that does not fit the field (its width is that of ``range(maximum + 1)``)
    wraps to 0 on the wire, which is the other rejected value, so it is left out.
    """
    commands = []
    for field, limit in limits.items():
        commands.append({**good, field: 0})
        if (limit + 1).bit_length() == limit.bit_length():
            commands.append({**good, field: limit + 1})
    return commands


async def expect_rejected(tb, source, sink, commands):
    """Send each command on ``source`` and check that it is consumed and rejected."""
    dut = tb.dut
    for command in commands:
        source.send_nowait(command)
        await with_timeout(source.wait_idle(), 1000, "ns")
        await tb.cycles(20)
        context = f"command {command}; {knobs.describe()}"
        assert int(dut.cmd_error.value) == 1, f"cmd_error not raised by {context}"
        assert int(dut.busy.value) == 0, f"busy after {context}"
        assert sink.empty(), f"results after {context}"


async def reject_then_run(tb, source, commands, run_gemm):
    """From reset: every one of ``commands`` is rejected; then ``run_gemm()`` (a good GEMM, which
    checks its own bits and cycles) runs and leaves ``cmd_error`` clear."""
    await tb.reset()
    await expect_rejected(tb, source, tb.c, commands)
    await run_gemm()
    assert int(tb.dut.cmd_error.value) == 0, f"cmd_error still set after a good command; {knobs.describe()}"


class _Abandon:
    """Stands among ``reset_mid_transfer``'s drivers: when reset rises, notes whether the interrupted
    job's task was still running and cancels it (its checks end there; the block forgets the job)."""

    def __init__(self, task):
        self.task = task
        self.running_at_reset = None

    def clear(self):
        if self.running_at_reset is None:
            self.running_at_reset = not self.task.done()
        self.task.cancel()


def _transfers(driver):
    """Items a StreamSource has sent or a StreamSink has received."""
    return driver.sent if hasattr(driver, "sent") else driver.received


async def reset_then_clean(tb, *, interrupted, clean, drivers, sink, watch, window, quiet, salt):
    """Reset ``tb``'s block in the middle of a job under random stalls, then check a clean job.

    Parameters
    ----------
    tb : ClockedTB
        With ``stall(idle, backpressure, salt)`` for its drivers.
    interrupted : coroutine function
        Queues one job on the inputs and checks what comes out, as a clean run would (every item
        that leaves before the reset must still be right); cancelled when reset rises.
    clean : coroutine function
        Runs one job without stalls and checks it: every output against the golden model, no
        extra item (the job's scoreboard), within a cycle bound (``with_timeout``).
    drivers : list
        Every stream source and sink of the block (cleared when reset rises and falls).
    sink : StreamSink
        The output; nothing may arrive on it between the reset and the clean job.
    watch : StreamSource or StreamSink
        Reset 1 .. ``window`` cycles after the job's first transfer on this stream (an input, to
        cut the job while it streams in, or the output, while it streams out). ``window`` must end
        before the job can: with N transfers on ``watch``, at one per cycle, ``N - 2`` does. That
        the reset hit a running job is asserted.
    quiet : int
        Cycles to wait after the reset, longer than anything in flight could take to come out.
    salt : int
        Seeds the reset cycle and the stalls (``knobs.rng``).
    """
    rng = knobs.rng(salt)
    tb.stall(True, True, salt)
    await tb.reset()
    before = _transfers(watch)
    task = cocotb.start_soon(interrupted())

    async def first_transfer():
        while _transfers(watch) == before:
            await RisingEdge(tb.clock)

    await with_timeout(first_transfer(), (100 * quiet + 1000) * CLOCK_PERIOD_NS, "ns")
    abandon = _Abandon(task)
    started = await tb.reset_mid_transfer(rng, after=(1, max(1, window)), drivers=[*drivers, abandon])
    where = f"reset at cycle {started}, window {window}; {knobs.describe()}"
    assert abandon.running_at_reset, f"the job had finished before the reset, which hit nothing: {where}"
    tb.stall(False, False, salt)
    received = sink.received
    await tb.cycles(quiet)
    assert sink.received == received and sink.empty(), (
        f"{sink.received - received} items left the block after the reset, before any new job: {where}")
    for status in ("busy", "cmd_error", "error"):
        if hasattr(tb.dut, status):
            assert int(getattr(tb.dut, status).value) == 0, f"{status} set after the reset: {where}"
    await clean()
