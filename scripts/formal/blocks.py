"""Harnesses of particular blocks: the AXI burst planner, the AXI reader and writer, the credit counter."""

from types import SimpleNamespace

from amaranth.hdl import Array, Assert, Assume, C, Cat, Cover, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.axi import PAGE_BYTES
from rtl.bus.axi_burst_planner import AXIBurstPlanner
from rtl.bus.axi_burst_reader import AXIBurstReader
from rtl.bus.axi_burst_writer import AXIBurstWriter
from rtl.optim.credit import credit_depth, credited_pipeline

from .harnesses import COUNT, queue_harness
from .streams import stream_cover, stream_harness, stream_rules

__all__ = ["burst_planner_harness", "CreditedDelay", "credit_harness", "axi_reader_harness",
           "axi_writer_harness"]


def burst_planner_harness(*, planner=AXIBurstPlanner, **params):
    """The planner's bursts cover each command exactly once, in order, by the AXI4 burst rules.

    A model in the harness keeps the next expected address and the beats still uncovered
    of the command taken last, so every burst is checked against what is left of it.

    Parameters
    ----------
    planner : type
        The component class (a broken variant in the tests).
    **params
        ``address_width``, ``data_width``, ``max_burst``, ``length_width``, and optionally
        ``back_to_back`` (then a command may also be taken as the final burst of the one before is).

    Not vacuous: it covers a stall of ``burst`` and a command covered to its final burst.
    """
    max_burst, data_width = params["max_burst"], params["data_width"]
    back_to_back = params.get("back_to_back", False)
    planner = planner(**params)
    m, _inputs, _outputs = stream_harness(planner, cover=True)
    cmd, burst = planner.cmd, planner.burst
    address_width = len(cmd.payload.address)
    beat_bytes_log2 = (data_width // 8).bit_length() - 1
    expect = Signal(address_width)
    left = Signal(len(cmd.payload.length))
    take, fire = cmd.valid & cmd.ready, burst.valid & burst.ready
    with m.If(take):
        covered = (left == 0) | (fire & burst.payload.final) if back_to_back else left == 0
        m.d.comb += Assert(covered, "a command is taken only once the previous one is covered")
        m.d.sync += [expect.eq(Cat(C(0, beat_bytes_log2), cmd.payload.address[beat_bytes_log2:])),
                     left.eq(cmd.payload.length)]
    address, beats = burst.payload.address, burst.payload.beats
    span = beats << beat_bytes_log2
    m.d.comb += [
        Assert(planner.busy == (left != 0), "busy exactly while a command is not covered"),
        Assert(burst.valid == (left != 0), "a burst is offered exactly while a command is not covered"),
    ]
    with m.If(burst.valid):
        m.d.comb += [
            Assert(address == expect, "each burst starts where the previous ended (in order, once)"),
            Assert((beats >= 1) & (beats <= max_burst), "1 <= beats <= max_burst"),
            Assert(beats <= left, "no burst goes past the end of its command"),
            Assert(burst.payload.final == (beats == left), "final marks the burst that ends the command"),
            Assert(address[:12] + span <= PAGE_BYTES, "no burst crosses a 4 KB boundary"),
        ]
    m.d.comb += Cover(fire & burst.payload.final, "a command's final burst taken")
    # With back_to_back the model's take, written above, must win over the final burst's step.
    with m.If(fire & ~take if back_to_back else fire):
        m.d.sync += [expect.eq(expect + span), left.eq(left - beats)]
    return m


class CreditedDelay(wiring.Component):
    """A ``latency``-cycle delay line that cannot stall, behind :func:`credited_pipeline`.

    The simplest pipeline the optimizer datapaths use the credit FIFO for: its result is its
    input, so the tracked token shows whether the credit counter ever lets the FIFO overflow.

    Parameters
    ----------
    width : int
        Payload width in bits.
    latency : int
        Pipeline depth in cycles.
    """

    def __init__(self, *, width=4, latency=2):
        self._latency = latency
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width))})

    def elaborate(self, platform):
        m = Module()
        _issue, result = credited_pipeline(m, i=self.i, o=self.o, latency=self._latency)
        stage = self.i.payload
        for index in range(self._latency):
            delayed = Signal.like(stage, name=f"stage_{index + 1}")
            m.d.sync += delayed.eq(stage)
            stage = delayed
        m.d.comb += result.eq(stage)
        return m


def credit_harness(*, latency, width=2):
    """The credit counter neither under- nor overflows and never refuses an input with credit left.

    The credits are the FIFO entries not promised to a result in flight: the harness asserts
    that ``i.ready`` is high exactly while fewer than ``credit_depth(latency)`` results are
    in flight or queued, and the tracked token that no result is ever dropped (an
    overflowing FIFO would drop one) or invented (an underflow would).
    """
    block = CreditedDelay(width=width, latency=latency)
    # Covered (as every queue harness is): this proof stands in for the stream rules of the
    # updater core's output (the same credited FIFO, 143 cycles behind its input), which no
    # practical bound reaches.
    return queue_harness(block, capacity=credit_depth(latency), valid_when_held=False)


