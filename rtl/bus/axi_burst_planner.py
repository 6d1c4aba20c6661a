"""Splits DMA commands into AXI4 INCR bursts that respect the burst length and 4 KB rules."""

from amaranth.hdl import C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import NO_DROPS, Param, Parameterized, register_block
from .axi import PAGE_BYTES, check_data_width

__all__ = ["AXIBurstPlanner", "command_layout", "burst_layout"]


def command_layout(address_width, length_width):
    """Payload of a DMA command: a byte ``address`` and a ``length`` in data beats."""
    return data.StructLayout({"address": address_width, "length": length_width})


def burst_layout(address_width, max_burst):
    """Payload of one planned burst: byte ``address``, ``beats`` (1..max_burst), ``final`` of its command."""
    return data.StructLayout({"address": address_width, "beats": range(max_burst + 1), "final": 1})


class AXIBurstPlanner(Parameterized, wiring.Component):
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
    back_to_back : bool
        Also take the next command in the cycle the final burst of the one being cut is
        taken, so that commands of one burst each are taken one per cycle (False: one per two
        cycles). ``cmd.ready`` then depends on ``burst.ready`` through a gate or two.

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout))
        Commands; taken one at a time (``ready`` is low while a command is being cut, except,
        with ``back_to_back``, in the cycle its final burst is taken).
    burst : Out(stream.Signature(burst_layout))
        Bursts in address order; ``final`` marks the last burst of a command.
    busy : Out(1)
        A command is being cut.

    Notes
    -----
    Latency: a command taken at one clock edge offers its first burst after that edge.
    Throughput: one burst per cycle; a command costs one cycle more than its bursts, or,
    with ``back_to_back``, none more while the next command waits on ``cmd``.
    The offered burst comes straight from registers, and so does the length limit of the
    burst after it, so a handshake moves each register through one short chain; the page
    arithmetic of a new command is done as it is taken.
    """

    PARAMS = (
        Param("address_width", int, 64, "byte address width", minimum=12, maximum=64),
        Param("data_width", int, 512, "beat width in bits (power of two)", minimum=8, maximum=1024),
        Param("max_burst", int, 64, "longest burst in beats", minimum=1, maximum=256),
        Param("length_width", int, 32, "width of the command beat count", minimum=1, maximum=32),
        Param("back_to_back", bool, False, "take a command as the final burst of the one before leaves"),
    )

    def __init__(self, *, address_width=64, data_width=512, max_burst=64, length_width=32,
                 back_to_back=False):
        self._data_width = check_data_width(data_width, 8)
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

        index_bits = (page_beats - 1).bit_length()

        def near_end_at(index, skip=0):
            """Whether a burst from beat ``index + skip`` of a page is cut short by the page's end."""
            # Compared with a constant beside the subtraction, not after it: one level less.
            # (Comparisons that are constant for this geometry are folded: Verilator rejects them.)
            threshold = page_beats - cap - skip
            return C(threshold < 0) if not 0 <= threshold < page_beats - 1 else index > threshold

        def limit_at(beat_in_page, skip=0):
            """The longest burst allowed from beat ``beat_in_page + skip`` of a page (``beat_in_page``
            taken modulo the page, ``skip`` a constant that stays within it)."""
            index = beat_in_page[:index_bits]
            return Mux(near_end_at(index, skip), page_beats - skip - index, cap)

        # The burst on offer is held in registers, and so is the length limit of the burst
        # after it: a handshake then moves each register through one short chain, where it
        # used to chain the page arithmetic, the length comparison and the address addition.
        active = Signal()
        address = Signal(self._address_width)
        remaining = Signal(self._length_width)     # beats of the command from the offered burst on
        # Two bursts span at most 2 * cap beats, so whether the burst after the offered one
        # ends the command is decided on the low `low` bits of `remaining`, given `small`:
        # remaining < 2 ** low, kept as a register and updated from the bits before the
        # subtraction rather than after it.
        low = (2 * cap).bit_length()
        small = Signal()
        beats = Signal(range(cap + 1))
        final = Signal()
        next_limit = Signal(range(cap + 1))        # the next burst's length if it does not end the command
        # Where the next burst starts within its page (the offered burst's start plus its beats),
        # kept in a register so that the limit of the burst after it adds two terms, not three.
        next_start = Signal(index_bits)

        m.d.comb += [
            self.cmd.ready.eq(~active | (final & self.burst.ready) if self._back_to_back else ~active),
            self.busy.eq(active),
            self.burst.valid.eq(active),
            self.burst.payload.address.eq(address),
            self.burst.payload.beats.eq(beats),
            self.burst.payload.final.eq(final),
        ]

        with m.If(self.cmd.valid & self.cmd.ready):
            length = self.cmd.payload.length
            start = self.cmd.payload.address[beat_bytes_log2:12]
            limit = limit_at(start)
            # length <= min(cap, room) as two comparisons side by side, not one after the minimum.
            short = (length <= cap) if cap < 2 ** self._length_width - 1 else C(1)
            # Given `short` the count fits in cap's bits: the page comparison is that narrow.
            ends = short & (length[:cap.bit_length()] <= page_beats - start)
            m.d.sync += [
                active.eq(length != 0),
                address.eq(Cat(C(0, beat_bytes_log2), self.cmd.payload.address[beat_bytes_log2:])),
                remaining.eq(length),
                small.eq(length[low:] == 0 if low < self._length_width else 1),
                beats.eq(Mux(ends, length, limit)),
                final.eq(ends),
                # The burst after the first starts at the next page (limit cap) or cap beats on.
                next_limit.eq(Mux(start >= page_beats - cap, cap, limit_at(start, skip=cap))
                              if cap < page_beats else cap),
                # A first burst that does not end the command runs to its limit: to the page's end
                # (the next page's beat 0) or cap beats on.
                next_start.eq(Mux(near_end_at(start[:index_bits]), 0, start[:index_bits] + cap)),
            ]
        advance = self.burst.valid & self.burst.ready
        if self._back_to_back:
            # A command taken as the final burst leaves loads the registers (above); the advance,
            # written after it, would override that, and the finished command needs none.
            advance &= ~(final & self.cmd.valid)
        with m.If(advance):
            ends = small & (remaining[:low] <= beats + next_limit)
            m.d.sync += [
                address.eq(address + (beats << beat_bytes_log2)),
                remaining.eq(remaining - beats),
                small.eq(self._still_small(remaining, low, beats)),
                beats.eq(Mux(ends, remaining[:low] - beats, next_limit)),
                final.eq(ends),
                next_limit.eq(limit_at(next_start + next_limit)),
                next_start.eq(next_start + next_limit),
            ]
            with m.If(final):
                m.d.sync += active.eq(0)
        return m


    def _still_small(self, remaining, low, beats):
        """``remaining - beats < 2 ** low``, from the bits of ``remaining`` before the subtraction."""
        if low >= self._length_width:
            return C(1)  # the whole count is below 2 ** low
        high = remaining[low:]
        return (high == 0) | ((high == 1) & (remaining[:low] < beats))


register_block(
    "axi_burst_planner", AXIBurstPlanner, family="bus",
    summary="Cuts (address, beats) commands into AXI4 INCR bursts: <= max_burst beats, no 4 KB crossing.",
    golden="golden.bus.bursts:cut_commands",
    drops=NO_DROPS,
)
