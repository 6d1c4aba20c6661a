"""The board demo on a real board: :class:`AdamBoardDemo` wired to the platform's UART and an LED."""

from amaranth.hdl import Elaboratable, Module

from ..registration import check_int
from .adam_demo import AdamBoardDemo, check_geometry

__all__ = ["BoardDemoTop", "check_baud"]


def check_baud(baud):
    """Validate the serial rate :class:`BoardDemoTop` takes (9600 to 3000000); return it."""
    return check_int("baud", baud, 9600, 3_000_000)


class BoardDemoTop(Elaboratable):
    """Top level for an ``amaranth_boards`` platform with a ``uart`` resource (ULX3S, ECPIX-5, ...).

    The design runs in the platform's default clock domain (25 MHz on the ULX3S); the UART
    divisor is ``round(clock / baud)``. LED 0 shows a run in progress.

    Parameters
    ----------
    lanes, depth : int
        As :class:`~rtl.board.adam_demo.AdamBoardDemo`.
    baud : int
        Serial rate, 9600 to 3000000 (the host script's ``--baud``).
    """

    def __init__(self, *, lanes=1, depth=256, baud=115200):
        self._lanes, self._depth = check_geometry(lanes, depth)
        self._baud = check_baud(baud)

    def divisor(self, platform):
        return round(platform.default_clk_frequency / self._baud)

    def elaborate(self, platform):
        m = Module()
        m.submodules.demo = demo = AdamBoardDemo(lanes=self._lanes, depth=self._depth,
                                                 divisor=self.divisor(platform))
        uart = platform.request("uart", 0)
        led = platform.request("led", 0)
        m.d.comb += [demo.rx.eq(uart.rx.i), uart.tx.o.eq(demo.tx), led.o.eq(demo.busy)]
        return m
