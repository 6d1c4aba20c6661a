"""Pieces shared by the AXI DMA testbenches (no cocotb tests of its own): memory model, monitor, TB.

* :class:`FaultyAxiRam`: cocotbext-axi's ``AxiRam`` that answers SLVERR or DECERR for beats
  inside chosen address ranges. ``AxiRam`` itself only answers SLVERR, and only when its
  memory access raises, so the read and write accessors are wrapped to raise inside a
  fault range, and the R and B channel ``send`` is wrapped to turn the SLVERR that the
  slave model then sends into the range's response code.
* :class:`BurstMonitor`: watches AR/R or AW/B of the DUT's manager port and checks every
  burst (INCR, full-width beats, at most ``max_burst`` beats, no 4 KB crossing), the number
  of bursts in flight (never above ``max_outstanding``) and, for reads, that R is never
  stalled by the DUT.
* :class:`DmaTB`: clock, reset, RAM, monitor, command source and ``done`` watcher of a
  reader or writer testbench.
"""

import logging

import cocotb
from cocotb.triggers import RisingEdge, with_timeout
from cocotbext.axi import AxiBus, AxiRam
from cocotbext.axi.constants import AxiResp

from rtl.bus.axi import PAGE_BYTES, Burst
from testbenches import knobs
from testbenches.harness import component_from_env, params_from_env
from testbenches.stream import StreamSource, never, random_pauses, stream_layout
from testbenches.tb import CLOCK_PERIOD_NS, ClockedTB

__all__ = ["FaultyAxiRam", "BurstMonitor", "DmaTB", "random_pauses_all", "random_commands", "beat_addresses",
           "address_of", "fault_near", "RAM_SIZE", "ADDRESS_BASE"]

# The RAM model wraps addresses modulo its size; commands use ADDRESS_BASE + offset so that
# the upper address bits are exercised too.
RAM_SIZE = 1 << 22
ADDRESS_BASE = 0x5A5A_0000_0000


class _Fault(Exception):
    pass


class FaultyAxiRam(AxiRam):
    """``AxiRam`` on the DUT port ``prefix`` with error responses for ``faults``.

    Parameters
    ----------
    dut, prefix, clock, reset
        As for ``AxiBus.from_prefix`` and ``AxiRam`` (reset active high).
    faults : list of (start, end, resp)
        Byte ranges ``[start, end)`` of RAM offsets and the response (``AxiResp.SLVERR`` or
        ``AxiResp.DECERR``) for any beat touching them. A failing write beat is not written.
    in_flight : int
        Queue depth of the model's AR and AW sinks, so that the DUT's own outstanding limit,
        not the model's default of 2, is what binds.
    """

    def __init__(self, dut, prefix, clock, reset, *, size=RAM_SIZE, faults=(), in_flight=16):
        super().__init__(AxiBus.from_prefix(dut, prefix), clock, reset, size=size)
        self.faults = list(faults)
        self._resp = {"read": AxiResp.OKAY, "write": AxiResp.OKAY}
        self.read_if.ar_channel.queue_occupancy_limit = in_flight
        self.write_if.aw_channel.queue_occupancy_limit = in_flight
        self.read_if._read = self._guard("read", self.read_if._read)
        self.write_if._write = self._guard("write", self.write_if._write)
        self.read_if.r_channel.send = self._retag("read", self.read_if.r_channel.send, "rresp")
        self.write_if.b_channel.send = self._retag("write", self.write_if.b_channel.send, "bresp")

    def fault_at(self, address, length=1):
        """The response code for bytes ``[address, address + length)``, or None."""
        address %= self.size
        for start, end, resp in self.faults:
            if address < end and start < address + length:
                return resp
        return None

    def _guard(self, kind, access):
        async def guarded(address, data_or_length):
            length = data_or_length if isinstance(data_or_length, int) else len(data_or_length)
            resp = self.fault_at(address, length)
            if resp is not None:
                # The first failing beat of a response decides its code.
                if self._resp[kind] == AxiResp.OKAY:
                    self._resp[kind] = resp
                raise _Fault(f"{kind} fault at {address:#x}")
            return await access(address, data_or_length)
        return guarded

    def _retag(self, kind, send, field):
        async def retagged(item):
            if int(getattr(item, field)) == AxiResp.SLVERR:
                setattr(item, field, self._resp[kind])
            self._resp[kind] = AxiResp.OKAY
            await send(item)
        return retagged

    def set_pause_generators(self, make):
        """Give every AXI channel of the model a pause generator from ``make(channel_name)``."""
        for channel in ("ar", "r"):
            getattr(self.read_if, f"{channel}_channel").set_pause_generator(make(channel))
        for channel in ("aw", "w", "b"):
            getattr(self.write_if, f"{channel}_channel").set_pause_generator(make(channel))


