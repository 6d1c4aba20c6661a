"""cocotb tests of :class:`rtl.bus.AXIBurstReader` against cocotbext-axi's RAM model, and their runner.

Random command sequences (4 KB-unaligned addresses, 1..1000 beats) are read with random
pauses on every AXI channel, command gaps and output backpressure. Every output beat is
compared with the RAM contents, the ``last`` flags with the command ends, and every AR
burst is checked by :class:`BurstMonitor` (INCR, <= max_burst, no 4 KB crossing, at most
max_outstanding in flight, R never stalled). Error injection makes a range of the RAM
answer SLVERR or DECERR and checks the sticky error, zero data from the failing beat on,
intact data before it, no AR after the error beyond the one already registered, and a
clean finish with a done pulse. Reset (shared with the RAM) and ``cancel`` (the RAM running
on) cut random transfers with a burst open; the next commands must read right.

The pytest runner (at the bottom) runs every test at the parameters of
:data:`testbenches.bus.tb.DMA_CONFIGS`; the testbench pieces shared with the other
engine are in :mod:`testbenches.bus.tb`.
"""


import cocotb
import pytest

from scripts.sim import knobs
from scripts.sim.devices.bus import ReaderTB, reader_throughput
from scripts.sim.runner import params_from_env, run_cocotb
from scripts.sim.tb import Scoreboard

from .tb import (
    DMA_CONFIGS,
    RESET_ROUNDS,
    beat_addresses,
    dma_config_id,
    dma_tests,
    fault_near,
    random_commands,
    random_run,
)


async def run_reads(dut, *, stall, faulty=False, salt=0):
    """Random commands, every beat checked against the RAM; with ``faulty``, data before the failing
    beat intact, zero from it on, and no AR after the error beyond the one already registered."""
    commands, faults = random_run(knobs.rng(10 + salt), faulty=faulty)
    tb = ReaderTB(dut, faults=faults, stall=stall)
    await tb.reset()

    fault_start, resp = None, None
    for index, offset in enumerate(beat_addresses(commands, tb.beat_bytes)):
        resp = tb.ram.fault_at(offset, tb.beat_bytes)
        if resp is not None:
            fault_start = index
            break
    expected = tb.expected_beats(commands, fault_start)
    scoreboard = Scoreboard("axi_burst_reader data")
    scoreboard.expect_many(expected)
    tb.send_commands(commands)

    async def drain():
        for _ in expected:
            scoreboard.check(await tb.sink.recv())
    await tb.within(drain(), beats=len(expected))
    await tb.finish(tb.cmd, beats=len(expected))
    await tb.check_end(scoreboard, resp)
    if faulty:
        late = tb.bursts_after_first_error()
        assert len(late) <= 1, f"AR bursts after the error: {late}; {knobs.describe()}"
    dut._log.info("reads: %d commands, %d beats, %d bursts, peak %d in flight, %d cycles",
                  len(commands), len(expected), len(tb.monitor.bursts), tb.monitor.peak_outstanding, tb.cycle)
    return tb


@cocotb.test()
async def error_clears_when_idle(dut):
    """After an error, ``clear`` while idle lets the next command read real data again."""
    rng = knobs.rng(40)
    params = params_from_env()
    beat_bytes = params["data_width"] // 8
    commands = random_commands(rng, 2, beat_bytes, address_width=params["address_width"], max_length=64,
                               allow_empty=False)
    tb = ReaderTB(dut, faults=[fault_near(rng, commands, beat_bytes, 0)])
    await tb.reset()
    tb.send_commands(commands[:1])
    await tb.finish(tb.cmd, beats=commands[0][1])
    assert int(tb.dut.error.value) == 1
    tb.dut.clear.value = 1
    await tb.cycles(1)
    tb.dut.clear.value = 0
    await tb.cycles(1)
    tb.check_error(None)
    while not tb.sink.empty():
        tb.sink.queue.popleft()
    tb.ram.faults.clear()
    scoreboard = Scoreboard("axi_burst_reader data after clear")
    scoreboard.expect_many(tb.expected_beats(commands[1:]))
    tb.send_commands(commands[1:])
    for _ in range(commands[1][1]):
        scoreboard.check(await tb.sink.recv())
    await tb.finish(tb.cmd, beats=commands[1][1])
    tb.check_error(None)


@cocotb.test()
async def throughput_without_stalls(dut):
    """Beats per cycle on ``data`` with memory and consumer never stalling.

    The session :func:`scripts.sim.devices.bus.reader_throughput` that ``bench_axi`` runs, on the default
    NEARTRAIN_VECTORS beats (4096 by default): every beat checked as in the stalled tests.
    """
    await reader_throughput(dut, {"beats": knobs.vectors(4096)})


async def cut_then_clean(dut, *, cancel):
    """Rounds of: random commands under stalls, a cut (reset or ``cancel``) with a burst open, clean commands.

    After a cancel nothing more leaves on ``data``; the R beats still owed are taken and dropped.
    After the cut the bus must be idle (no valid high, no burst open, ``busy`` low): at
    once after a reset, within a cycle bound after a cancel (the drain). Then new random
    commands must deliver exactly their RAM contents (nothing from before the cut, nothing
    lost) and end with ``done``, within a cycle bound.
    """
    rng = knobs.rng(61 if cancel else 60)
    tb = ReaderTB(dut, stall=0.3)
    dut.cancel.value = 0
    await tb.reset()
    what = "cancel" if cancel else "reset"
    scoreboard = Scoreboard(f"axi_burst_reader data after {what}")

    for _ in range(RESET_ROUNDS):
        before = tb.cut_batch(rng)
        bursts, received = len(tb.monitor.bursts), tb.sink.received
        tb.send_commands(before)
        await tb.cut(rng, bursts=bursts, cancel=cancel, drivers=[tb.cmd, tb.sink])
        total = sum(length for _, length in before)
        assert tb.sink.received - received < total, (
            f"{what} after the transfer: all {total} beats delivered; {knobs.describe()}")
        tb.check_idle()
        commands = tb.cut_batch(rng)
        beats = sum(length for _, length in commands)
        scoreboard.expect_many(tb.expected_beats(commands))
        tb.send_commands(commands)
        await tb.expect_from(tb.sink, scoreboard, cycles=int(10 * (beats + 200) * 2.2))
        await tb.finish(tb.cmd, beats=beats)
        assert not tb.monitor.violations, f"{tb.monitor.violations[:5]}; {knobs.describe()}"
        tb.check_idle()
        tb.check_error(None)


# The engines' common tests: reads_at_full_rate, reads_under_stalls, reads_with_error,
# reset_mid_transfer and cancel_mid_transfer.
globals().update(dma_tests("reads", run_reads, cut_then_clean))


# ---------------------------------------------------------------- pytest runner

MODULE = __name__


@pytest.mark.parametrize("params", DMA_CONFIGS, ids=dma_config_id)
def test_axi_burst_reader(params):
    run_cocotb("axi_burst_reader", MODULE, params=params)
