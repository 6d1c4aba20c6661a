"""UART transmitter: bytes from a stream, 8N1, least significant bit first."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import NO_DROPS, NO_GOLDEN, Param, Parameterized, register_block

__all__ = ["UARTTransmitter", "MIN_DIVISOR", "MAX_DIVISOR"]

MIN_DIVISOR, MAX_DIVISOR = 4, 1 << 16


class UARTTransmitter(Parameterized, wiring.Component):
    """Sends each byte of ``i`` on ``tx`` as one 8N1 frame: a start bit, 8 data bits LSB first, a stop bit.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, 4 to 65536 (``clock_hz // baud``; 217 for 115200 baud at 25 MHz).

    Attributes
    ----------
    i : In(stream.Signature(8))
        Bytes to send. A byte is taken when the line is idle, so ``ready`` is high for one
        cycle per frame at most.
    tx : Out(1)
        The serial line, idle high.
    busy : Out(1)
        A frame is on the line.

    Notes
    -----
    Latency: the start bit begins the cycle after the byte is taken. Throughput: one byte
    every ``10 * divisor`` cycles when ``i`` keeps up (frames are back to back).
    """

    PARAMS = (
        Param("divisor", int, 217, "clock cycles per bit", minimum=MIN_DIVISOR, maximum=MAX_DIVISOR),
    )

    def __init__(self, *, divisor=217):
        super().__init__({
            "i": In(stream.Signature(8)),
            "tx": Out(1, init=1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        # Shift register of the frame still to send (stop bit at the top); the line is its bit 0.
        frame = Signal(10, init=0x3FF)
        bits_left = Signal(range(11))
        timer = Signal(range(self._divisor))
        m.d.comb += [self.tx.eq(frame[0]), self.busy.eq(bits_left != 0),
                     self.i.ready.eq(bits_left == 0)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [frame.eq(Cat(Const(0, 1), self.i.payload, Const(1, 1))), bits_left.eq(10),
                         timer.eq(self._divisor - 1)]
        with m.Elif(bits_left != 0):
            with m.If(timer == 0):
                m.d.sync += [frame.eq(Cat(frame[1:], Const(1, 1))), bits_left.eq(bits_left - 1),
                             timer.eq(self._divisor - 1)]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m


register_block(
    "uart_tx", UARTTransmitter, family="bus",
    summary="UART transmitter, 8N1: bytes from a stream onto a serial line.",
    golden=NO_GOLDEN("plumbing: serial framing, checked by looping back through uart_rx"),
    drops=NO_DROPS,
)
