"""Paper mode: zero-fill a dense gradient region in DRAM, then scatter-add a flat pair list into it."""

import enum

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4Signature, check_data_width, drive_address_constants
from ..bus.axi_burst_reader import AXIBurstReader
from ..bus.axi_burst_writer import AXIBurstWriter
from ..registration import Param, Parameterized, register_block
from .chunk_parser import ERROR_NAMES, errors_layout
from .dram_rmw import DRAMReadModifyWrite
from .flat_pair_parser import FlatPairParser
from .layouts import VALUE_FORMAT_PARAM, WORD_WIDTH, feed_wire
from .scatter import LANE_CHOICES

__all__ = ["DRAMScatter", "run_layout", "traffic_layout"]

TRAFFIC_WIDTH = 40


def run_layout(address_width):
    """One run command: the dense region, the flat pair stream, the pair-count register, ``sorted``."""
    return data.StructLayout({"dense": address_width, "size": 32, "pairs": address_width, "words": 32,
                              "count": 32, "sorted": 1})


def traffic_layout():
    """Run counters: ``cycles`` busy; R and W beats of the dense port; R beats of the pair port."""
    return data.StructLayout({name: TRAFFIC_WIDTH for name in ("cycles", "dense_reads", "dense_writes",
                                                                "pair_reads")})


class _Phase(enum.Enum):
    IDLE = 0
    ZERO = 1      # AXIBurstWriter writes the whole beats of the region with +0.0
    TAIL = 2      # one strobed write zeroes the elements of a partial last beat
    SCATTER = 3   # read-modify-write of one element per accepted pair


