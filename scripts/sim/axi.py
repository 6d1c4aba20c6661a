"""AXI models for simulations, on top of cocotbext-axi.

* :class:`FaultyAxiRam`: cocotbext-axi's ``AxiRam`` that answers SLVERR or DECERR for beats
  inside chosen address ranges. ``AxiRam`` itself only answers SLVERR, and only when its
  memory access raises, so the read and write accessors are wrapped to raise inside a
  fault range, and the R and B channel ``send`` is wrapped to turn the SLVERR that the
  slave model then sends into the range's response code.
* :class:`BurstMonitor`: watches AR/R or AW/B of the DUT's manager port and checks every
  burst (INCR, full-width beats, at most ``max_burst`` beats, no 4 KB crossing), the number
  of bursts in flight (never above ``max_outstanding``) and, for reads, that R is never
  stalled by the DUT. cocotbext-axi has no protocol checker.
* :func:`random_pauses_all`: pause generators for every channel of an AXI port.
"""


import cocotb
from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiBus, AxiRam
from cocotbext.axi.constants import AxiResp

from rtl.bus.axi import PAGE_BYTES, Burst

__all__ = ["FaultyAxiRam", "BurstMonitor", "random_pauses_all", "RAM_SIZE", "write_register", "read_register"]

# The default size of a FaultyAxiRam; the model wraps addresses modulo its size.
RAM_SIZE = 1 << 22


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


async def write_register(host, entry, value):
    """Write ``value`` to a register of a kernel's ``register_map()`` through an ``AxiLiteMaster``;
    a register wider than 32 bits takes two words, low word first (as the Vitis map lays it out)."""
    await host.write_dword(entry["offset"], int(value) & 0xFFFF_FFFF)
    if entry["width"] > 32:
        await host.write_dword(entry["offset"] + 4, int(value) >> 32)


async def read_register(host, entry):
    """Read a register of a kernel's ``register_map()`` (two words when wider than 32 bits)."""
    value = await host.read_dword(entry["offset"])
    if entry["width"] > 32:
        value |= await host.read_dword(entry["offset"] + 4) << 32
    return value
