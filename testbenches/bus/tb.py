"""What the bus blocks' tests share: the AXI DMA testbench pieces and the generic stream tests.

AXI DMA (``test_axi_burst_reader.py``, ``test_axi_burst_writer.py``; the compress and optim
testbenches use the memory model and monitor too):

* :class:`FaultyAxiRam`, :class:`BurstMonitor`, :func:`random_pauses_all`: from
  :mod:`scripts.sim.axi`, re-exported for the bus benches.
* :class:`DmaTB`: clock, reset, RAM, monitor, command source and ``done`` watcher of a
  reader or writer testbench; :data:`DMA_CONFIGS`: the parameters both engines run with.

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

import logging

import cocotb
import pytest
from cocotb.triggers import RisingEdge, with_timeout
from cocotbext.axi.constants import AxiResp

from golden.bus import random_words, regroup
from golden.bus.bursts import PAGE_BYTES
from scripts.sim import channel, knobs
from scripts.sim.axi import RAM_SIZE, BurstMonitor, FaultyAxiRam, random_pauses_all
from scripts.sim.devices.stream import STREAM_TRANSFERS, StreamTB, stream_order, stream_throughput
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import CLOCK_PERIOD_NS, ClockedTB, Scoreboard

__all__ = ["FaultyAxiRam", "BurstMonitor", "DmaTB", "random_pauses_all", "random_commands", "beat_addresses",
           "address_of", "fault_near", "random_run", "throughput_command", "RESET_ROUNDS",
           "RAM_SIZE", "ADDRESS_BASE", "DMA_CONFIGS", "dma_config_id", "dma_tests",
           "StreamTB", "stream_order_under_stalls", "throughput_without_stalls", "reset_mid_transfer"]

# The RAM model (RAM_SIZE bytes) wraps addresses modulo its size; commands use
# ADDRESS_BASE + offset so that the upper address bits are exercised too.
ADDRESS_BASE = 0x5A5A_0000_0000


def address_of(offset, address_width):
    """The DMA address of RAM ``offset``: ``ADDRESS_BASE`` cut to ``address_width`` bits, plus ``offset``.

    The base stays a multiple of the RAM size, so the RAM model (which wraps addresses)
    sees ``offset`` while the upper address bits of the DUT are exercised.
    """
    return ADDRESS_BASE % (1 << address_width) + offset


def random_commands(rng, count, beat_bytes, *, address_width, max_length=1000, allow_empty=True):
    """``count`` random (address, length) DMA commands inside the RAM model.

    Lengths mix short (1..16), medium (1..200) and long (1..max_length) runs, and one
    command in 32 has length 0 (which the engines must skip) unless ``allow_empty`` is
    false. A quarter of the commands start a few beats before a 4 KB boundary, so that
    their first burst is cut there. Addresses come from :func:`address_of`.
    """
    commands = []
    for _ in range(count):
        length = 1 + int(rng.integers((16, 200, max_length)[int(rng.integers(3))]))
        if allow_empty and rng.random() < 1 / 32:
            length = 0
        span = length * beat_bytes
        if rng.random() < 0.25:
            page = int(rng.integers(1, (RAM_SIZE - span) // PAGE_BYTES))
            offset = page * PAGE_BYTES - int(rng.integers(1, 8)) * beat_bytes
        else:
            offset = int(rng.integers(0, (RAM_SIZE - span) // beat_bytes)) * beat_bytes
        commands.append((address_of(offset, address_width), length))
    return commands


def beat_addresses(commands, beat_bytes):
    """RAM offsets of every beat the commands cover, in stream order."""
    return [address % RAM_SIZE + beat * beat_bytes
            for address, length in commands for beat in range(length)]


def fault_near(rng, commands, beat_bytes, index):
    """A fault range of 1..4 beats inside command ``index``, with a random SLVERR or DECERR."""
    address, length = commands[index]
    first = int(rng.integers(0, max(1, length)))
    start = address % RAM_SIZE + first * beat_bytes
    resp = AxiResp.SLVERR if rng.random() < 0.5 else AxiResp.DECERR
    return (start, start + int(rng.integers(1, 5)) * beat_bytes, resp)


# Random runs: NEARTRAIN_VECTORS commands (24 by default) of up to 1000 beats each.
DEFAULT_COMMANDS = 24
# Cut tests: rounds of (commands, a cut in their middle, clean commands), commands per batch.
RESET_ROUNDS = 16
RESET_COMMANDS = 4
RESET_MIN_BEATS = 300


def random_run(rng, *, faulty):
    """The commands of a random run, and a fault range in the middle command if ``faulty`` (else none)."""
    count = knobs.vectors(DEFAULT_COMMANDS, limit=240)  # commands of up to 1000 beats each
    params = params_from_env()
    beat_bytes = params["data_width"] // 8
    commands = random_commands(rng, count, beat_bytes, address_width=params["address_width"])
    faults = [fault_near(rng, commands, beat_bytes, count // 2)] if faulty else []
    return commands, faults


def throughput_command(params):
    """The one command of a throughput test: NEARTRAIN_VECTORS beats (4096 by default) inside the RAM."""
    offset, beat_bytes = 0x10_0000 + 3 * params["data_width"] // 8, params["data_width"] // 8
    length = knobs.vectors(4096, limit=(RAM_SIZE - offset) // beat_bytes)
    return [(address_of(offset, params["address_width"]), length)], length


class DmaTB(ClockedTB):
    """A reader or writer DUT with its RAM model (random contents), monitor and command source.

    ``stall`` is the probability of a pause on every AXI channel of the model and of an idle
    or backpressure cycle on the DUT's streams (0 for full rate).
    """

    def __init__(self, dut, *, direction, faults=(), stall=0.0):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params_from_env()
        self.direction = direction
        self.beat_bytes = self.params["data_width"] // 8
        self.stall = stall
        self.ram = FaultyAxiRam(dut, "m_axi_", self.clock, dut.rst, faults=faults,
                                in_flight=self.params["max_outstanding"] + 2)
        # The model logs every burst at INFO level; only its warnings are worth the time.
        for interface in (self.ram.read_if, self.ram.write_if):
            interface.log.setLevel(logging.WARNING)
        self.image = bytearray(knobs.rng(1).bytes(RAM_SIZE))
        self.ram.write(0, bytes(self.image))
        if stall:
            self.ram.set_pause_generators(random_pauses_all(knobs.rng(2), stall))
        self.monitor = BurstMonitor(dut, "m_axi", self.clock, direction=direction,
                                    data_width=self.params["data_width"], max_burst=self.params["max_burst"],
                                    max_outstanding=self.params["max_outstanding"])
        self.cmd = StreamSource(dut, "cmd", self.clock, layout=stream_layout(self.component, "cmd"),
                                pause=self.pauses(3))
        self.done_pulses = 0
        self.done_mismatches = []
        cocotb.start_soon(self._watch_done())

    def pauses(self, salt):
        """A stall generator for one of the DUT's streams (never stalls at full rate)."""
        return random_pauses(knobs.rng(salt), self.stall) if self.stall else never()

    def send_commands(self, commands):
        self.cmd.send_many([{"address": address, "length": length} for address, length in commands])

    async def within(self, coroutine, *, beats):
        """Run ``coroutine`` with a time limit generous for ``beats`` beats: a hang fails the test."""
        limit = int(10 * (beats + 200) * (1 + 4 * self.stall))
        return await with_timeout(coroutine, limit * CLOCK_PERIOD_NS, "ns")

    async def finish(self, *sources, beats):
        """Wait for ``sources`` to be drained and ``busy`` to fall; fail on a hang or a missing ``done``."""
        async def settle():
            for source in sources:
                await source.wait_idle()
            await RisingEdge(self.clock)
            while self.dut.busy.value:
                await RisingEdge(self.clock)
        await self.within(settle(), beats=beats)
        assert self.done_pulses, f"busy never fell with a done pulse; {knobs.describe()}"
        assert not self.done_mismatches, f"done pulses wrong at cycles {self.done_mismatches[:5]}; " \
            f"{knobs.describe()}"

    async def _watch_done(self):
        # `done` must pulse exactly in the cycle in which `busy` is low again, and only then.
        busy_before = False
        while True:
            await RisingEdge(self.clock)
            if self.dut.rst.value:
                busy_before = False
                continue
            busy, done = bool(self.dut.busy.value), bool(self.dut.done.value)
            if done != (busy_before and not busy):
                self.done_mismatches.append(self.cycle)
            self.done_pulses += done
            busy_before = busy

    def check_bus(self):
        assert not self.monitor.violations, f"{self.monitor.violations[:5]}; {knobs.describe()}"
        assert self.monitor.outstanding == 0, (
            f"{self.monitor.outstanding} bursts never answered; {knobs.describe()}")
        if self.stall:
            # A stalling memory lets requests pile up: the outstanding limit must be reached.
            assert self.monitor.peak_outstanding == self.params["max_outstanding"], (
                f"at most {self.monitor.peak_outstanding} bursts in flight, the limit "
                f"{self.params['max_outstanding']} never reached; {knobs.describe()}")

    def check_idle(self):
        """The manager port is idle: no request or data offered by the DUT or the memory, nothing owed."""
        axi = "m_axi__"
        held = [name for name in ("arvalid", "awvalid", "wvalid", "rvalid", "bvalid")
                if getattr(self.dut, axi + name).value]
        assert not held, f"{', '.join(held)} high on an idle bus; {knobs.describe()}"
        assert self.monitor.outstanding == 0, (
            f"{self.monitor.outstanding} bursts still open on an idle bus; {knobs.describe()}")
        assert not self.dut.busy.value, f"busy high on an idle bus; {knobs.describe()}"

    def check_error(self, expected):
        """``expected`` is None (no error) or the AXI response code the DUT must report."""
        error, resp = int(self.dut.error.value), int(self.dut.error_resp.value)
        want = (0, 0) if expected is None else (1, int(expected))
        assert (error, resp) == want, (f"error={error} error_resp={resp}, expected {want}; "
                                       f"{knobs.describe()}")

    def cut_batch(self, rng):
        """Commands for one round of a cut test: long enough that a burst is still open 120 cycles in."""
        while True:
            commands = random_commands(rng, RESET_COMMANDS, self.beat_bytes,
                                       address_width=self.params["address_width"], max_length=200,
                                       allow_empty=False)
            if sum(length for _, length in commands) >= RESET_MIN_BEATS:
                return commands

    async def cut(self, rng, *, bursts, cancel, drivers):
        """Once the first burst past ``bursts`` is issued, cut the transfer while a burst is open.

        With ``cancel`` the memory runs on and the DUT must drain within a cycle bound; else a
        reset shared with the memory (one AXI reset domain) cuts the bursts on both sides.
        """
        await self.wait_until(lambda: len(self.monitor.bursts) > bursts, cycles=200,
                              what="the first " + ("AR" if self.direction == "read" else "AW"))

        def burst_open():
            return self.monitor.outstanding > 0

        if cancel:
            # The memory is not reset: the monitor keeps counting the bursts the drain closes.
            await self.reset_mid_transfer(rng, after=(0, 60), until=burst_open, drivers=drivers,
                                          signal=self.dut.cancel)
            in_flight = self.params["max_outstanding"] * self.params["max_burst"]
            await self.wait_until(lambda: not self.dut.busy.value, cycles=int(10 * (in_flight + 200) * 2.2),
                                  what="the drain after cancel")
        else:
            # The memory shares the reset and drops its bursts too.
            await self.reset_mid_transfer(rng, after=(0, 60), until=burst_open,
                                          drivers=[*drivers, self.monitor])

    def reply_throughput(self, beats, cycles, command_to_done):
        """Log the throughput result and send it to the benchmark (``bench_axi.py``)."""
        result = {"beats": beats, "cycles": cycles, "beats_per_cycle": beats / cycles,
                  "command_to_done_cycles": command_to_done,
                  "peak_outstanding": self.monitor.peak_outstanding}
        self.dut._log.info("throughput: %s", result)
        channel.reply(result)

    def bursts_after_first_error(self):
        """Bursts the DUT started after the cycle of the first failing response."""
        failing = [cycle for cycle, resp in self.monitor.responses if resp & 2]
        return [burst for burst in self.monitor.bursts if failing and burst[0] > failing[0]]


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
