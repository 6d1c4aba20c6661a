"""The UART pair (:mod:`rtl.bus.uart_tx`, :mod:`rtl.bus.uart_rx`) in loopback: cocotb tests and runners.

The transmitter's stream input gets random idle gaps, the receiver's stream output random
backpressure (short enough that no byte is lost: a byte waits at most one frame); every
byte must come back in order, with the line format checked bit by bit on ``tx``. Then a
receiver held off for several frames must flag ``overrun`` (and drop, never corrupt), and
a line held low (a break) must flag ``framing_error``; ``clear`` clears both.

The two blocks are tested together only: :class:`UARTLoopback` (at the bottom, with the
pytest runners) wires the transmitter's line into the receiver, every test checks the
receiver's output against the transmitter's input and the line between them, and the
framing-error test forces that line low.
"""

import itertools

import cocotb
import pytest
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from cocotb.triggers import ClockCycles, FallingEdge

from rtl.bus.uart_rx import UARTReceiver
from rtl.bus.uart_tx import UARTTransmitter
from scripts.sim import knobs
from scripts.sim.runner import params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, random_pauses
from scripts.sim.tb import ClockedTB, Scoreboard

# Reset test: rounds of (bytes, reset in their middle, clean bytes), bytes per batch.
RESET_ROUNDS = 16
RESET_BYTES = 6


class TB(ClockedTB):
    def __init__(self, dut, pause=0.5, backpressure=0.5):
        super().__init__(dut)
        self.divisor = params_from_env()["divisor"]
        dut.line_low.value = 0
        dut.clear.value = 0
        self.source = StreamSource(dut, "i", self.clock, pause=random_pauses(knobs.rng(1), pause))
        self.sink = StreamSink(dut, "o", self.clock, backpressure=random_pauses(knobs.rng(2), backpressure))
        self.monitor = LineMonitor(dut.tx, self.clock, self.divisor)
        self.line = self.monitor.frames


