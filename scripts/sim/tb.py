"""Pieces every cocotb testbench shares: the clock and reset owner and the scoreboard."""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadWrite, RisingEdge, SimTimeoutError, with_timeout

from . import knobs

__all__ = ["ClockedTB", "Scoreboard", "PulseCounter", "hex_of"]

CLOCK_PERIOD_NS = 10


class ClockedTB:
    """Base of a block's ``TB`` class: owns ``clk`` and ``rst`` of the generated top level.

    Subclasses add their drivers and monitors in ``__init__`` after calling this one.
    """

    def __init__(self, dut):
        self.dut = dut
        self.clock = dut.clk
        self.cycle = 0
        dut.rst.value = 1
        Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start()
        cocotb.start_soon(self._count_cycles())

    async def _count_cycles(self):
        while True:
            await RisingEdge(self.clock)
            self.cycle += 1

    async def reset(self, cycles=2):
        """Hold reset for ``cycles`` rising edges, then release it and let one edge pass."""
        self.dut.rst.value = 1
        await ClockCycles(self.clock, cycles)
        self.dut.rst.value = 0
        await RisingEdge(self.clock)

    async def cycles(self, count):
        await ClockCycles(self.clock, count)

    @classmethod
    async def under_stalls(cls, dut, idle, backpressure, **options):
        """A reset testbench for the stall pattern ``(idle, backpressure)``, of a subclass that takes
        ``idle``, ``backpressure`` and ``salt`` keywords (and ``options``); returns it and the
        pattern's salt (0 to 3), which also seeds the stalls."""
        salt = 2 * idle + backpressure
        tb = cls(dut, idle=idle, backpressure=backpressure, salt=salt, **options)
        await tb.reset()
        return tb, salt

    async def output_cycles(self, sink, count):
        """Receive ``count`` items from ``sink``; return the cycles from the first to the last, inclusive
        (``count`` for a block that puts out one item per cycle)."""
        await sink.recv()
        first = self.cycle
        for _ in range(count - 1):
            await sink.recv()
        return self.cycle - first + 1

    async def reset_mid_transfer(self, rng, *, after, drivers=(), cycles=None, until=None, signal=None):
        """Assert reset at a random cycle while traffic is in flight, then release it.

        Waits a random number of cycles in ``after`` (a ``(low, high)`` pair, inclusive),
        raises ``rst`` for ``cycles`` edges (random in 1..4 when None), and calls
        ``clear()`` on every driver (stream sources, sinks and monitors) both when reset
        rises, so no queued item from before the reset is sent afterwards, and when it
        falls, so anything the block emitted while in reset is not mistaken for output of
        the next transfer. Returns the cycle at which reset rose, for failure reports.

        With ``until`` (a callable returning a bool), reset rises at the first cycle, from
        the random one on, at which ``until()`` is true (say, while an AXI burst is open);
        if that takes more than ``high`` further cycles, the test fails (the transfer
        ended before the reset could cut it). ``until()`` is judged once every monitor
        woken by the cycle's clock edge has counted it.

        ``signal`` raises another active-high input instead of ``rst``, e.g. a synchronous
        cancel that drops the work in flight.
        """
        signal = self.dut.rst if signal is None else signal
        low, high = after
        await ClockCycles(self.clock, int(rng.integers(low, high + 1)))
        if until is not None:
            await ReadWrite()
            waited = 0
            while not until():
                waited += 1
                if waited > high:
                    raise AssertionError(f"no cycle with {getattr(until, '__name__', 'until()')} within "
                                         f"{high} cycles for the reset to cut; {knobs.describe()}")
                await RisingEdge(self.clock)
                await ReadWrite()
        started = self.cycle
        signal.value = 1
        for driver in drivers:
            driver.clear()
        await ClockCycles(self.clock, int(rng.integers(1, 5)) if cycles is None else cycles)
        signal.value = 0
        # Let every monitor woken by this (last reset) edge sample first: a sink that runs after
        # this coroutine would otherwise keep what it took from the port at this edge.
        await ReadWrite()
        for driver in drivers:
            driver.clear()
        await RisingEdge(self.clock)
        return started

    @property
    def reset_drivers(self):
        """What :meth:`reset_mid_traffic` clears: the subclass's ``drivers``."""
        return self.drivers

    def clear_counts(self):
        """Forget what was counted and expected before a reset (nothing here: a subclass's counters)."""

    async def reset_mid_traffic(self, rng, *, before, after):
        """Reset; ``send(rng, before)`` (the subclass's traffic), reset again somewhere ``after``
        cycles in (:meth:`reset_mid_transfer` on :attr:`reset_drivers`), and :meth:`clear_counts`,
        so that a clean run afterwards must be exact."""
        await self.reset()
        self.send(rng, before)
        await self.reset_mid_transfer(rng, after=after, drivers=self.reset_drivers)
        self.clear_counts()

    async def bounded(self, awaitable, *, cycles, what):
        """Await ``awaitable`` for at most ``cycles`` clock cycles; past that, fail as a hang.

        ``what`` names what hung: a string, or a callable returning one when the bound is hit.
        """
        try:
            return await with_timeout(awaitable, cycles * CLOCK_PERIOD_NS, "ns")
        except SimTimeoutError:
            what = what() if callable(what) else what
            raise AssertionError(f"{what}: hung, not finished within {cycles} cycles "
                                 f"(at cycle {self.cycle}); {knobs.describe()}") from None

    async def wait_until(self, condition, *, cycles, what):
        """Wait until ``condition()`` holds (checked at each rising edge); fail as a hang after ``cycles``."""
        async def poll():
            while not condition():
                await RisingEdge(self.clock)
        await self.bounded(poll(), cycles=cycles, what=what)

    async def expect_from(self, sink, scoreboard, *, cycles, settle=20):
        """Check that ``sink`` delivers exactly the items ``scoreboard`` still expects, in order.

        The items must all arrive within ``cycles`` clock cycles (fewer is a hang and fails
        with the count that arrived); ``settle`` cycles later, anything more the sink has
        received (a duplicate, or an item from before a reset) fails as an extra item.
        """
        count = scoreboard.pending

        async def drain():
            for _ in range(count):
                scoreboard.check(await sink.recv())

        def arrived():
            return f"{scoreboard.name}: {count - scoreboard.pending} of {count} items arrived"

        await self.bounded(drain(), cycles=cycles, what=arrived)
        await ClockCycles(self.clock, settle)
        while not sink.empty():
            scoreboard.check(sink.queue.popleft())
        scoreboard.check_complete()


