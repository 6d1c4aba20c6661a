"""Pieces every cocotb testbench shares: the clock and reset owner and the scoreboard."""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from . import knobs

__all__ = ["ClockedTB", "Scoreboard", "hex_of"]

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

    async def reset_mid_transfer(self, rng, *, after, drivers=(), cycles=None):
        """Assert reset at a random cycle while traffic is in flight, then release it.

        Waits a random number of cycles in ``after`` (a ``(low, high)`` pair, inclusive),
        raises ``rst`` for ``cycles`` edges (random in 1..4 when None), and calls
        ``clear()`` on every driver (stream sources, sinks and monitors) both when reset
        rises, so no queued item from before the reset is sent afterwards, and when it
        falls, so anything the block emitted while in reset is not mistaken for output of
        the next transfer. Returns the cycle at which reset rose, for failure reports.
        """
        low, high = after
        await ClockCycles(self.clock, int(rng.integers(low, high + 1)))
        started = self.cycle
        self.dut.rst.value = 1
        for driver in drivers:
            driver.clear()
        await ClockCycles(self.clock, int(rng.integers(1, 5)) if cycles is None else cycles)
        self.dut.rst.value = 0
        for driver in drivers:
            driver.clear()
        await RisingEdge(self.clock)
        return started


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
