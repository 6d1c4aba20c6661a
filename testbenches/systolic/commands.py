"""Shared cocotb check of the systolic blocks' command validation (``cmd_error``).

Every systolic block that takes sizes on ``cmd`` (the arrays and ``tiled_gemm``) must consume a
command whose size is 0 or past its maximum without running it: ``cmd_error`` rises, ``busy``
stays low, nothing leaves on ``c``, and the next good command clears ``cmd_error`` and runs
normally.
"""

from cocotb.triggers import with_timeout

from testbenches import knobs
from testbenches.harness import resolved_params_from_env


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
