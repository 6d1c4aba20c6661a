"""Shared cocotb checks of the systolic blocks: command validation and reset in the middle of a job.

Every systolic block that takes sizes on ``cmd`` (the arrays and ``tiled_gemm``) must consume a
command whose size is 0 or past its maximum without running it: ``cmd_error`` rises, ``busy``
stays low, nothing leaves on ``c``, and the next good command clears ``cmd_error`` and runs
normally (:func:`reject_then_run`).

Every systolic block with a stream port must survive a reset in the middle of a transfer
(:func:`reset_then_clean`): after it, nothing from before the reset comes out, and a clean job
runs to the golden result, bit for bit, within its cycle bound. The array and codec tests mostly
reach it through :func:`reset_mid_os_job` (output-stationary arrays), :func:`reset_mid_ws_job`
(weight-stationary arrays) and :func:`reset_mid_blocks` (block floating point encoder, decoder).
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


async def reset_mid_os_job(tb, when, run_gemm, operands, k_size):
    """Reset at a random cycle while a GEMM of four tiles (K = ``k_size``) streams in (or its rows
    stream out) under random stalls; then nothing comes out and a clean GEMM is exact in bits and
    cycles. ``run_gemm(a, b, d, exact_cycles=)`` and ``operands(rng, shape)`` are the bench's."""
    salt = 500 + (when == "outputs")
    rng = knobs.rng(salt + 10)
    tile_m = tb.rows * tb.slots
    shape = (2 * tile_m, k_size, 2 * tb.cols)
    interrupted = operands(rng, shape)
    clean = operands(rng, (tile_m + 1, k_size - 1, tb.cols + 1))
    # Four tiles, each at least K T transfers on a and T rows out, at most one per cycle.
    watch, transfers = (tb.a, 4 * k_size * tb.slots) if when == "inputs" else (tb.c, 4 * tile_m)
    await reset_then_clean(
        tb, interrupted=lambda: run_gemm(*interrupted, exact_cycles=False),
        clean=lambda: run_gemm(*clean, exact_cycles=True), drivers=tb.drivers, sink=tb.c, watch=watch,
        window=transfers - 2, quiet=tb.model_cycles(*shape) + 20, salt=salt)


def bad_ws_commands():
    """Every bad size of a weight-stationary array's command."""
    return bad_commands({"m": 1, "k": 1, "n_tiles": 1},
                        size_limits({"m": "max_m", "k": "max_k", "n_tiles": "max_tiles"}))


async def reset_mid_ws_job(tb, when, run_gemm, operands):
    """Reset at a random cycle while a GEMM of several k-tiles and n-tiles streams in (or its rows
    stream out) under random stalls; then nothing comes out and a clean GEMM is exact in bits and
    cycles. ``run_gemm(a, b, d, exact_cycles=)`` and ``operands(rng, shape)`` are the bench's."""
    salt = 500 + (when == "outputs")
    rng = knobs.rng(salt + 10)
    m_size, k_size, n_size = 5, 2 * tb.rows + 1, 2 * tb.cols
    interrupted = operands(rng, (m_size, k_size, n_size))
    clean = operands(rng, (3, tb.rows + 1, tb.cols + 1))
    # 3 k-tiles x 2 n-tiles: M rows of A per tile in, M rows of C per n-tile out.
    watch, transfers = (tb.sources["a"], 6 * m_size) if when == "inputs" else (tb.c, 2 * m_size)
    await reset_then_clean(
        tb, interrupted=lambda: run_gemm(*interrupted, exact_cycles=False),
        clean=lambda: run_gemm(*clean, exact_cycles=True), drivers=tb.drivers, sink=tb.c, watch=watch,
        window=transfers - 2, quiet=tb.model_cycles(m_size, k_size, n_size) + 20, salt=salt)


async def reset_mid_blocks(tb, when, run, count=64):
    """Reset at a random cycle after the first of ``count`` blocks goes in (or comes out) under random
    stalls, then check a clean stream; ``run(rng, count)`` streams and checks ``count`` blocks."""
    salt = 500 + (when == "outputs")
    rng = knobs.rng(salt + 10)
    await reset_then_clean(
        tb, interrupted=lambda: run(rng, count), clean=lambda: run(rng, count), drivers=[tb.source, tb.sink],
        sink=tb.sink, watch=tb.source if when == "inputs" else tb.sink, window=count - 2, quiet=20, salt=salt)
