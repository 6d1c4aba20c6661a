"""What the bus blocks' tests share: the AXI DMA testbench pieces and the generic stream tests.

AXI DMA (``test_axi_burst_reader.py``, ``test_axi_burst_writer.py``; the compress and optim
testbenches use the memory model and monitor too):

* :class:`FaultyAxiRam`, :class:`BurstMonitor`, :func:`random_pauses_all`: from
  :mod:`scripts.sim.axi`, re-exported for the bus benches.
* :class:`DmaTB` (clock, reset, RAM, monitor, command source and ``done`` watcher of a
  reader or writer testbench) and the engines' testbenches and throughput sessions: from the
  host device :mod:`scripts.sim.devices.bus`; :data:`DMA_CONFIGS`: the parameters both engines
  run with.

Stream blocks (``test_skid_buffer.py``, ``test_stream_fifo.py``, ``test_width_converter.py``),
driven by the host device :mod:`scripts.sim.devices.stream`: a stream in on ``i``, the
regrouped stream out on ``o``. The golden model is
:func:`golden.bus.regroup` (the identity for the skid buffer and the FIFO). The cocotb tests
:func:`stream_order_under_stalls`, :func:`throughput_without_stalls` and
:func:`reset_mid_transfer` push random payloads through (NEARTRAIN_VECTORS, 30,000 by default,
per stall pattern: at full rate, with random idle cycles on ``valid``, with random backpressure
on ``ready``, and with both; then reset mid-stream) and check that the output equals the
input, nothing lost, duplicated or reordered; each block's test file imports them by name
(cocotb runs the tests in a module's namespace).
"""

import cocotb
import pytest
from cocotbext.axi.constants import AxiResp

from golden.bus import random_words, regroup
from scripts.sim import channel, knobs
from scripts.sim.axi import RAM_SIZE, BurstMonitor, FaultyAxiRam, random_pauses_all
from scripts.sim.devices.bus import (
    ADDRESS_BASE,
    DmaTB,
    ReaderTB,
    WriterTB,
    address_of,
    beat_addresses,
    random_commands,
)
from scripts.sim.devices.stream import STREAM_TRANSFERS, StreamTB, stream_order, stream_throughput
from scripts.sim.runner import params_from_env
from scripts.sim.stream import random_pauses
from scripts.sim.tb import Scoreboard

__all__ = ["FaultyAxiRam", "BurstMonitor", "DmaTB", "ReaderTB", "WriterTB", "random_pauses_all",
           "random_commands", "beat_addresses", "address_of", "fault_near", "random_run", "RESET_ROUNDS",
           "RAM_SIZE", "ADDRESS_BASE", "DMA_CONFIGS", "dma_config_id", "dma_tests",
           "StreamTB", "stream_order_under_stalls", "throughput_without_stalls", "reset_mid_transfer"]


def fault_near(rng, commands, beat_bytes, index):
    """A fault range of 1..4 beats inside command ``index``, with a random SLVERR or DECERR."""
    address, length = commands[index]
    first = int(rng.integers(0, max(1, length)))
    start = address % RAM_SIZE + first * beat_bytes
    resp = AxiResp.SLVERR if rng.random() < 0.5 else AxiResp.DECERR
    return (start, start + int(rng.integers(1, 5)) * beat_bytes, resp)


# Random runs: NEARTRAIN_VECTORS commands (24 by default) of up to 1000 beats each.
DEFAULT_COMMANDS = 24
# Cut tests: rounds of (commands, a cut in their middle, clean commands).
RESET_ROUNDS = 16