class PulseCounter:
    """Counts the clock edges at which ``signal`` is high; ``clear()`` restarts the count.

    A ``driver`` of :meth:`ClockedTB.reset_mid_transfer`, for a valid-only output or a
    ``done`` pulse: after a reset it counts only what the block did since.
    """

    def __init__(self, clock, signal):
        self.count = 0
        self._task = cocotb.start_soon(self._run(clock, signal))

    def clear(self):
        self.count = 0

    async def _run(self, clock, signal):
        while True:
            await RisingEdge(clock)
            self.count += int(signal.value)


def hex_of(value):
    """Render ints (and nested dicts/lists of them) in hex for mismatch reports."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {hex_of(item)}" for key, item in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(hex_of(item) for item in value) + "]"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return hex(value)
    return repr(value)


class Scoreboard:
    """Compares received items against expected ones, in order.

    The first mismatch raises ``AssertionError`` naming the element index, the inputs
    that produced it, the expected and the actual value in hex, and the knobs that
    reproduce the run. A missing or extra item is a mismatch too.
    """

    def __init__(self, name):
        self.name = name
        self._expected = []
        self._inputs = []
        self.checked = 0

    def expect(self, expected, inputs=None):
        self._expected.append(expected)
        self._inputs.append(inputs)

    def expect_many(self, expected_items, inputs_items=None):
        inputs_items = inputs_items if inputs_items is not None else [None] * len(expected_items)
        for expected, inputs in zip(expected_items, inputs_items, strict=True):
            self.expect(expected, inputs)

    @property
    def pending(self):
        return len(self._expected) - self.checked

    def check(self, actual):
        index = self.checked
        if index >= len(self._expected):
            raise AssertionError(f"{self.name}: unexpected extra item #{index}: {hex_of(actual)}; "
                                 f"{knobs.describe()}")
        expected = self._expected[index]
        if expected != actual:
            raise AssertionError(
                f"{self.name}: mismatch at element {index}: inputs {hex_of(self._inputs[index])}, "
                f"expected {hex_of(expected)}, actual {hex_of(actual)}; {knobs.describe()}")
        self.checked += 1

    def check_complete(self):
        if self.pending:
            raise AssertionError(f"{self.name}: {self.pending} of {len(self._expected)} expected items never "
                                 f"arrived (first missing #{self.checked}); {knobs.describe()}")