class DRAMScatter(Parameterized, wiring.Component):
    """Smart-Infinity's decompressor in DRAM: zero-fill ``size`` f32 elements, scatter-add the pairs.

    A run (one ``cmd``) has three phases on the dense port ``m_axi_dense``:

    1. **Zero fill.** An :class:`~rtl.bus.axi_burst_writer.AXIBurstWriter` writes +0.0 over the
       ``size // E`` whole beats of the region (``E = data_width // 32`` elements per beat) in full
       bursts; a partial last beat is zeroed by one single-beat write whose strobe covers only the
       ``size % E`` elements inside the region.
    2. **Scatter.** The flat pair stream (the ``words`` 64-bit pair words at ``pairs``, the wire
       format of :mod:`golden.compress.layout`) is read through an
       :class:`~rtl.bus.axi_burst_reader.AXIBurstReader` on ``m_axi_pairs`` (``lanes`` words per
       beat; it starts during the zero fill) and checked by a
       :class:`~rtl.compress.flat_pair_parser.FlatPairParser` against ``size``, the pair-count
       register ``count`` and ``sorted``. Each accepted pair becomes a read-modify-write of its
       element: a single-beat read of the beat holding ``dense[index]``, one f32 RNE add
       (:class:`~rtl.fp.fp_add.FloatAdder`) of the value into that element, and a single-beat write
       whose byte strobe covers only that element.
    3. **Hazards.** Up to ``rmw_depth`` RMWs are in flight. A table holds the element index of each
       from its read until its write response. A pair whose element is in the table waits until
       that entry is retired, so duplicates accumulate in pair order exactly as
       :func:`golden.compress.scatter_stream` (``dense[i] = dense[i] + v``, from +0.0). Pairs on
       other elements of the same beat do not wait: the strobed writes leave neighbours alone.

    The result in DRAM equals ``scatter_stream(words, size, value_format=..., pair_count=count,
    sorted_within_chunk=sorted)`` bit for bit, and ``errors``/``status`` its counters.

    Bad input: a dropped pair is counted (see the parser) and never written; every write lies in
    ``[dense, dense + 4 * size)`` (``dense`` rounded down to a beat; the low address bits are
    ignored, as in the DMA engines). An AXI error response (SLVERR/DECERR) sets ``read_error`` (pair
    stream or RMW read) or ``write_error`` (zero fill or RMW write). From then on no new RMW is
    issued: the rest of the pairs are still read, checked and counted, the RMWs in flight complete
    (a pair whose read failed is not written back), and the run ends with ``done``. The dense region
    is then incomplete, which the sticky bit reports.

    Parameters
    ----------
    lanes : int
        Pair words per beat of ``m_axi_pairs`` (data width ``64 * lanes``): 1, 2, 4, 8 or 16.
    data_width : int
        Width of ``m_axi_dense``, a power of two from 64 to 1024 bits (512 on a SmartSSD).
    value_format : {"f32", "f16"}
        Pair value encoding.
    rmw_depth : int
        RMWs in flight at most (hazard-table entries), a power of two from 2 to 64.
    address_width, max_burst, max_outstanding : int
        As :class:`~rtl.bus.axi_burst_reader.AXIBurstReader` (for the pair reader and the zero-fill
        writer).

    Attributes
    ----------
    cmd : In(stream.Signature(run_layout(address_width)))
        Taken while idle: ``dense`` (byte address, beat aligned) and ``size`` (elements) of the
        region, ``pairs`` (byte address, ``64 * lanes``-bit aligned) and ``words`` of the pair
        stream, the pair-count register ``count`` and the ``sorted`` promise.
    m_axi_dense : Out(AXI4Signature(address_width, data_width))
        Dense region: zero-fill bursts, then single-beat reads and strobed single-beat writes.
    m_axi_pairs : Out(AXI4Signature(address_width, 64 * lanes))
        Pair stream (reads only).
    errors, status : Out
        The parser's counters and sticky bits of the current or last run (cleared when a run starts).
    read_error, write_error : Out(1)
        Sticky AXI errors of the current or last run.
    traffic : Out(traffic_layout())
        ``cycles`` from the command to ``done``; R beats on the dense port (``dense_reads``), W beats
        on it (``dense_writes``), R beats on the pair port (``pair_reads``). Cleared when a run starts.
    busy : Out(1)
    done : Out(1)
        One-cycle pulse: every write of the run has its response, the counters are final.

    Notes
    -----
    Throughput: the zero fill runs at one beat per cycle; the scatter at one pair per cycle at most
    (one read and one write address per pair on one port), less when ``rmw_depth`` does not cover
    the read-add-write latency (about 10 cycles plus twice the memory latency) or pairs repeat an
    element in flight. ``lanes`` sets the pair port's width, not the scatter rate.

    Reset: ``rst`` may cut a run at any cycle if it resets the memory side of both ports too
    (AXI's shared ARESETn): the bursts in flight are dropped at both ends, the counters read 0
    and the next command runs clean; the cut run's region is left partly written. A reset of
    the block alone while a burst is open is not supported (the memory would still answer it,
    or wait for its W beats); without a shared reset, reset it only while ``busy`` is low.
    """

    PARAMS = (
        Param("lanes", int, 8, "pair words per beat of the pair port (data width 64 * lanes)",
              choices=LANE_CHOICES),
        Param("data_width", int, 512, "dense port data width in bits (power of two)",
              minimum=64, maximum=1024),
        VALUE_FORMAT_PARAM,
        Param("rmw_depth", int, 16, "read-modify-writes in flight (power of two)", minimum=2, maximum=64),
        Param("address_width", int, 64, "byte address width", minimum=12, maximum=64),
        Param("max_burst", int, 64, "longest burst in beats", minimum=1, maximum=256),
        Param("max_outstanding", int, 4, "bursts in flight per DMA engine", minimum=2, maximum=64),
    )

    def __init__(self, *, lanes=8, data_width=512, value_format="f32", rmw_depth=16, address_width=64,
                 max_burst=64, max_outstanding=4):
        self._data_width = check_data_width(data_width, 64)
        self._depth = rmw_depth
        if rmw_depth & (rmw_depth - 1):
            raise ValueError(f"rmw_depth must be a power of two, not {rmw_depth}")
        self._reader = AXIBurstReader(address_width=address_width, data_width=WORD_WIDTH * lanes,
                                      max_burst=max_burst, max_outstanding=max_outstanding)
        self._writer = AXIBurstWriter(address_width=address_width, data_width=data_width,
                                      max_burst=max_burst, max_outstanding=max_outstanding)
        super().__init__({
            "cmd": In(stream.Signature(run_layout(address_width))),
            "m_axi_dense": Out(AXI4Signature(address_width=address_width, data_width=data_width)),
            "m_axi_pairs": Out(AXI4Signature(address_width=address_width, data_width=WORD_WIDTH * lanes)),
            "errors": Out(errors_layout()),
            "status": Out(len(ERROR_NAMES)),
            "read_error": Out(1),
            "write_error": Out(1),
            "traffic": Out(traffic_layout()),
            "busy": Out(1),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes, depth = self._lanes, self._depth
        per_beat = self._data_width // 32                  # f32 elements per dense beat
        offset_bits = per_beat.bit_length() - 1
        beat_shift = (self._data_width // 8).bit_length() - 1
        dense = self.m_axi_dense

        m.submodules.reader = reader = self._reader
        m.submodules.writer = writer = self._writer
        m.submodules.parser = parser = FlatPairParser(lanes=lanes, value_format=self._value_format)
        m.submodules.rmw = rmw = DRAMReadModifyWrite(address_width=self._address_width,
                                                     data_width=self._data_width, depth=depth)
        wiring.connect(m, reader.m_axi, wiring.flipped(self.m_axi_pairs))

        phase = Signal(_Phase)
        run = Signal(run_layout(self._address_width))
        base = Signal(self._address_width)                 # region start, beat aligned
        read_error = Signal()
        write_error = Signal()
        halted = read_error | write_error | reader.error | writer.error | rmw.read_error
        start = self.cmd.valid & self.cmd.ready
        full_beats = run.size[offset_bits:]
        tail = run.size[:offset_bits]

        # ---- run start: latch the command, start the pair reader and the zero fill ----
        m.d.comb += self.cmd.ready.eq(phase == _Phase.IDLE)
        reader_cmd_valid = Signal()
        writer_cmd_valid = Signal()
        words_left = Signal(32)            # pair words still to hand to the parser
        empty = Signal()                   # words = 0: one synthetic empty beat ends the transfer
        with m.If(start):
            payload = self.cmd.payload
            m.d.sync += [
                run.eq(payload),
                base.eq(Cat(Const(0, beat_shift), payload.dense[beat_shift:])),
                phase.eq(_Phase.ZERO),
                read_error.eq(0), write_error.eq(0),
                reader_cmd_valid.eq(payload.words != 0),
                writer_cmd_valid.eq(payload.size[offset_bits:] != 0),
                words_left.eq(payload.words), empty.eq(payload.words == 0),
            ]
        m.d.comb += [
            reader.clear.eq(start), writer.clear.eq(start), parser.clear.eq(start),
            reader.cmd.valid.eq(reader_cmd_valid),
            reader.cmd.payload.address.eq(run.pairs),
            # ceil(words / lanes) beats; lanes is a power of two.
            reader.cmd.payload.length.eq((run.words + (lanes - 1)) >> (lanes - 1).bit_length()),
            writer.cmd.valid.eq(writer_cmd_valid),
            writer.cmd.payload.address.eq(base),
            writer.cmd.payload.length.eq(full_beats),
            writer.data.valid.eq(phase == _Phase.ZERO),
            writer.data.payload.eq(0),
        ]
        with m.If(reader.cmd.valid & reader.cmd.ready):
            m.d.sync += reader_cmd_valid.eq(0)
        with m.If(writer.cmd.valid & writer.cmd.ready):
            m.d.sync += writer_cmd_valid.eq(0)

        # ---- pair beats -> wire beats for the parser ----
        feed_wire(m, reader.data, parser.i, words_left, empty, lanes, empty_valid=phase != _Phase.IDLE)
        m.d.comb += [
            parser.size.eq(run.size),
            parser.declared.eq(run.count),
            parser.sorted.eq(run.sorted),
        ]
        parsed = Signal()                  # the parser has taken the last beat
        with m.If(parser.done):
            m.d.sync += parsed.eq(1)

        # ---- the dense port: the writer's AW/W during ZERO, the tail write in TAIL, RMWs after ----
        drive_address_constants(m, dense, "aw", self._data_width)
        drive_address_constants(m, dense, "ar", self._data_width)
        zero = phase == _Phase.ZERO
        in_tail = phase == _Phase.TAIL
        tail_aw, tail_w = Signal(), Signal()
        tail_address = Signal(self._address_width)
        rmw_axi = rmw.m_axi
        tail_values = {
            "awvalid": tail_aw, "awaddr": tail_address, "awlen": 0, "wvalid": tail_w, "wdata": 0, "wlast": 1,
            # +0.0 into the `tail` elements of the partial last beat only.
            "wstrb": (Const(1, len(dense.wstrb) + 1) << (tail << 2)) - 1,
        }
        for name, tail_value in tail_values.items():
            m.d.comb += getattr(dense, name).eq(
                Mux(in_tail, tail_value, Mux(zero, getattr(writer.m_axi, name), getattr(rmw_axi, name))))
        scatter = phase == _Phase.SCATTER
        m.d.comb += [
            dense.bready.eq(1),
            writer.m_axi.awready.eq(zero & dense.awready),
            writer.m_axi.wready.eq(zero & dense.wready),
            writer.m_axi.bvalid.eq(zero & dense.bvalid),
            writer.m_axi.bresp.eq(dense.bresp),
            rmw_axi.awready.eq(scatter & dense.awready),
            rmw_axi.wready.eq(scatter & dense.wready),
            rmw_axi.bvalid.eq(scatter & dense.bvalid),
            rmw_axi.bresp.eq(dense.bresp),
            # Only the RMW unit reads the dense region.
            dense.arvalid.eq(rmw_axi.arvalid),
            dense.araddr.eq(rmw_axi.araddr),
            dense.arlen.eq(rmw_axi.arlen),
            rmw_axi.arready.eq(dense.arready),
            rmw_axi.rvalid.eq(dense.rvalid),
            rmw_axi.rdata.eq(dense.rdata),
            rmw_axi.rresp.eq(dense.rresp),
            rmw_axi.rlast.eq(dense.rlast),
            dense.rready.eq(rmw_axi.rready),
            rmw.base.eq(base),
            rmw.clear.eq(start),
        ]
        with m.If(~zero & dense.bvalid & dense.bresp[1]):
            m.d.sync += write_error.eq(1)
        with m.If(writer.error):
            m.d.sync += write_error.eq(1)
        with m.If(reader.error | rmw.read_error):
            m.d.sync += read_error.eq(1)

        with m.If(zero & (writer.done | ~writer.busy & ~writer_cmd_valid & (full_beats == 0))):
            m.d.sync += phase.eq(_Phase.TAIL)

        tail_sent = Signal()
        with m.If(tail_aw & dense.awready):
            m.d.sync += tail_aw.eq(0)
        with m.If(tail_w & dense.wready):
            m.d.sync += tail_w.eq(0)
        with m.If(in_tail):
            # After a zero-fill error no further write is issued (as the writer itself does).
            with m.If((tail == 0) | (halted & ~tail_sent)):
                m.d.sync += phase.eq(_Phase.SCATTER)
            with m.Elif(~tail_sent):
                m.d.sync += [tail_sent.eq(1), tail_aw.eq(1), tail_w.eq(1),
                             tail_address.eq(base + (full_beats << beat_shift))]
            with m.Elif(dense.bvalid):
                m.d.sync += [tail_sent.eq(0), phase.eq(_Phase.SCATTER)]

        # ---- scatter: checked pairs into the RMW unit; after an error they are dropped ----
        # (The RMW unit keeps no state between valid and ready, so withdrawing a pair there when an
        # error arrives is safe; the parser's own stream still completes the transfer.)
        m.d.comb += [
            rmw.i.valid.eq(scatter & parser.o.valid & ~halted),
            rmw.i.payload.eq(parser.o.payload),
            parser.o.ready.eq(scatter & (rmw.i.ready | halted)),
        ]

        # ---- end of run, status and traffic counters ----
        finished = scatter & parsed & ~parser.o.valid & ~rmw.busy & ~reader.busy
        with m.If(finished):
            m.d.sync += [phase.eq(_Phase.IDLE), parsed.eq(0)]
        m.d.comb += [
            self.done.eq(finished),
            self.busy.eq(phase != _Phase.IDLE),
            self.errors.eq(parser.errors),
            self.status.eq(parser.status),
            self.read_error.eq(read_error),
            self.write_error.eq(write_error),
        ]
        traffic = self.traffic
        with m.If(start):
            m.d.sync += traffic.eq(0)
        with m.Else():
            m.d.sync += [
                traffic.cycles.eq(traffic.cycles + (phase != _Phase.IDLE)),
                traffic.dense_reads.eq(traffic.dense_reads + (dense.rvalid & dense.rready)),
                traffic.dense_writes.eq(traffic.dense_writes + (dense.wvalid & dense.wready)),
                traffic.pair_reads.eq(traffic.pair_reads
                                      + (self.m_axi_pairs.rvalid & self.m_axi_pairs.rready)),
            ]
        return m

register_block(
    "topk_dram_scatter", DRAMScatter, family="compress",
    summary="Paper-mode Top-K decompression: zero-fill a dense f32 region in DRAM, RMW scatter-add of pairs.",
    golden="golden.compress.scatter:scatter_stream",
    drops={
        "errors": ("pairs dropped by the parser: five 40-bit saturating counters (out_of_range, "
                   "chunk_violation, unsorted, excess_pairs, missing)"),
        "read_error": "sticky: a pair or RMW read failed (that pair is not written back)",
        "write_error": "sticky: a zero-fill or RMW write failed (no new RMW starts)",
    },
)
