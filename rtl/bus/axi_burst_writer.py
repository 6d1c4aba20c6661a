"""AXI4 write DMA: writes a data stream to memory as directed by (address, beats) commands."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..registration import NO_GOLDEN, register_block
from .axi import drive_address_constants
from .axi_burst_reader import STRAY_COUNTER_BITS
from .axi_dma import AXIDMAEngine, dma_params
from .skid_buffer import SkidBuffer

__all__ = ["AXIBurstWriter"]

# What the W side needs to know about each burst, queued in AW order.
_W_BURST = data.StructLayout({"last_beat": 8, "discard": 1})


class AXIBurstWriter(AXIDMAEngine):
    """Write DMA engine: each command ``(address, length)`` writes the next ``length`` beats of ``data``.

    Commands are cut into INCR bursts by :class:`AXIBurstPlanner` (at most ``max_burst``
    beats, never across a 4 KB boundary; addresses are beat-aligned, their low bits are
    ignored; a command of length 0 is dropped and consumes no data). An AW is issued while
    fewer than ``max_outstanding`` bursts await their B response; the W beats of each
    burst follow in AW order, whole beats only: ``wstrb`` is all ones (zero only for the
    beats a cancel owes, see below). W goes through a skid buffer, so ``wvalid``,
    ``wdata``, ``wstrb`` and ``wlast`` are registers.

    Errors: a B response of SLVERR or DECERR latches ``error`` and its code in
    ``error_resp`` (sticky until ``clear``). From then on no AW is issued. AXI requires the
    W data of every burst whose AW has been issued, so those bursts are completed with
    their real data and their responses collected. The rest of the data stream that the
    accepted commands cover is consumed and discarded, so the producer never hangs;
    ``done`` pulses when all B responses are back and all covered data is consumed.

    Stray responses: a B response while no burst awaits one (unsolicited, or one more than the
    bursts issued) is taken and dropped, counted in ``stray_responses``; it neither retires a
    burst nor latches ``error``, so the count of bursts awaiting B stays right and nothing hangs.

    Reset: ``rst`` is the AXI reset and must reset the subordinate (interconnect, memory
    controller) too, as AXI's ARESETn does; the bursts it cuts then vanish on both sides
    (the memory may hold any prefix of the beats sent) and the next command runs cleanly.
    Resetting the engine alone while a burst is open is not supported: the subordinate
    would wait forever for the W beats still owed, and count the next bursts' beats into
    the cut ones. To stop the engine alone, pulse ``cancel`` and wait for ``busy`` to fall.

    Cancel: ``cancel`` (a pulse or a level) stops taking commands and ``data``, drops the
    command being cut, issues no more AW, and drains: every burst already issued gets the
    W beats it is still owed, with ``wstrb`` = 0 and zero data (memory unchanged), and its
    B response is collected (error responses are not latched). ``busy`` falls, with
    ``done``, once no burst is open; the engine is then idle, as after a reset. The
    producer of ``data`` is the caller's to flush.

    Parameters
    ----------
    address_width, data_width, id_width, max_burst, length_width
        As :class:`~rtl.bus.axi_dma.AXIDMAEngine` documents them.
    max_outstanding : int
        Write bursts issued and awaiting their B response at most, 2 to 64.

    Attributes
    ----------
    cmd, error_resp, clear, cancel
        As :class:`~rtl.bus.axi_dma.AXIDMAEngine` documents them (cancel: see above).
    data : In(stream.Signature(data_width))
        Beats to write, in command order, with nothing between commands.
    m_axi : Out(AXI4Signature(address_width, data_width, id_width))
        Memory port. Only AW, W and B are used: ``arvalid`` is tied low, ``rready`` high.
    busy : Out(1)
        A command is being cut, a burst's data is being sent or a B response is awaited.
    done : Out(1)
        One-cycle pulse when ``busy`` falls: every accepted command is written (or, after an
        error, discarded) and every response is back.
    error : Out(1)
        Sticky: a write response was SLVERR or DECERR.
    stray_responses : Out(16)
        Saturating count of B responses taken while no burst awaited one, dropped (see above).

    Notes
    -----
    Latency: the first AW leaves two cycles after the command is taken; a data beat is on
    W one cycle after it is accepted. Throughput: one beat per cycle when the producer and
    memory keep up and enough bursts are outstanding to cover the B latency.
    """

    PARAMS = tuple(dma_params("write bursts awaiting B"))

    def _ports(self):
        return {"data": In(stream.Signature(self._data_width)), "stray_responses": Out(STRAY_COUNTER_BITS)}

    def elaborate(self, platform):
        m = Module()
        axi = self.m_axi

        bus_idle = Signal()
        stop, draining = self.cancel_drain(m, bus_idle)
        planner = self.planner(m, stop)
        burst = planner.burst

        m.submodules.bursts = bursts = SyncFIFO(width=_W_BURST.size, depth=self._max_outstanding)
        outstanding = Signal(range(self._max_outstanding + 1))
        busy = Signal()
        # A response retires the oldest burst awaiting one; with none awaiting it is stray.
        b_any = axi.bvalid & axi.bready
        b_fire = b_any & (outstanding != 0)
        error = self.error_and_status(m, busy, b_fire & axi.bresp[1] & ~stop, axi.bresp)
        with m.If(b_any & (outstanding == 0) & ~self.stray_responses.all()):
            m.d.sync += self.stray_responses.eq(self.stray_responses + 1)

        drive_address_constants(m, axi, "aw", self._data_width)
        drive_address_constants(m, axi, "ar", self._data_width)
        m.d.comb += [axi.arvalid.eq(0), axi.rready.eq(1)]

        # AW: a registered request, refilled in the cycle the previous one is accepted. After
        # an error the bursts still pass through the queue, marked to discard their data.
        aw_free = ~axi.awvalid | axi.awready
        issue = Signal()
        discard = Signal()
        queued = Signal(_W_BURST)
        m.d.comb += [
            issue.eq(burst.valid & ~error & ~stop & aw_free & bursts.w_rdy
                     & (outstanding != self._max_outstanding)),
            discard.eq(burst.valid & error & ~stop & bursts.w_rdy),
            burst.ready.eq(issue | discard),
            queued.last_beat.eq(burst.payload.beats - 1),
            queued.discard.eq(error),
            bursts.w_en.eq(issue | discard),
            bursts.w_data.eq(queued),
        ]
        self.address_request(m, "aw", issue, burst)

        # W: beats of the burst at the head of the queue, numbered to place wlast. During a
        # cancel the beats still owed come from a filler instead of `data`: zero, strobes off.
        w_layout = data.StructLayout({"data": self._data_width, "last": 1, "strobe": 1})
        m.submodules.w_register = w_register = SkidBuffer(payload_shape=w_layout)
        head = _W_BURST(bursts.r_data)
        beat = Signal(8)
        is_last = beat == head.last_beat
        beat_valid = Signal()
        take = Signal()
        m.d.comb += [
            beat_valid.eq(stop | self.data.valid),
            take.eq(beat_valid & bursts.r_rdy & (head.discard | w_register.i.ready)),
            w_register.i.valid.eq(beat_valid & bursts.r_rdy & ~head.discard),
            w_register.i.payload.data.eq(Mux(stop, 0, self.data.payload)),
            w_register.i.payload.last.eq(is_last),
            w_register.i.payload.strobe.eq(~stop),
            self.data.ready.eq(bursts.r_rdy & (head.discard | w_register.i.ready) & ~stop),
            axi.wvalid.eq(w_register.o.valid),
            axi.wdata.eq(w_register.o.payload.data),
            axi.wlast.eq(w_register.o.payload.last),
            axi.wstrb.eq(w_register.o.payload.strobe.replicate(len(axi.wstrb))),
            w_register.o.ready.eq(axi.wready),
        ]
        with m.If(take):
            with m.If(is_last):
                m.d.sync += beat.eq(0)
                m.d.comb += bursts.r_en.eq(1)
            with m.Else():
                m.d.sync += beat.eq(beat + 1)

        # B: always accepted; one response per issued burst, in order.
        m.d.comb += axi.bready.eq(1)
        m.d.sync += outstanding.eq(outstanding + issue - b_fire)

        # A burst whose data is in flight on W still awaits its response, so `outstanding` covers W.
        m.d.comb += [
            bus_idle.eq(~axi.awvalid & ~bursts.r_rdy & (outstanding == 0)),
            busy.eq(planner.busy | axi.awvalid | bursts.r_rdy | (outstanding != 0) | draining),
        ]
        return m


register_block(
    "axi_burst_writer", AXIBurstWriter, family="bus",
    summary="AXI4 write DMA: commands plus a data stream to INCR AW/W bursts, B counted, sticky error.",
    golden=NO_GOLDEN("plumbing: a memory copy over AXI (the burst cut is golden.bus.bursts)"),
    drops={"error": ("sticky: a write answered SLVERR/DECERR; the rest of the data its commands cover is "
                     "consumed and discarded"),
           "stray_responses": "B responses taken while no burst awaited one, dropped (saturating)"},
)
