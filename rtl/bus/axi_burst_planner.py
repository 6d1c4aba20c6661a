"""Splits DMA commands into AXI4 INCR bursts that respect the burst length and 4 KB rules."""

from amaranth.hdl import C, Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import Param, check_int, register_block
from .axi import PAGE_BYTES, check_data_width

__all__ = ["AXIBurstPlanner", "command_layout", "burst_layout"]


def command_layout(address_width, length_width):
    """Payload of a DMA command: a byte ``address`` and a ``length`` in data beats."""
    return data.StructLayout({"address": address_width, "length": length_width})


def burst_layout(address_width, max_burst):
    """Payload of one planned burst: byte ``address``, ``beats`` (1..max_burst), ``final`` of its command."""
    return data.StructLayout({"address": address_width, "beats": range(max_burst + 1), "final": 1})


class AXIBurstPlanner(wiring.Component):
    """Cuts each command into INCR bursts of at most ``max_burst`` beats within one 4 KB page.

    A command ``(address, length)`` covers ``length`` beats of ``data_width // 8`` bytes
    from ``address``; the low ``log2(data_width // 8)`` address bits are ignored (commands
    are beat-aligned). Each burst is as long as the rule allows: the remaining length,
    ``max_burst``, and the beats left before the next 4 KB boundary, whichever is least.
    So after the first burst of a command every burst starts page-aligned or
    ``max_burst``-aligned when ``max_burst`` is a power of two. Commands of length 0 are
    accepted and produce no burst.

    Parameters
    ----------
    address_width : int
        Byte address width, 12 to 64.
    data_width : int
        Beat width in bits, a power of two from 8 to 1024.
    max_burst : int
        Longest burst in beats, 1 to 256 (AXI4 INCR limit).
    length_width : int
        Width of the command's beat count, 1 to 32.

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout))
        Commands; taken one at a time (``ready`` is low while a command is being cut).
    burst : Out(stream.Signature(burst_layout))
        Bursts in address order; ``final`` marks the last burst of a command.
    busy : Out(1)
        A command is being cut.

    Notes
    -----
    Latency: a command taken at one clock edge offers its first burst after that edge.
    Throughput: one burst per cycle; a command costs one cycle more than its bursts.
    """

    def __init__(self, *, address_width=64, data_width=512, max_burst=64, length_width=32):
        self._address_width = check_int("address_width", address_width, 12, 64)
        self._data_width = check_data_width(data_width, 8)
        self._max_burst = check_int("max_burst", max_burst, 1, 256)
        self._length_width = check_int("length_width", length_width, 1, 32)
        super().__init__({
            "cmd": In(stream.Signature(command_layout(address_width, length_width))),
            "burst": Out(stream.Signature(burst_layout(address_width, max_burst))),
            "busy": Out(1),
        })

    latency = 1
    throughput = 1

    def elaborate(self, platform):
        m = Module()

        beat_bytes_log2 = (self._data_width // 8).bit_length() - 1
        page_beats = PAGE_BYTES >> beat_bytes_log2
        # The longest burst the page rule could ever allow also bounds max_burst usefully.
        cap = min(self._max_burst, page_beats)

        active = Signal()
        address = Signal(self._address_width)
        remaining = Signal(self._length_width)

        # Beats from `address` to the end of its 4 KB page (1..page_beats).
        beat_in_page = address[beat_bytes_log2:12]
        to_page_end = Signal(range(page_beats + 1))
        m.d.comb += to_page_end.eq(page_beats - beat_in_page)

        limit = Signal(range(cap + 1))
        with m.If(to_page_end < cap):
            m.d.comb += limit.eq(to_page_end)
        with m.Else():
            m.d.comb += limit.eq(cap)

        beats = Signal(range(cap + 1))
        final = Signal()
        m.d.comb += final.eq(remaining <= limit)
        with m.If(final):
            m.d.comb += beats.eq(remaining)
        with m.Else():
            m.d.comb += beats.eq(limit)

        m.d.comb += [
            self.cmd.ready.eq(~active),
            self.busy.eq(active),
            self.burst.valid.eq(active),
            self.burst.payload.address.eq(address),
            self.burst.payload.beats.eq(beats),
            self.burst.payload.final.eq(final),
        ]

        with m.If(self.cmd.valid & self.cmd.ready):
            aligned = Cat(C(0, beat_bytes_log2), self.cmd.payload.address[beat_bytes_log2:])
            m.d.sync += [
                active.eq(self.cmd.payload.length != 0),
                address.eq(aligned),
                remaining.eq(self.cmd.payload.length),
            ]
        with m.If(self.burst.valid & self.burst.ready):
            m.d.sync += [
                address.eq(address + (beats << beat_bytes_log2)),
                remaining.eq(remaining - beats),
            ]
            with m.If(final):
                m.d.sync += active.eq(0)
        return m


register_block(
    "axi_burst_planner", AXIBurstPlanner, family="bus",
    summary="Cuts (address, beats) commands into AXI4 INCR bursts: <= max_burst beats, no 4 KB crossing.",
    params=[
        Param("address_width", int, 64, "byte address width", minimum=12, maximum=64),
        Param("data_width", int, 512, "beat width in bits (power of two)", minimum=8, maximum=1024),
        Param("max_burst", int, 64, "longest burst in beats", minimum=1, maximum=256),
        Param("length_width", int, 32, "width of the command beat count", minimum=1, maximum=32),
    ],
)
