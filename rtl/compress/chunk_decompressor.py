"""The fused-mode front end: chunked Top-K wire stream in, dense f32 gradient lanes out."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import Param, Parameterized, register_block
from .chunk_parser import ERROR_NAMES, ChunkParser, errors_layout
from .layouts import VALUE_FORMAT_PARAM, dense_layout, wire_layout
from .scatter import BANK_QUEUE_PARAM, BANK_WRITES_PARAM, LANE_CHOICES, ScatterEngine

__all__ = ["ChunkDecompressor", "CHUNK_SIZE_PARAM", "decompressor_ports"]

# The chunk size of a block built around a ChunkDecompressor (its scatter's double buffer).
CHUNK_SIZE_PARAM = Param("chunk_size", int, 1024, "elements per chunk (power of two, >= 2 * banks)",
                         minimum=2, maximum=1 << 24)


def decompressor_ports(decompressor, outer, size, sorted_):
    """The statements of a block ``outer`` that wraps the ChunkDecompressor ``decompressor``: its
    ``size`` and ``sorted`` from ``size`` and ``sorted_``, and its ``errors``, ``status``,
    ``scatter_overflow`` and ``done`` on ``outer``'s ports of those names."""
    return [
        decompressor.size.eq(size),
        decompressor.sorted.eq(sorted_),
        outer.errors.eq(decompressor.errors),
        outer.status.eq(decompressor.status),
        outer.scatter_overflow.eq(decompressor.scatter_overflow),
        outer.done.eq(decompressor.done),
    ]


class ChunkDecompressor(Parameterized, wiring.Component):
    """Decompresses a chunked Top-K stream into dense f32 gradient chunks, never touching DRAM.

    A :class:`~rtl.compress.chunk_parser.ChunkParser` checks the wire stream and hands the accepted
    pairs of each chunk to a :class:`~rtl.compress.scatter.ScatterEngine`, which scatter-adds
    them into one of its two on-chip buffers while the previous chunk streams out of the other. The
    output is the shard's dense gradient, chunk after chunk, ``out_lanes`` float32 elements per beat:
    the gradient lane stream of an optimizer updater (see ``docs/compress.md``). The result and the
    error counters are bit-exact with :func:`golden.compress.scatter_stream` (chunked stream).

    Parameters
    ----------
    lanes : int
        64-bit wire words per input beat (8 for a 512-bit AXI-Stream), also the scatter lanes:
        1, 2, 4, 8 or 16.
    chunk_size : int
        Elements per chunk, a power of two, >= ``2 * banks``.
    value_format : {"f32", "f16"}
        Pair value encoding on the wire.
    banks, out_lanes, bank_writes, queue_depth : int
        As :class:`~rtl.compress.scatter.ScatterEngine`.

    Attributes
    ----------
    i : In(stream.Signature(wire_layout(lanes)))
        Wire words, ``words[0:count]`` valid, ``last`` at the end of each shard's transfer.
    o : Out(stream.Signature(dense_layout(out_lanes)))
        Dense chunks: ``ceil(length / out_lanes)`` beats per chunk, ``last`` on each chunk's final
        beat, lanes past the shard's end +0.0.
    size : In(32)
        Shard length; with ``sorted``, sampled when a transfer's first beat arrives.
    sorted : In(1)
        The sender promises non-decreasing indices within each chunk.
    errors : Out(errors_layout())
        The five error counters of the transfer (see :class:`~rtl.compress.chunk_parser.ChunkParser`).
    status : Out(5)
        Sticky error bits at :class:`golden.compress.ScatterStatus` positions.
    scatter_overflow : Out(1)
        Sticky until reset: the scatter engine's bank queue overflowed and lost an update (its
        ``overflow``; never raised unless its credit accounting is broken).
    busy : Out(1)
        Parsing, scattering or streaming out.
    done : Out(1)
        Pulse: the transfer's input is parsed and ``errors`` is final (its last chunks may still be
        streaming out).

    Notes
    -----
    Throughput: the smaller of the wire rate (``lanes`` words per cycle, one cycle more per chunk
    at most), the scatter rate (``docs/compress.md``) and the drain rate (``out_lanes`` elements
    per cycle, the updater's rate). With double buffering the scatter of chunk ``j + 1`` hides
    behind the drain of chunk ``j``.
    """

    PARAMS = (
        Param("lanes", int, 8, "64-bit wire words per input beat (= scatter lanes)", choices=LANE_CHOICES),
        CHUNK_SIZE_PARAM,
        VALUE_FORMAT_PARAM,
        Param("banks", int, 16, "scatter memory banks (power of two, >= out_lanes)", minimum=1, maximum=64),
        Param("out_lanes", int, 16, "f32 elements per output beat", minimum=1, maximum=64),
        BANK_WRITES_PARAM,
        BANK_QUEUE_PARAM,
    )

    def __init__(self, *, lanes=8, chunk_size=1024, value_format="f32", banks=16, out_lanes=16, bank_writes=3,
                 queue_depth=8):
        self._parser = ChunkParser(lanes=lanes, chunk_size=chunk_size, value_format=value_format)
        self._engine = ScatterEngine(lanes=lanes, banks=banks, chunk_size=chunk_size,
                                     value_format=value_format, out_lanes=out_lanes, bank_writes=bank_writes,
                                     queue_depth=queue_depth)
        super().__init__({
            "i": In(stream.Signature(wire_layout(lanes))),
            "o": Out(stream.Signature(dense_layout(out_lanes))),
            "size": In(32),
            "sorted": In(1),
            "errors": Out(errors_layout()),
            "status": Out(len(ERROR_NAMES)),
            "scatter_overflow": Out(1),
            "busy": Out(1),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.parser = parser = self._parser
        m.submodules.engine = engine = self._engine
        wiring.connect(m, wiring.flipped(self.i), parser.i)
        wiring.connect(m, parser.o, engine.i)
        wiring.connect(m, engine.o, wiring.flipped(self.o))
        m.d.comb += [
            parser.size.eq(self.size),
            parser.sorted.eq(self.sorted),
            self.errors.eq(parser.errors),
            self.status.eq(parser.status),
            self.scatter_overflow.eq(engine.overflow),
            self.done.eq(parser.done),
            self.busy.eq(parser.busy | engine.busy),
        ]
        return m


register_block(
    "topk_chunk_decompressor", ChunkDecompressor, family="compress",
    summary="Fused-mode Top-K decompressor: checked chunked pairs -> banked scatter-add -> dense f32 lanes.",
    golden="golden.compress.scatter:scatter_stream",
    drops={
        "errors": ("pairs dropped by the parser: five 40-bit saturating counters (out_of_range, "
                   "chunk_violation, unsorted, excess_pairs, missing)"),
        "scatter_overflow": "sticky: a scatter bank queue (fed on credit) lost an update",
    },
)
