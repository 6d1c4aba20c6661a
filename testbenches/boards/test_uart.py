"""Runners of the UART pair in loopback: random gaps and backpressure, overrun, framing error."""

import pytest
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.uart_rx import UARTReceiver
from rtl.bus.uart_tx import UARTTransmitter
from scripts.sim.runner import run_cocotb


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
    run_cocotb(UARTLoopback, "testbenches.boards.cocotb_uart", params={"divisor": divisor})


@pytest.mark.parametrize("name,cls", [("divisor", UARTTransmitter), ("divisor", UARTReceiver)])
def test_uart_bad_divisor(name, cls):
    with pytest.raises(ValueError, match=name):
        cls(divisor=3)
