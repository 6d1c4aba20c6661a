"""Host device of the AXI4 DMA engines (``axi_burst_reader``, ``axi_burst_writer``): testbench and throughput.

:class:`DmaTB` is a reader's or writer's clock, reset, RAM model (random contents), burst
monitor, command source and ``done`` watcher; :class:`ReaderTB` adds the ``data`` sink and
the beats the RAM must deliver, :class:`WriterTB` the ``data`` source, the W beats counted
and the image the RAM must hold. The sessions ``bus.reader_throughput`` and
``bus.writer_throughput`` (:func:`reader_throughput`, :func:`writer_throughput`) count cycles of
one long command with nothing stalling, every beat checked; :func:`run_throughput` runs one in a
simulation (``bench_axi``; the engines' tests ``throughput_without_stalls`` await the same
sessions). The engines' other tests and their shared pieces are in ``testbenches/bus/``.
"""

import logging

import cocotb
from cocotb.triggers import RisingEdge, with_timeout

from golden.bus import random_words
from golden.bus.bursts import PAGE_BYTES
from scripts.sim import knobs
from scripts.sim.axi import RAM_SIZE, BurstMonitor, FaultyAxiRam, random_pauses_all
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import CLOCK_PERIOD_NS, ClockedTB, Scoreboard

__all__ = ["ADDRESS_BASE", "address_of", "random_commands", "beat_addresses", "RESET_COMMANDS",
           "RESET_MIN_BEATS", "throughput_command", "DmaTB", "ReaderTB", "WriterTB", "reader_throughput",
           "writer_throughput", "SESSIONS", "run_throughput"]

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


# Cut tests: commands per batch, and the fewest beats a batch may have.
RESET_COMMANDS = 4
RESET_MIN_BEATS = 300


