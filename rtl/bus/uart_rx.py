"""UART receiver: 8N1 frames from a serial line into a stream of bytes, with error flags."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from ..registration import NO_GOLDEN, Param, Parameterized, register_block
from .uart_tx import MAX_DIVISOR, MIN_DIVISOR

__all__ = ["UARTReceiver"]


class UARTReceiver(Parameterized, wiring.Component):
    """Receives 8N1 frames on ``rx`` (start bit, 8 data bits LSB first, stop bit) as bytes on ``o``.

    ``rx`` goes through a two-flip-flop synchroniser. A falling edge starts a frame (a line
    held low after a framing error starts nothing until it has been high again); the
    start bit is checked again half a bit later (a shorter low pulse is ignored as a
    glitch) and every following bit is sampled in its middle.

    A serial line cannot wait, so bad data is flagged rather than stalled on:

    * **overrun**: a byte arrives while the previous one is still waiting on ``o`` (its
      ``ready`` stayed low for a whole frame); the new byte is dropped and ``overrun``
      set;
    * **framing error**: the stop bit is low; the byte is dropped and ``framing_error``
      set.

    Both flags are sticky until ``clear``.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, 4 to 65536.

    Attributes
    ----------
    rx : In(1)
        The serial line, idle high (asynchronous).
    o : Out(stream.Signature(8))
        Received bytes; ``valid`` holds until the transfer.
    overrun, framing_error : Out(1)
        Sticky error flags (see above).
    clear : In(1)
        Clears both flags.

    Notes
    -----
    Latency: a byte is on ``o`` about ``9.5 * divisor + 3`` cycles after its start bit
    begins (in the middle of the stop bit). Throughput: one byte per frame, ``10 * divisor``
    cycles.
    """

    PARAMS = (
        Param("divisor", int, 217, "clock cycles per bit", minimum=MIN_DIVISOR, maximum=MAX_DIVISOR),
    )

    def __init__(self, *, divisor=217):
        super().__init__({
            "rx": In(1, init=1),
            "o": Out(stream.Signature(8)),
            "overrun": Out(1),
            "framing_error": Out(1),
            "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        line = Signal(init=1)
        m.submodules.synchroniser = FFSynchronizer(self.rx, line, init=1)
        divisor = self._divisor
        timer = Signal(range(divisor))
        bits = Signal(range(10))
        shift = Signal(8)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.clear):
            m.d.sync += [self.overrun.eq(0), self.framing_error.eq(0)]

        # State machine as if-chains on a state register: Amaranth prints m.FSM as a
        # case statement without a default, which Verilator -Wall rejects (CASEINCOMPLETE).
        state = Signal(range(4))
        S_IDLE, S_START, S_DATA, S_STOP = range(4)
        # A frame starts on a falling edge, not on a low level, so that after a break (the line
        # held low, a framing error) nothing is received until the line has been high again.
        line_before = Signal(init=1)
        m.d.sync += line_before.eq(line)
        with m.If(state == S_IDLE):
            with m.If(line_before & ~line):
                m.d.sync += timer.eq(divisor // 2 - 1)
                m.d.sync += state.eq(S_START)
        with m.If(state == S_START):
            with m.If(timer != 0):
                m.d.sync += timer.eq(timer - 1)
            with m.Elif(line):
                m.d.sync += state.eq(S_IDLE)  # a glitch, not a start bit
            with m.Else():
                m.d.sync += [timer.eq(divisor - 1), bits.eq(0)]
                m.d.sync += state.eq(S_DATA)
        with m.If(state == S_DATA):
            with m.If(timer != 0):
                m.d.sync += timer.eq(timer - 1)
            with m.Else():
                m.d.sync += [shift.eq(Cat(shift[1:], line)), bits.eq(bits + 1), timer.eq(divisor - 1)]
                with m.If(bits == 7):
                    m.d.sync += state.eq(S_STOP)
        with m.If(state == S_STOP):
            with m.If(timer != 0):
                m.d.sync += timer.eq(timer - 1)
            with m.Else():
                with m.If(~line):
                    m.d.sync += self.framing_error.eq(1)
                with m.Elif(self.o.valid & ~self.o.ready):
                    m.d.sync += self.overrun.eq(1)
                with m.Else():
                    m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(shift)]
                # Back to IDLE in the middle of the stop bit, so the next start edge is not missed.
                m.d.sync += state.eq(S_IDLE)
        return m


register_block(
    "uart_rx", UARTReceiver, family="bus",
    summary="UART receiver, 8N1: a serial line into a stream of bytes, with overrun and framing flags.",
    golden=NO_GOLDEN("plumbing: serial framing, checked by looping back from uart_tx"),
    drops={
        "overrun": "sticky: a byte arrived while the previous one still waited, dropped",
        "framing_error": "sticky: a byte with a low stop bit, dropped",
    },
)