def random_pauses_all(rng, probability):
    """A ``make(channel)`` for :meth:`FaultyAxiRam.set_pause_generators` from one NumPy generator."""
    def make(_channel):
        while True:
            yield bool(rng.random() < probability)
    return make


class BurstMonitor:
    """Checks the address and response channels of manager port ``prefix`` (``"m_axi"``) each cycle.

    ``direction`` is ``"read"`` (AR opens a burst, R with ``rlast`` closes it) or ``"write"``
    (AW opens, B closes). Every burst seen is kept in :attr:`bursts` as
    ``(cycle, address, beats)``; every R beat's or B response's code in :attr:`responses` as
    ``(cycle, resp)``.
    A rule violation is recorded in :attr:`violations` (the test asserts it is empty, so
    the message carries the reproduction knobs).
    """

    def __init__(self, dut, prefix, clock, *, direction, data_width, max_burst, max_outstanding):
        self._dut = dut
        self._clock = clock
        self._a = "ar" if direction == "read" else "aw"
        self._prefix = prefix
        self.direction = direction
        self.beat_bytes = data_width // 8
        self.max_burst = max_burst
        self.max_outstanding = max_outstanding
        self.bursts = []
        self.responses = []
        self.violations = []
        self.outstanding = 0
        self.peak_outstanding = 0
        self.cycle = 0
        self._task = cocotb.start_soon(self._run())

    def clear(self):
        """Forget the bursts in flight (for a reset shared with the memory, which drops them too)."""
        self.outstanding = 0

    def _signal(self, name):
        return getattr(self._dut, f"{self._prefix}__{name}")

    def _check_burst(self, address, beats, size, burst):
        where = f"{self._a.upper()} burst at {address:#x} of {beats} beats (cycle {self.cycle})"
        if burst != Burst.INCR:
            self.violations.append(f"{where}: burst type {burst}, expected INCR")
        if 1 << size != self.beat_bytes:
            self.violations.append(f"{where}: size {1 << size} bytes, expected {self.beat_bytes}")
        if address % self.beat_bytes:
            self.violations.append(f"{where}: address not beat aligned")
        if beats > self.max_burst:
            self.violations.append(f"{where}: longer than max_burst={self.max_burst}")
        if address % PAGE_BYTES + beats * self.beat_bytes > PAGE_BYTES:
            self.violations.append(f"{where}: crosses a 4 KB boundary")

    async def _run(self):
        a = self._a
        avalid, aready = self._signal(f"{a}valid"), self._signal(f"{a}ready")
        addr, alen = self._signal(f"{a}addr"), self._signal(f"{a}len")
        asize, aburst = self._signal(f"{a}size"), self._signal(f"{a}burst")
        if self.direction == "read":
            rvalid, rready, rlast, resp = (self._signal(n) for n in ("rvalid", "rready", "rlast", "rresp"))
        else:
            rvalid, rready, resp = (self._signal(n) for n in ("bvalid", "bready", "bresp"))
            rlast = None
        while True:
            await RisingEdge(self._clock)
            self.cycle += 1
            if rvalid.value and rready.value:
                self.responses.append((self.cycle, int(resp.value)))
                if rlast is None or rlast.value:
                    self.outstanding -= 1
            elif rvalid.value and rlast is not None:
                self.violations.append(f"R stalled by the DUT at cycle {self.cycle}")
            if avalid.value and aready.value:
                address, beats = int(addr.value), int(alen.value) + 1
                self._check_burst(address, beats, int(asize.value), int(aburst.value))
                self.bursts.append((self.cycle, address, beats))
                self.outstanding += 1
                self.peak_outstanding = max(self.peak_outstanding, self.outstanding)
                if self.outstanding > self.max_outstanding:
                    self.violations.append(f"{self.outstanding} bursts in flight at cycle {self.cycle}, "
                                           f"more than max_outstanding={self.max_outstanding}")


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


class DmaTB(ClockedTB):
    """A reader or writer DUT with its RAM model (random contents), monitor and command source.

    ``stall`` is the probability of a pause on every AXI channel of the model and of an idle
    or backpressure cycle on the DUT's streams (0 for full rate).
    """

    def __init__(self, dut, *, direction, faults=(), stall=0.0):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params_from_env()
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

    def bursts_after_first_error(self):
        """Bursts the DUT started after the cycle of the first failing response."""
        failing = [cycle for cycle, resp in self.monitor.responses if resp & 2]
        return [burst for burst in self.monitor.bursts if failing and burst[0] > failing[0]]
