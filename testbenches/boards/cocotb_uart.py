"""cocotb tests of the UART pair (:mod:`rtl.bus.uart_tx`, :mod:`rtl.bus.uart_rx`) in loopback.

The transmitter's stream input gets random idle gaps, the receiver's stream output random
backpressure (short enough that no byte is lost: a byte waits at most one frame); every
byte must come back in order, with the line format checked bit by bit on ``tx``. Then a
receiver held off for several frames must flag ``overrun`` (and drop, never corrupt), and
a line held low (a break) must flag ``framing_error``; ``clear`` clears both.
"""

import itertools

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge

from testbenches import knobs
from testbenches.harness import params_from_env
from testbenches.stream import StreamSink, StreamSource, random_pauses
from testbenches.tb import ClockedTB, Scoreboard


class TB(ClockedTB):
    def __init__(self, dut, pause=0.5, backpressure=0.5):
        super().__init__(dut)
        self.divisor = params_from_env()["divisor"]
        dut.line_low.value = 0
        dut.clear.value = 0
        self.source = StreamSource(dut, "i", self.clock, pause=random_pauses(knobs.rng(1), pause))
        self.sink = StreamSink(dut, "o", self.clock, backpressure=random_pauses(knobs.rng(2), backpressure))
        self.line = []
        cocotb.start_soon(self._line_monitor())

    async def _line_monitor(self):
        """Decode ``tx`` independently of the receiver: 8N1, LSB first, checked in mid-bit."""
        while True:
            await FallingEdge(self.dut.tx)
            await ClockCycles(self.clock, self.divisor // 2)
            bits = []
            for _ in range(9):
                await ClockCycles(self.clock, self.divisor)
                bits.append(int(self.dut.tx.value))
            assert bits[8] == 1, f"stop bit low after {bits[:8]}"
            self.line.append(sum(bit << i for i, bit in enumerate(bits[:8])))


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
