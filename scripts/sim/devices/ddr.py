"""A DDR4 model for the kernels' AXI ports: reads and writes share one data bus and its bandwidth.

cocotbext-axi's ``AxiRam`` moves a beat per cycle on R and on W independently, so a kernel on it
sees 64 B/cycle of reads *and* 64 B/cycle of writes at 512 bits. The SmartSSD's FPGA has one
DDR4-2400 channel: 64 bits x 2400 MT/s = 19.2 GB/s, which is 64 B per cycle of the kernel's
300 MHz clock, for reads and writes together, and its data bus must turn around between them.

:class:`DdrArbiter` is the controller's data-bus schedule, in plain Python (unit-tested without a
simulator). :class:`DdrModel` attaches it to the ``AxiRam`` models of a simulated kernel (every
port of one device shares the one DDR): each R beat waits for a read grant before the RAM is read,
and each W beat taken waits for a write grant before the next is accepted (the W channel's
ready falls while grants lag). Addresses (AR, AW) and B responses cost nothing.

What is modelled, and what is not:

* one byte budget per cycle for both directions; a beat of ``b`` bytes occupies the data bus
  ``b / bytes_per_cycle`` cycles, and a beat is granted only in a cycle in which its slot starts,
  so with a budget that is a multiple of the beat (64 B beats at 64 B/cycle) no window of
  ``N`` cycles carries more than ``bytes_per_cycle * N`` bytes;
* a turnaround of ``turnaround`` idle cycles between the last beat of one direction and the
  first of the other (tWTR/tRTW-scale, derived in :class:`DdrArbiter`);
* reordering as DDR4 controllers do it: the controller stays in its direction while that
  direction has beats waiting, for up to ``max_run`` beats while the other direction waits
  (a starvation limit), then turns around;
* not modelled: refresh (tRFC every tREFI, about 4 % of the time on DDR4-2400 8 Gb parts), row
  misses and bank conflicts (the kernels stream long sequential bursts), and the controller's
  latency. The budget is the peak, so the model is an upper bound on what the card gives.
"""

import collections
from fractions import Fraction

import cocotb
from cocotb.triggers import Event, RisingEdge

__all__ = ["DdrArbiter", "DdrModel", "DDR_DEFAULTS", "SMARTSSD_CLOCK"]

# The kernel clock of the SmartSSD's updater (Smart-Infinity §VII-A, 300 MHz).
SMARTSSD_CLOCK = 300e6
# Defaults of DdrArbiter / DdrModel (their docstring gives each one's source).
DDR_DEFAULTS = {"bytes_per_cycle": 64, "turnaround": 7, "max_run": 64}
_OTHER = {"read": "write", "write": "read"}


