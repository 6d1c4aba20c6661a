"""AXI4 read DMA: streams (address, beats) commands out of memory as data beats."""

from amaranth.hdl import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import stream
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import Out

from ..registration import NO_GOLDEN, register_block
from .axi import PAGE_BYTES, drive_address_constants
from .axi_dma import AXIDMAEngine, beat_layout, dma_params

__all__ = ["AXIBurstReader", "STRAY_COUNTER_BITS"]

STRAY_COUNTER_BITS = 16


class AXIBurstReader(AXIDMAEngine):
    """Read DMA engine: each command ``(address, length)`` becomes ``length`` beats on ``data``.

    Commands are cut into INCR bursts by :class:`AXIBurstPlanner` (at most ``max_burst``
    beats, never across a 4 KB boundary; addresses are beat-aligned, their low bits are
    ignored; a command of length 0 is dropped). Up to ``max_outstanding`` read bursts are
    in flight at once, all with ID 0, so the data returns in order.

    Buffering is credit based: a burst is issued on AR only when the output buffer has room
    for all its beats, counting the beats of bursts already in flight. R is therefore never
    stalled by the engine (``rready`` stays high), whatever the consumer does; a slow
    consumer throttles AR instead. The buffer holds ``max_outstanding * min(max_burst,
    4096 // beat bytes)`` beats, plus the one of the output register behind it.

    Errors: the first SLVERR or DECERR response latches ``error`` and its code in
    ``error_resp`` (sticky until ``clear``). From then on no AR is issued; the bursts
    already in flight are drained; and every remaining beat of every command (the rest
    of the failing burst, the bursts in flight behind it, the unissued part of the
    command and any later command) is delivered as zero data with the normal ``last``
    flags. So a command always yields exactly ``length`` beats and a consumer counting
    beats never hangs; the beats before the first failing one are the memory contents.

    Stray beats: the reader counts the beats of each burst itself (``arlen + 1``) and ends it on
    the last one, whatever ``rlast`` says. An R beat while no burst is open (unsolicited, or
    one more than a burst's length) is taken and dropped, never delivered, and counted in
    ``stray_beats``; a beat whose ``rlast`` disagrees with the count sets ``protocol_error``.
    (A beat too many for a burst that another burst follows cannot be told from that burst's
    first beat: it is taken as such, and its ``rlast`` sets ``protocol_error``.)
    Neither stops the engine, so a misbehaving subordinate cannot hang it or shift the data
    of a later command by a beat it never asked for.

    Reset: ``rst`` is the AXI reset and must reset the subordinate (interconnect, memory
    controller) too, as AXI's ARESETn does; the bursts it cuts then vanish on both sides
    and the next command runs cleanly. Resetting the engine alone while a burst is open is
    not supported: the R beats still owed would enter the buffer as data of the next
    command. To stop the engine alone, pulse ``cancel`` and wait for ``busy`` to fall.

    Cancel: ``cancel`` (a pulse or a level) stops taking commands, drops the command being
    cut and every buffered beat (nothing more leaves on ``data``), issues no more AR, and
    drains: the R beats still owed to the bursts in flight are taken and dropped (their
    error responses are not latched). ``busy`` falls, with ``done``, once no burst is open;
    the engine is then idle, as after a reset.

    Parameters
    ----------
    address_width, data_width, id_width, max_burst, length_width
        As :class:`~rtl.bus.axi_dma.AXIDMAEngine` documents them.
    max_outstanding : int
        Read bursts in flight at most, 2 to 64.

    Attributes
    ----------
    cmd, error_resp, clear, cancel
        As :class:`~rtl.bus.axi_dma.AXIDMAEngine` documents them (cancel: see above).
    data : Out(stream.Signature(beat_layout(data_width)))
        Beats in command order; ``last`` marks the final beat of each command.
    m_axi : Out(AXI4Signature(address_width, data_width, id_width))
        Memory port. Only AR and R are used: ``awvalid`` and ``wvalid`` are tied low,
        ``bready`` high.
    busy : Out(1)
        A command is being cut, a burst is in flight, or beats wait in the buffer.
    done : Out(1)
        One-cycle pulse when ``busy`` falls: everything accepted has been delivered.
    error : Out(1)
        Sticky: a read response was SLVERR or DECERR.
    stray_beats : Out(16)
        Saturating count of R beats taken while no burst was open, dropped (see above).
    protocol_error : Out(1)
        Sticky (until ``clear``, while idle): an R beat's ``rlast`` did not match its burst's length.

    Notes
    -----
    Latency: the first AR leaves two cycles after the command is taken; a beat taken on R
    is on ``data`` three clock edges later (into the buffer, out of its block RAM, through
    the output register; one edge more than before that register was added). Throughput:
    one beat per cycle when memory and consumer keep up and enough beats are in flight to
    cover the memory latency.

    Timing: ``data`` comes from a register loaded straight from the buffer's read port, with
    no logic between them, because the buffer is block RAM whose read port is slow to its
    output (ECP5 EBR: about 6 ns of the 8 ns at 125 MHz); and the credit count is updated
    by a choice among sums computed before the handshakes are known.
    """

    PARAMS = tuple(dma_params("read bursts in flight"))

    def _ports(self):
        return {"data": Out(stream.Signature(beat_layout(self._data_width))),
                "stray_beats": Out(STRAY_COUNTER_BITS), "protocol_error": Out(1)}

    @property
    def buffer_beats(self):
        """Beats the output buffer holds (the credits available to bursts in flight)."""
        page_beats = PAGE_BYTES // (self._data_width // 8)
        return self._max_outstanding * min(self._max_burst, page_beats)

    def elaborate(self, platform):
        m = Module()
        axi = self.m_axi
        credits_total = self.buffer_beats

        bus_idle = Signal()
        stop, draining = self.cancel_drain(m, bus_idle)
        planner = self.planner(m, stop)
        burst = planner.burst

        # One entry per burst in flight: whether it is the final burst of its command, and its
        # last beat's number (the burst ends on that beat, not on `rlast`).
        m.submodules.inflight = inflight = SyncFIFO(width=9, depth=self._max_outstanding)
        # One spare entry: the buffered FIFO's write side can be full for a cycle while its
        # output register refills, and R must never see that.
        layout = beat_layout(self._data_width)
        buffer = SyncFIFOBuffered(width=layout.size, depth=credits_total + 1)
        # A cancel empties the buffer; held in reset, it drops the R beats of the drain.
        m.submodules.buffer = ResetInserter(stop)(buffer)

        credits = Signal(range(credits_total + 1), init=credits_total)
        busy = Signal()
        r_fire = axi.rvalid & axi.rready
        # A beat belongs to the burst at the head of `inflight`; with none open it is stray.
        open_burst = inflight.r_rdy
        r_take = r_fire & open_burst
        r_beat = Signal(8)
        burst_end = r_beat == inflight.r_data[1:]
        error = self.error_and_status(m, busy, r_take & axi.rresp[1] & ~stop, axi.rresp)
        fill_left = Signal(range(self._max_burst + 1))
        fill_final = Signal()

        drive_address_constants(m, axi, "ar", self._data_width)
        drive_address_constants(m, axi, "aw", self._data_width)
        m.d.comb += [axi.awvalid.eq(0), axi.wvalid.eq(0), axi.bready.eq(1)]

        # AR: a registered request, refilled in the cycle the previous one is accepted.
        ar_free = ~axi.arvalid | axi.arready
        issue = Signal()
        take_fill = Signal()
        m.d.comb += [
            issue.eq(burst.valid & ~error & ~stop & ar_free & inflight.w_rdy
                     & (credits >= burst.payload.beats)),
            # After an error, bursts become zero fill once the real ones have drained, to keep order.
            take_fill.eq(burst.valid & error & ~stop & (fill_left == 0) & ~inflight.r_rdy & ~axi.arvalid),
            burst.ready.eq(issue | take_fill),
            inflight.w_en.eq(issue),
            inflight.w_data.eq(Cat(burst.payload.final, burst.payload.beats - 1)),
        ]
        self.address_request(m, "ar", issue, burst)

        # R: every beat of an open burst goes into the buffer; from the first failure on its data
        # is zeroed. A stray beat is taken (never refused: nothing would ever take it) and dropped.
        m.d.comb += [
            axi.rready.eq(buffer.w_rdy | ~open_burst),
            inflight.r_en.eq(r_take & burst_end),
        ]
        with m.If(r_take):
            m.d.sync += r_beat.eq(Mux(burst_end, 0, r_beat + 1))
        with m.If(r_fire & ~open_burst & ~self.stray_beats.all()):
            m.d.sync += self.stray_beats.eq(self.stray_beats + 1)
        with m.If(r_take & (axi.rlast != burst_end)):
            m.d.sync += self.protocol_error.eq(1)
        with m.Elif(self.clear & ~busy):
            m.d.sync += self.protocol_error.eq(0)

        with m.If(take_fill):
            m.d.sync += [fill_left.eq(burst.payload.beats), fill_final.eq(burst.payload.final)]
        fill_write = Signal()
        m.d.comb += fill_write.eq((fill_left != 0) & (credits != 0))
        with m.If(stop):
            m.d.sync += fill_left.eq(0)
        with m.Elif(fill_write):
            m.d.sync += fill_left.eq(fill_left - 1)

        written = Signal(layout)
        with m.If(fill_write):
            m.d.comb += written.last.eq(fill_final & (fill_left == 1))
        with m.Else():
            m.d.comb += [
                written.data.eq(Mux(error | axi.rresp[1], 0, axi.rdata)),
                written.last.eq(burst_end & inflight.r_data[0]),
            ]
        m.d.comb += [
            buffer.w_en.eq(r_take | fill_write),
            buffer.w_data.eq(written),
        ]

        # The output register: its data input is the read port alone (the load is its clock
        # enable), not a multiplexer as in a skid buffer; a cancel empties it like the buffer.
        held = Signal(layout.size)
        held_valid = Signal()
        m.d.comb += buffer.r_en.eq(~held_valid | self.data.ready)
        out_fire = buffer.r_rdy & buffer.r_en  # a beat leaves the buffer
        with m.If(stop):
            m.d.sync += held_valid.eq(0)
        with m.Elif(out_fire):
            m.d.sync += [held.eq(buffer.r_data), held_valid.eq(1)]
        with m.Elif(self.data.ready):
            m.d.sync += held_valid.eq(0)
        m.d.comb += [
            self.data.valid.eq(held_valid & ~stop),
            self.data.payload.eq(held),
        ]

        # Beats in flight or being filled hold credits; a beat leaving the buffer returns one.
        # Every sum the update may need is formed from registers alone; the late handshakes
        # (`issue`, a beat leaving, a fill beat) only pick one of them.
        left = credits - burst.payload.beats
        with m.If(stop):
            m.d.sync += credits.eq(credits_total)
        with m.Else():
            for spend, start in ((1, left), (0, credits)):
                with m.If(issue == spend):
                    with m.If(out_fire & ~fill_write):
                        m.d.sync += credits.eq(start + 1)
                    with m.Elif(fill_write & ~out_fire):
                        m.d.sync += credits.eq(start - 1)
                    with m.Else():
                        m.d.sync += credits.eq(start)

        # Every burst issued is in `inflight` (from its AR until its last R beat).
        m.d.comb += bus_idle.eq(~inflight.r_rdy)
        m.d.comb += busy.eq(planner.busy | axi.arvalid | inflight.r_rdy | (fill_left != 0)
                            | (buffer.level != 0) | held_valid | draining)
        return m


register_block(
    "axi_burst_reader", AXIBurstReader, family="bus",
    summary="AXI4 read DMA: commands to INCR bursts, credit-buffered beats out, sticky error, no hang.",
    golden=NO_GOLDEN("plumbing: a memory copy over AXI (the burst cut is golden.bus.bursts)"),
    drops={"error": ("sticky: a read answered SLVERR/DECERR; the command's remaining beats are delivered as "
                     "zeros"),
           "stray_beats": "R beats taken while no burst was open, dropped (saturating)",
           "protocol_error": "sticky: an R beat's rlast did not match its burst's length"},
)