def _address_channel(m, bus, prefix, data_width, max_burst):
    """Assert the AXI rules of the ``ar`` or ``aw`` channel; return its ``len`` and handshake."""
    valid, ready = getattr(bus, f"{prefix}valid"), getattr(bus, f"{prefix}ready")
    fields = Cat(*(getattr(bus, f"{prefix}{name}")
                   for name in ("id", "addr", "len", "size", "burst", "cache", "prot")))
    channel = SimpleNamespace(valid=valid, ready=ready, payload=fields)
    stream_rules(m, channel, f"m_axi.{prefix}", Assert)
    stream_cover(m, channel, f"m_axi.{prefix}")
    address, length = getattr(bus, f"{prefix}addr"), getattr(bus, f"{prefix}len")
    span = (length + 1) << (data_width // 8).bit_length() - 1
    with m.If(valid):
        m.d.comb += [Assert(length < max_burst, f"{prefix}len + 1 <= max_burst"),
                     Assert(address[:12] + span <= PAGE_BYTES, f"{prefix}: no burst crosses a 4 KB boundary")]
    return length, valid & ready


def _burst_lengths(m, length, fire, name):
    """The ``len`` of the last bursts accepted, by burst number modulo 8, and how many were accepted."""
    lengths = Array(Signal(8, name=f"{name}_len_{index}") for index in range(8))
    count = Signal(COUNT, name=f"{name}_bursts")
    with m.If(fire):
        m.d.sync += [lengths[count[:3]].eq(length), count.eq(count + 1)]
    return lengths, count


def _beats_of_bursts(m, valid, ready, last, name):
    """Beat number within the current burst and bursts completed, on a channel with ``last``."""
    beat = Signal(8, name=f"{name}_beat")
    done = Signal(COUNT, name=f"{name}_bursts")
    with m.If(valid & ready):
        m.d.sync += beat.eq(Mux(last, 0, beat + 1))
        with m.If(last):
            m.d.sync += done.eq(done + 1)
    return beat, done


def _dma_harness(component, prefix, params):
    """A DMA block in the stream harness, without cancel, its ``prefix`` address channel checked."""
    dma = component(**params)
    m, _inputs, _outputs = stream_harness(dma, cover=True)
    m.d.comb += Assume(~dma.cancel, "no cancel")
    length, fire = _address_channel(m, dma.m_axi, prefix, params["data_width"], params["max_burst"])
    lengths, accepted = _burst_lengths(m, length, fire, prefix)
    return m, dma, dma.m_axi, lengths, accepted


def axi_reader_harness(**params):
    """The AXI burst reader against a legal memory: AR keeps the AXI rules, and R is never refused.

    The memory answers only bursts it accepted, with ``rlast`` on the ``arlen + 1``-th beat
    (assumed); the reader's credits must then always leave buffer room for every beat
    (``rvalid`` implies ``rready``) and never let more bursts fly than ``max_outstanding``.
    ``cancel`` stays low (a cancel discards on purpose). Not vacuous: the harness covers a
    stall of AR and of ``data``, and two whole bursts read and delivered.
    """
    m, reader, bus, lengths, accepted = _dma_harness(AXIBurstReader, "ar", params)
    beat, answered = _beats_of_bursts(m, bus.rvalid, bus.rready, bus.rlast, "r")
    with m.If(bus.rvalid):
        m.d.comb += [Assume(answered < accepted, "R beats only for accepted bursts"),
                     Assume(bus.rlast == (beat == lengths[answered[:3]]), "rlast on the arlen + 1-th beat"),
                     Assert(bus.rready, "an R beat is never refused (credits reserve its room)")]
    m.d.comb += Assert(accepted - answered <= params["max_outstanding"],
                       "at most max_outstanding bursts in flight")
    m.d.comb += Cover((answered == 2) & reader.data.valid & reader.data.ready,
                      "two bursts answered, data out")
    return m


def axi_writer_harness(**params):
    """The AXI burst writer: AW and W keep the AXI rules, W bursts match ``awlen``, bursts in flight bounded.

    The memory responds on B only to bursts whose AW and last W beat it has seen (assumed).
    ``cancel`` stays low. Not vacuous: the harness covers a stall of AW and of W, and two whole
    bursts written and answered.
    """
    m, _writer, bus, lengths, accepted = _dma_harness(AXIBurstWriter, "aw", params)
    w_channel = SimpleNamespace(valid=bus.wvalid, ready=bus.wready,
                                payload=Cat(bus.wdata, bus.wstrb, bus.wlast))
    stream_rules(m, w_channel, "m_axi.w", Assert)
    stream_cover(m, w_channel, "m_axi.w")
    beat, written = _beats_of_bursts(m, bus.wvalid, bus.wready, bus.wlast, "w")
    _responded = Signal(COUNT)
    with m.If(bus.bvalid & bus.bready):
        m.d.sync += _responded.eq(_responded + 1)
    m.d.comb += Assume(~bus.bvalid | ((_responded < written) & (_responded < accepted)),
                       "B only for bursts whose address and data were taken")
    with m.If(bus.wvalid):
        # W may lead its AW; then the AW on offer is the burst being written.
        with m.If(written < accepted):
            m.d.comb += Assert(bus.wlast == (beat == lengths[written[:3]]), "wlast on the awlen + 1-th beat")
        with m.Else():
            m.d.comb += [Assert(bus.awvalid, "W only for a burst whose AW is offered or taken"),
                         Assert(bus.wlast == (beat == bus.awlen), "wlast on the awlen + 1-th beat")]
    m.d.comb += Assert(accepted - _responded <= params["max_outstanding"],
                       "at most max_outstanding bursts await B")
    m.d.comb += Cover(_responded == 2, "two bursts written and answered")
    return m