class DdrArbiter:
    """The data-bus schedule of one DDR4 channel, cycle by cycle (no simulator needed).

    Parameters
    ----------
    bytes_per_cycle : int
        Data bytes per kernel cycle, read and write together. Default 64: the SmartSSD's DDR4-2400
        x64 channel, 2400e6 transfers/s x 8 bytes = 19.2 GB/s, at the kernel's 300 MHz.
    turnaround : int
        Idle kernel cycles charged when the bus changes direction. Default 7: DDR4-2400 (1200 MHz
        clock, 0.833 ns, JEDEC JESD79-4 speed bin 2400R: CL 17, CWL 12, tWTR_L = max(4 nCK,
        7.5 ns) = 9 nCK): write to read costs CWL + BL/2 + tWTR_L = 12 + 4 + 9 = 25 nCK = 20.8 ns,
        6.25 cycles at 300 MHz, rounded up; read to write costs CL + BL/2 + 2 - CWL = 11 nCK,
        2.75 cycles, and is charged the same 7 (pessimistic for that direction).
    max_run : int
        Beats served in one direction while the other waits before the bus turns around (a
        starvation limit). Default 64: one 4 KB AXI page of 512-bit beats. Controllers group
        reads and delay writes to save turnarounds (AMD PG353: reads are preferred and a read
        blocks writes for tRTW so groups of reads issue together; Intel EMIF: reordering against
        bus turnaround, with a starvation limit); the exact group size is not published in
        cycles, so this one is an assumption, and the bench states it next to its results.

    Attributes
    ----------
    granted : dict
        Bytes granted per direction. ``turnarounds`` counts direction changes; ``history``,
        if ``record``, lists ``(cycle, direction, bytes, start)`` of every grant, ``start`` the
        time (a ``Fraction`` of cycles) its slot on the data bus begins.
    """

    def __init__(self, bytes_per_cycle=64, turnaround=7, max_run=64, *, record=False):
        if bytes_per_cycle <= 0 or turnaround < 0 or max_run < 1:
            raise ValueError("bytes_per_cycle > 0, turnaround >= 0 and max_run >= 1 required")
        self.bytes_per_cycle = bytes_per_cycle
        self.turnaround = turnaround
        self.max_run = max_run
        self.record = record
        self.clear()

    def clear(self):
        """Forget the schedule and the counts (a reset of the controller)."""
        self.free_at = Fraction(0)  # when the data bus is next free, in cycles
        self.direction = None
        self.run = 0
        self.turnarounds = 0
        self.granted = {"read": 0, "write": 0}
        self.history = []

    def _choose(self, waiting):
        current = self.direction
        if current is None:
            return next((d for d in ("read", "write") if waiting[d]), None)
        other = _OTHER[current]
        if waiting[current] and (self.run < self.max_run or not waiting[other]):
            return current
        return other if waiting[other] else None

    def step(self, cycle, waiting):
        """Grant the beats whose bus slots start in ``cycle``; returns them in grant order.

        ``waiting`` maps ``"read"`` and ``"write"`` to a ``collections.deque`` of beat sizes (or
        of objects with an ``nbytes`` attribute), oldest first; granted ones are popped.
        """
        granted = []
        while True:
            direction = self._choose(waiting)
            if direction is None:
                break
            switch = self.direction is not None and direction != self.direction
            start = max(self.free_at + (self.turnaround if switch else 0), Fraction(cycle))
            if start >= cycle + 1:
                break  # the bus (or its turnaround) is busy past this cycle
            beat = waiting[direction].popleft()
            size = getattr(beat, "nbytes", beat)
            if switch:
                self.turnarounds += 1
                self.run = 0
            self.direction = direction
            self.run += 1
            self.free_at = start + Fraction(size, self.bytes_per_cycle)
            self.granted[direction] += size
            if self.record:
                self.history.append((cycle, direction, size, start))
            granted.append((direction, beat))
        return granted


class _Beat:
    __slots__ = ("nbytes", "event")

    def __init__(self, nbytes):
        self.nbytes = nbytes
        self.event = Event()


class DdrModel:
    """One DDR4 channel behind the ``AxiRam`` models of a simulated kernel's ports (use in cocotb).

    Parameters
    ----------
    clock, reset : cocotb handles
        The kernel's clock and its active-high reset; a reset drops every waiting beat (the
        RAM models drop their bursts then too).
    **arbiter
        :class:`DdrArbiter`'s parameters (defaults :data:`DDR_DEFAULTS`).

    Use :meth:`attach` on every ``AxiRam`` of the device; :attr:`enabled` False makes the RAMs
    run at their own full rate again (:meth:`configure`).
    """

    def __init__(self, clock, reset, **arbiter):
        self.clock = clock
        self.reset = reset
        self.arbiter = DdrArbiter(**{**DDR_DEFAULTS, **arbiter})
        self.enabled = True
        self.waiting = {"read": collections.deque(), "write": collections.deque()}
        self.cycle = 0
        self._task = cocotb.start_soon(self._run())

    def configure(self, settings):
        """``settings`` None: full-rate RAMs; else a dict of :class:`DdrArbiter` parameters."""
        self.enabled = settings is not None
        if self.enabled:
            record = self.arbiter.record
            self.arbiter = DdrArbiter(**{**DDR_DEFAULTS, **settings}, record=record)

    async def acquire(self, direction, nbytes):
        """Wait for the data-bus slot of one beat of ``nbytes`` in ``direction``."""
        if not self.enabled:
            return
        beat = _Beat(nbytes)
        self.waiting[direction].append(beat)
        await beat.event.wait()

    def attach(self, ram):
        """Put the beats of ``ram`` (an ``AxiRam``, say :class:`scripts.sim.axi.FaultyAxiRam`) on this DDR."""
        read_if, write_if = ram.read_if, ram.write_if
        read, recv = read_if._read, write_if.w_channel.recv
        beat_bytes = write_if.byte_lanes

        async def read_beat(address, length):
            await self.acquire("read", length)
            return await read(address, length)

        async def take_w_beat():
            item = await recv()
            await self.acquire("write", beat_bytes)
            return item

        read_if._read = read_beat
        write_if.w_channel.recv = take_w_beat

    async def _run(self):
        while True:
            await RisingEdge(self.clock)
            self.cycle += 1
            if self.reset.value:
                for queue in self.waiting.values():
                    queue.clear()
                continue
            for _, beat in self.arbiter.step(self.cycle, self.waiting):
                beat.event.set()