class LineMonitor:
    """Decodes ``tx`` independently of the receiver (8N1, LSB first, checked in mid-bit) into ``frames``."""

    def __init__(self, tx, clock, divisor):
        self._tx = tx
        self._clock = clock
        self._divisor = divisor
        self.frames = []
        self._task = cocotb.start_soon(self._run())

    def clear(self):
        """Forget the bytes decoded, drop the frame being decoded (a reset cuts it), await a start bit."""
        self._task.cancel()
        self.frames.clear()
        self._task = cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            await FallingEdge(self._tx)
            await ClockCycles(self._clock, self._divisor // 2)
            bits = []
            for _ in range(9):
                await ClockCycles(self._clock, self._divisor)
                bits.append(int(self._tx.value))
            assert bits[8] == 1, f"stop bit low after {bits[:8]}"
            self.frames.append(sum(bit << i for i, bit in enumerate(bits[:8])))


@cocotb.test()
async def loopback(dut):
    tb = TB(dut)
    await tb.reset()
    count = knobs.vectors(40)
    data = [int(b) for b in knobs.rng(3).integers(0, 256, count)]
    board = Scoreboard("uart loopback")
    board.expect_many(data)
    tb.source.send_many(data)
    for _ in range(count):
        board.check(await tb.sink.recv())
    board.check_complete()
    assert tb.line == data[:len(tb.line)] and len(tb.line) >= count - 1
    assert int(dut.overrun.value) == 0 and int(dut.framing_error.value) == 0


@cocotb.test()
async def errors(dut):
    tb = TB(dut, pause=0.0, backpressure=0.0)
    await tb.reset()
    # The receiver's consumer stalls for five frames: the first byte waits, later ones are dropped.
    tb.sink.set_backpressure_generator(itertools.chain(itertools.repeat(True, 50 * tb.divisor),
                                                       itertools.repeat(False)))
    tb.source.send_many([0x11, 0x22, 0x33, 0x44, 0x55])
    await tb.source.wait_idle()
    await ClockCycles(tb.clock, 12 * tb.divisor)
    assert int(dut.overrun.value) == 1, "no overrun flagged"
    received = [await tb.sink.recv()]
    while not tb.sink.empty():
        received.append(await tb.sink.recv())
    assert received[0] == 0x11 and set(received) <= {0x11, 0x22, 0x33, 0x44, 0x55}, received
    assert received == sorted(received), f"bytes out of order: {received}"
    await ClockCycles(tb.clock, 12 * tb.divisor)
    assert tb.sink.empty(), "a byte arrived after the last one sent"
    dut.clear.value = 1
    await ClockCycles(tb.clock, 1)
    dut.clear.value = 0
    await ClockCycles(tb.clock, 1)
    assert int(dut.overrun.value) == 0

    # A break (line low for 12 bit times): a framing error, and no byte.
    dut.line_low.value = 1
    await ClockCycles(tb.clock, 12 * tb.divisor)
    dut.line_low.value = 0
    await ClockCycles(tb.clock, 12 * tb.divisor)
    assert int(dut.framing_error.value) == 1, "no framing error flagged"
    assert tb.sink.empty(), "a byte was made of a break"
    # The line recovers: the next byte arrives intact.
    tb.source.send_nowait(0xA5)
    assert await tb.sink.recv() == 0xA5


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset both ends in the middle of a frame; the next bytes arrive intact and alone, with no error flag.

    Each round sends random bytes with random gaps and receiver backpressure, raises reset
    at a random cycle in the first three frames (the transmitter cut mid-frame, the
    receiver mid-byte), then sends new random bytes: the receiver must deliver exactly
    them, the line must carry exactly them, and neither error flag may be set by the cut
    frame, all within a cycle bound.
    """
    tb = TB(dut)
    rng = knobs.rng(300)
    await tb.reset()
    frame = 10 * tb.divisor
    board = Scoreboard("uart loopback after reset")
    for _ in range(RESET_ROUNDS):
        before = [int(b) for b in rng.integers(0, 256, RESET_BYTES)]
        sent = tb.source.sent
        tb.source.send_many(before)
        await tb.wait_until(lambda sent=sent: tb.source.sent > sent, cycles=100, what="the first byte")
        await tb.reset_mid_transfer(rng, after=(0, 3 * frame), drivers=[tb.source, tb.sink, tb.monitor])
        assert tb.source.sent - sent < len(before), (
            f"reset after the transfer: all {len(before)} bytes were sent; {knobs.describe()}")
        data = [int(b) for b in rng.integers(0, 256, RESET_BYTES)]
        board.expect_many(data)
        tb.source.send_many(data)
        await tb.expect_from(tb.sink, board, cycles=3 * frame * (len(data) + 2), settle=2 * frame)
        assert tb.line == data, f"the line carried {tb.line}, sent {data}; {knobs.describe()}"
        flags = int(dut.overrun.value), int(dut.framing_error.value)
        assert flags == (0, 0), f"overrun, framing_error = {flags} after the reset; {knobs.describe()}"


# ---------------------------------------------------------------- the loopback top and the pytest runners

MODULE = __name__


class UARTLoopback(wiring.Component):
    """Transmitter into receiver; ``line_low`` forces the line low (a break) to make framing errors."""

    def __init__(self, *, divisor):
        self._divisor = divisor
        super().__init__({"i": In(stream.Signature(8)), "o": Out(stream.Signature(8)), "tx": Out(1),
                          "line_low": In(1), "overrun": Out(1), "framing_error": Out(1), "clear": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx = tx = UARTTransmitter(divisor=self._divisor)
        m.submodules.rx = rx = UARTReceiver(divisor=self._divisor)
        wiring.connect(m, wiring.flipped(self.i), tx.i)
        wiring.connect(m, rx.o, wiring.flipped(self.o))
        m.d.comb += [self.tx.eq(tx.tx), rx.rx.eq(tx.tx & ~self.line_low), self.overrun.eq(rx.overrun),
                     self.framing_error.eq(rx.framing_error), rx.clear.eq(self.clear)]
        return m


@pytest.mark.parametrize("divisor", [4, 7, 16])
def test_uart_loopback(divisor):
    run_cocotb(UARTLoopback, MODULE, params={"divisor": divisor})


@pytest.mark.parametrize("name,cls", [("divisor", UARTTransmitter), ("divisor", UARTReceiver)])
def test_uart_bad_divisor(name, cls):
    with pytest.raises(ValueError, match=name):
        cls(divisor=3)
