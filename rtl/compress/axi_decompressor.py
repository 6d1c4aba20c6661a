"""The fused-mode front end with its memory port: chunked pairs read from DRAM, dense chunks out."""

import dataclasses

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4Signature
from ..bus.axi_burst_reader import AXIBurstReader
from ..registration import Param, Parameterized, register_block
from .chunk_decompressor import ChunkDecompressor, decompressor_ports
from .chunk_parser import ERROR_NAMES, errors_layout
from .layouts import WORD_WIDTH, dense_layout, feed_wire

__all__ = ["AXIChunkDecompressor", "transfer_layout"]


def transfer_layout(address_width):
    """One transfer command: byte ``address`` and wire ``words`` of the stream, shard ``size``, ``sorted``."""
    return data.StructLayout({"address": address_width, "words": 32, "size": 32, "sorted": 1})


class AXIChunkDecompressor(Parameterized, wiring.Component):
    """Reads a chunked Top-K wire stream from memory and streams the dense gradient out.

    An :class:`~rtl.bus.axi_burst_reader.AXIBurstReader` reads the ``words`` 64-bit wire words at
    ``address`` (``lanes`` words per ``64 * lanes``-bit beat, word 0 in the low bits, as the
    little-endian wire format lays them out) and feeds them, ``count`` and ``last`` added, into a
    :class:`~rtl.compress.chunk_decompressor.ChunkDecompressor`. The memory port only reads the
    pair stream: it never reads or writes a dense gradient (the AW and W channels are tied off), so
    the DRAM traffic of fused-mode decompression is the pair stream's bytes, rounded up to whole
    beats. The output is the dense-chunk stream of the decompressor, for an updater's gradient
    input.

    Parameters
    ----------
    lanes : int
        Wire words per beat (and scatter lanes): 1, 2, 4, 8 or 16; the AXI data width is
        ``64 * lanes`` bits (512 for ``lanes`` = 8).
    chunk_size, value_format, banks, out_lanes, bank_writes, queue_depth
        As :class:`~rtl.compress.chunk_decompressor.ChunkDecompressor`.
    address_width, max_burst, max_outstanding : int
        As :class:`~rtl.bus.axi_burst_reader.AXIBurstReader`.

    Attributes
    ----------
    cmd : In(stream.Signature(transfer_layout(address_width)))
        One transfer per command: the stream's byte ``address`` (beat aligned), its length in
        ``words``, the shard ``size`` and the ``sorted`` promise. Taken only while no transfer is
        being parsed. ``words`` = 0 is an empty transfer (every chunk's header is ``missing``).
    o : Out(stream.Signature(dense_layout(out_lanes)))
        Dense chunks, as :class:`~rtl.compress.chunk_decompressor.ChunkDecompressor`.
    m_axi : Out(AXI4Signature(address_width, 64 * lanes))
        Memory port (reads only).
    errors, status : Out
        The decompressor's counters and sticky bits of the current or last transfer.
    read_error : Out(1), read_error_resp : Out(2)
        Sticky: a read response was SLVERR/DECERR, and its code (see the burst reader: the rest
        of the stream then reads as zero words, so the transfer still ends; its counters are
        then whatever those words mean). Cleared by ``clear`` while idle.
    clear : In(1)
    scatter_overflow : Out(1)
        Sticky until reset: the scatter engine's bank queue overflowed and lost an update (its
        ``overflow``; never raised unless its credit accounting is broken).
    busy : Out(1)
        Reading, parsing, scattering or streaming out.
    done : Out(1)
        Pulse: the transfer is parsed and ``errors`` is final (the decompressor's ``done``).

    Notes
    -----
    Throughput: one beat (``lanes`` words) per cycle when memory keeps up, else as
    :class:`~rtl.compress.chunk_decompressor.ChunkDecompressor`. Latency: the reader's (AR two
    cycles after the command) plus the decompressor's.

    Reset: ``rst`` may cut a transfer at any cycle if it resets the memory side of ``m_axi``
    too (AXI's shared ARESETn): the bursts in flight are dropped at both ends and the next
    command starts clean (the chunk buffers are zeroed first, ``busy`` high). A reset of the
    block alone while a read burst is open is not supported (its R beats would still come);
    without a shared reset, reset it only while ``busy`` is low.
    """

    PARAMS = (
        # The decompressor's, but for what a lane is here.
        dataclasses.replace(ChunkDecompressor.PARAMS[0],
                            help="64-bit wire words per AXI beat (data width 64 * lanes)"),
        *ChunkDecompressor.PARAMS[1:],
        Param("address_width", int, 64, "byte address width", minimum=12, maximum=64),
        Param("max_burst", int, 64, "longest read burst in beats", minimum=1, maximum=256),
        Param("max_outstanding", int, 4, "read bursts in flight", minimum=2, maximum=64),
    )

    def __init__(self, *, lanes=8, chunk_size=1024, value_format="f32", banks=16, out_lanes=16, bank_writes=3,
                 queue_depth=8, address_width=64, max_burst=64, max_outstanding=4):
        self._decompressor = ChunkDecompressor(lanes=lanes, chunk_size=chunk_size, value_format=value_format,
                                               banks=banks, out_lanes=out_lanes, bank_writes=bank_writes,
                                               queue_depth=queue_depth)
        self._reader = AXIBurstReader(address_width=address_width, data_width=WORD_WIDTH * lanes, id_width=1,
                                      max_burst=max_burst, max_outstanding=max_outstanding, length_width=32)
        super().__init__({
            "cmd": In(stream.Signature(transfer_layout(address_width))),
            "o": Out(stream.Signature(dense_layout(out_lanes))),
            "m_axi": Out(AXI4Signature(address_width=address_width, data_width=WORD_WIDTH * lanes,
                                       id_width=1)),
            "errors": Out(errors_layout()),
            "status": Out(len(ERROR_NAMES)),
            "scatter_overflow": Out(1),
            "read_error": Out(1),
            "read_error_resp": Out(2),
            "clear": In(1),
            "busy": Out(1),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self._lanes
        m.submodules.reader = reader = self._reader
        m.submodules.decompressor = decompressor = self._decompressor
        wiring.connect(m, reader.m_axi, wiring.flipped(self.m_axi))
        wiring.connect(m, decompressor.o, wiring.flipped(self.o))

        running = Signal()          # a transfer was taken and its parse has not finished
        size = Signal(32)
        sorted_ = Signal()
        remaining = Signal(32)      # wire words still to hand to the decompressor
        empty = Signal()            # words = 0: one synthetic empty beat with `last` ends the transfer
        command_valid = Signal()
        command = Signal(reader.cmd.payload.shape())

        m.d.comb += self.cmd.ready.eq(~running)
        with m.If(self.cmd.valid & self.cmd.ready):
            words = self.cmd.payload.words
            m.d.sync += [
                running.eq(1), size.eq(self.cmd.payload.size), sorted_.eq(self.cmd.payload.sorted),
                remaining.eq(words), empty.eq(words == 0),
                command_valid.eq(words != 0),
                command.address.eq(self.cmd.payload.address),
                # ceil(words / lanes) beats; lanes is a power of two.
                command.length.eq((words + (lanes - 1)) >> (lanes - 1).bit_length()),
            ]
        m.d.comb += [reader.cmd.valid.eq(command_valid), reader.cmd.payload.eq(command)]
        with m.If(reader.cmd.valid & reader.cmd.ready):
            m.d.sync += command_valid.eq(0)
        with m.If(decompressor.done):
            m.d.sync += running.eq(0)

        feed_wire(m, reader.data, decompressor.i, remaining, empty, lanes, empty_valid=1)

        m.d.comb += [
            *decompressor_ports(decompressor, self, size, sorted_),
            self.read_error.eq(reader.error),
            self.read_error_resp.eq(reader.error_resp),
            reader.clear.eq(self.clear),
            self.busy.eq(running | reader.busy | decompressor.busy),
        ]
        return m


register_block(
    "topk_axi_decompressor", AXIChunkDecompressor, family="compress",
    summary="Fused-mode Top-K front end with an AXI4 read master: chunked pairs in DRAM -> dense f32 lanes.",
    golden="golden.compress.scatter:scatter_stream",
    drops={
        "errors": ("pairs dropped by the parser: five 40-bit saturating counters (out_of_range, "
                   "chunk_violation, unsorted, excess_pairs, missing)"),
        "read_error": "sticky: a read answered SLVERR/DECERR (the rest of the stream reads as zero)",
        "scatter_overflow": "sticky: a scatter bank queue (fed on credit) lost an update",
    },
)