def throughput_command(params, beats):
    """The one command of a throughput session: ``beats`` beats, as many as fit the RAM at most."""
    offset, beat_bytes = 0x10_0000 + 3 * params["data_width"] // 8, params["data_width"] // 8
    length = min(beats, (RAM_SIZE - offset) // beat_bytes)
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

    def throughput_result(self, beats, cycles, command_to_done):
        """Log and return the result of a throughput session (what ``bench_axi.py`` tabulates)."""
        result = {"beats": beats, "cycles": cycles, "beats_per_cycle": beats / cycles,
                  "command_to_done_cycles": command_to_done,
                  "peak_outstanding": self.monitor.peak_outstanding}
        self.dut._log.info("throughput: %s", result)
        return result

    def bursts_after_first_error(self):
        """Bursts the DUT started after the cycle of the first failing response."""
        failing = [cycle for cycle, resp in self.monitor.responses if resp & 2]
        return [burst for burst in self.monitor.bursts if failing and burst[0] > failing[0]]


class ReaderTB(DmaTB):
    """An ``axi_burst_reader`` in :class:`DmaTB`, with its ``data`` sink."""

    def __init__(self, dut, **kwargs):
        super().__init__(dut, direction="read", **kwargs)
        self.sink = StreamSink(dut, "data", self.clock, layout=stream_layout(self.component, "data"),
                               backpressure=self.pauses(4))

    def expected_beats(self, commands, fault_start=None):
        """The beats the reader must deliver: RAM contents, zero from beat ``fault_start`` on."""
        offsets = beat_addresses(commands, self.beat_bytes)
        lasts = {sum(length for _, length in commands[:i + 1]) - 1 for i in range(len(commands))}
        beats = []
        for index, offset in enumerate(offsets):
            word = int.from_bytes(self.image[offset:offset + self.beat_bytes], "little")
            if fault_start is not None and index >= fault_start:
                word = 0
            beats.append({"data": word, "last": int(index in lasts)})
        return beats

    async def check_end(self, scoreboard, resp):
        """Ten cycles after ``done``: no beat beyond the expected ones (a duplicate fails), none
        missing, the bursts within the AXI rules, and the error state ``resp`` (None: no error)."""
        await self.cycles(10)
        while not self.sink.empty():
            scoreboard.check(self.sink.queue.popleft())
        scoreboard.check_complete()
        self.check_bus()
        self.check_error(resp)


class WriterTB(DmaTB):
    """An ``axi_burst_writer`` in :class:`DmaTB`, with its ``data`` source and the W beats counted."""

    def __init__(self, dut, **kwargs):
        super().__init__(dut, direction="write", **kwargs)
        self.source = StreamSource(dut, "data", self.clock, pause=self.pauses(5))
        self.w_beats = []  # cycle of every W transfer
        self.w_strobes = []  # wstrb of every W transfer
        cocotb.start_soon(self._count_w())

    async def _count_w(self):
        wvalid, wready, wstrb = self.dut.m_axi__wvalid, self.dut.m_axi__wready, self.dut.m_axi__wstrb
        while True:
            await RisingEdge(self.clock)
            if wvalid.value and wready.value:
                self.w_beats.append(self.cycle)
                self.w_strobes.append(int(wstrb.value))

    def expected_image(self, offsets, words, written):
        """The initial image with beats ``[0, written)`` applied, except the ones the RAM refused."""
        image = bytearray(self.image)
        for offset, word in zip(offsets[:written], words[:written], strict=True):
            if self.ram.fault_at(offset, self.beat_bytes) is None:
                image[offset:offset + self.beat_bytes] = word.to_bytes(self.beat_bytes, "little")
        return image

    def check_memory(self, expected):
        actual = self.ram.read(0, RAM_SIZE)
        if actual != bytes(expected):
            first = next(i for i in range(RAM_SIZE) if actual[i] != expected[i])
            raise AssertionError(f"RAM differs first at offset {first:#x}: {actual[first:first + 8].hex()} "
                                 f"instead of {bytes(expected[first:first + 8]).hex()}; {knobs.describe()}")


async def reader_throughput(dut, job):
    """Beats per cycle on ``data`` with memory and consumer never stalling , ``job["beats"]`` beats.

    Every beat must still be the RAM's contents with ``last`` on the final one, nothing more, and
    the bursts must keep the AXI rules (:meth:`DmaTB.check_bus`), as in the stalled tests.
    """
    commands, length = throughput_command(params_from_env(), job["beats"])
    tb = ReaderTB(dut)
    await tb.reset()
    scoreboard = Scoreboard("axi_burst_reader data (throughput)")
    scoreboard.expect_many(tb.expected_beats(commands))
    start = tb.cycle
    tb.send_commands(commands)

    async def drain():
        scoreboard.check(await tb.sink.recv())
        first = tb.cycle
        for _ in range(length - 1):
            scoreboard.check(await tb.sink.recv())
        return first

    first = await tb.within(drain(), beats=length)
    cycles = tb.cycle - first + 1
    await tb.finish(tb.cmd, beats=length)
    command_to_done = tb.cycle - start
    await tb.check_end(scoreboard, None)
    return tb.throughput_result(length, cycles, command_to_done)


async def writer_throughput(dut, job):
    """W beats per cycle with producer and memory never stalling, ``job["beats"]`` beats.

    The bursts must then cover the command's beats in order, every W beat with all its strobes
    on, and the RAM must hold exactly the data sent, as in the stalled tests.
    """
    params = params_from_env()
    commands, length = throughput_command(params, job["beats"])
    beat_bytes = params["data_width"] // 8
    tb = WriterTB(dut)
    await tb.reset()
    start = tb.cycle
    words = random_words(knobs.rng(30), length, params["data_width"])
    tb.send_commands(commands)
    tb.source.send_many(words)
    await tb.finish(tb.cmd, tb.source, beats=length)
    cycles = tb.w_beats[-1] - tb.w_beats[0] + 1
    tb.check_bus()
    tb.check_error(None)
    offsets = beat_addresses(commands, beat_bytes)
    issued = [address % RAM_SIZE + beat * beat_bytes
              for _, address, beats in tb.monitor.bursts for beat in range(beats)]
    assert issued == offsets, (f"bursts cover {len(issued)} beats, not the command's {length} in order; "
                               f"{knobs.describe()}")
    assert len(tb.w_beats) == length, f"{len(tb.w_beats)} W beats for {length}; {knobs.describe()}"
    full = (1 << beat_bytes) - 1
    assert all(strobe == full for strobe in tb.w_strobes), (f"a W beat without all its strobes; "
                                                            f"{knobs.describe()}")
    tb.check_memory(tb.expected_image(offsets, words, length))
    return tb.throughput_result(length, cycles, tb.cycle - start)


SESSIONS = {"reader_throughput": reader_throughput, "writer_throughput": writer_throughput}


def run_throughput(block, params, beats):
    """The throughput session of ``block`` (``axi_burst_reader`` or ``axi_burst_writer``) built with
    ``params``, one command of ``beats`` beats; returns ``{"beats", "cycles", "beats_per_cycle",
    "command_to_done_cycles", "peak_outstanding"}``."""
    from scripts.sim.devices import run_session

    session = {"axi_burst_reader": "reader", "axi_burst_writer": "writer"}[block]
    return run_session(block, f"bus.{session}_throughput", {"beats": beats}, params=params)