def random_run(rng, *, faulty):
    """The commands of a random run, and a fault range in the middle command if ``faulty`` (else none)."""
    count = knobs.vectors(DEFAULT_COMMANDS, limit=240)  # commands of up to 1000 beats each
    params = params_from_env()
    beat_bytes = params["data_width"] // 8
    commands = random_commands(rng, count, beat_bytes, address_width=params["address_width"])
    faults = [fault_near(rng, commands, beat_bytes, count // 2)] if faulty else []
    return commands, faults


# ---------------------------------------------------------------- AXI DMA engines' runner parameters

# Each engine at 64 and 512 bits with short bursts and a small outstanding limit (so that the
# limits and the 4 KB cuts are hit often); the slow runs use the Vitis-like configuration and
# the longest bursts.
DMA_CONFIGS = [
    {"data_width": 64, "max_burst": 16, "max_outstanding": 2},
    {"data_width": 512, "max_burst": 8, "max_outstanding": 3},
    pytest.param({"data_width": 512, "max_burst": 64, "max_outstanding": 8}, marks=pytest.mark.slow),
    pytest.param({"data_width": 64, "max_burst": 256, "max_outstanding": 4}, marks=pytest.mark.slow),
    pytest.param({"data_width": 32, "max_burst": 1, "max_outstanding": 2, "address_width": 32},
                 marks=pytest.mark.slow),
]


def dma_config_id(params):
    return "-".join(f"{k}{v}" for k, v in params.items())


def dma_tests(verb, run, cut_then_clean):
    """The cocotb tests both DMA engines run, as a dict for the engine's test module's ``globals()``.

    ``{verb}_at_full_rate``, ``{verb}_under_stalls`` and ``{verb}_with_error`` (at both stall
    rates) call ``run(dut, *, stall, faulty=False, salt=0)``, which sends random commands and
    checks everything the engine's module docstring lists; ``reset_mid_transfer`` and
    ``cancel_mid_transfer`` call ``cut_then_clean(dut, *, cancel)``. cocotb runs the tests in
    that module's namespace, under these names.
    """
    @cocotb.test(name=f"{verb}_at_full_rate")
    async def at_full_rate(dut):
        """Random commands, no pauses anywhere."""
        await run(dut, stall=0.0)

    @cocotb.test(name=f"{verb}_under_stalls")
    async def under_stalls(dut):
        """Random commands with 30% pauses on every AXI channel, on the commands and on the data stream."""
        await run(dut, stall=0.3, salt=1)

    @cocotb.test(name=f"{verb}_with_error")
    @cocotb.parametrize(stall=[0.0, 0.3])
    async def with_error(dut, stall):
        """An SLVERR or DECERR range in the middle command: sticky error and a clean end."""
        await run(dut, stall=stall, faulty=True, salt=2 + int(stall * 10))

    @cocotb.test(name="reset_mid_transfer")
    async def reset_mid_transfer(dut):
        """Reset shared with the memory, at a random cycle with a burst open; then clean commands.

        The RAM model takes the DUT's ``rst`` (one AXI reset domain, as AXI requires), so the
        reset cuts the bursts on both sides.
        """
        await cut_then_clean(dut, cancel=False)

    @cocotb.test(name="cancel_mid_transfer")
    async def cancel_mid_transfer(dut):
        """``cancel`` at a random cycle with a burst open, the memory running on: the drain closes it."""
        await cut_then_clean(dut, cancel=True)

    tests = [at_full_rate, under_stalls, with_error, reset_mid_transfer, cancel_mid_transfer]
    return {test.name: test for test in tests}


# ---------------------------------------------------------------- generic stream tests (stream blocks)

# Reset test: rounds of (traffic, reset in its middle, clean stream), narrow-side transfers per stream.
STREAM_RESET_ROUNDS = 25
STREAM_RESET_TRANSFERS = 200


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def stream_order_under_stalls(dut, idle, backpressure):
    """Random data with optional random valid gaps and ready backpressure."""
    await stream_order(StreamTB(dut), idle=idle, backpressure=backpressure, salt=2 * idle + backpressure,
                       count=knobs.vectors(STREAM_TRANSFERS))


@cocotb.test()
async def throughput_without_stalls(dut):
    """Counts cycles for a stream with neither side stalling (the benchmark reads the result).

    What came out must be the regrouped input, in order, nothing missing and nothing extra, as
    in the stall tests: a rate measured on wrong data would be no rate at all.
    """
    result = await stream_throughput(StreamTB(dut), knobs.vectors(4096))
    dut._log.info("throughput: %s", result)
    channel.reply(result)


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset at a random cycle of a stream under random stalls; the next stream equals the golden, alone.

    Each round sends random words with random valid gaps and backpressure, raises reset at a
    random cycle while they flow (0..60 cycles after the first word went in, and before the
    last), then sends new random words: the output must be exactly their regrouped stream
    (nothing from before the reset, nothing lost), within a cycle bound.
    """
    tb = StreamTB(dut)
    rng = knobs.rng(300)
    tb.set_idle_generator(random_pauses(knobs.rng(301), 0.4))
    tb.set_backpressure_generator(random_pauses(knobs.rng(302), 0.4))
    await tb.reset()
    narrow = min(tb.input_width, tb.output_width)
    words_for = max(1, STREAM_RESET_TRANSFERS * narrow // tb.input_width)
    scoreboard = Scoreboard(f"{channel.block()} o after reset")
    for _ in range(STREAM_RESET_ROUNDS):
        before = random_words(rng, words_for, tb.input_width)
        sent = tb.source.sent
        tb.source.send_many(before)
        await tb.wait_until(lambda sent=sent: tb.source.sent > sent, cycles=100, what="the first word")
        await tb.reset_mid_transfer(rng, after=(0, 60), drivers=[tb.source, tb.sink])
        assert tb.source.sent - sent < len(before), (
            f"reset after the stream: all {len(before)} words were sent; {knobs.describe()}")
        words = random_words(rng, words_for, tb.input_width)
        expected = regroup(words, input_width=tb.input_width, output_width=tb.output_width,
                           element_width=tb.element_width())
        scoreboard.expect_many(expected)
        tb.source.send_many(words)
        await tb.expect_from(tb.sink, scoreboard, cycles=20 * (max(len(words), len(expected)) + 100))
