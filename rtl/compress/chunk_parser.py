"""Parser and checker of the chunked wire stream: headers, pairs, and the golden error rules."""

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import Param, Parameterized, check_int, register_block
from .layouts import VALUE_FORMAT_PARAM, scatter_layout, value_width, wire_layout
from .scatter import LANE_CHOICES

__all__ = ["ChunkParser", "ERROR_NAMES", "COUNTER_WIDTH", "errors_layout"]

# Counter order and status bit positions of golden.compress.ScatterStatus.
ERROR_NAMES = ("out_of_range", "chunk_violation", "unsorted", "excess_pairs", "missing")
# Wide enough never to saturate in practice: a transfer would need 2**40 words (8 TB). `missing` alone
# can exceed 2**32 (one header may declare 2**32 - 1 pairs), which 32-bit counters would clip.
COUNTER_WIDTH = 40


def errors_layout(width=COUNTER_WIDTH):
    """The five error counters, ``width`` bits each, in :data:`ERROR_NAMES` order."""
    return data.StructLayout({name: width for name in ERROR_NAMES})


def _saturating_add(counter, increment):
    all_ones = (1 << len(Value.cast(counter))) - 1
    total = counter + increment
    return Mux(total > all_ones, all_ones, total)


def _popcount(bits):
    return sum(bits[i] for i in range(len(bits)))


class ChunkParser(Parameterized, wiring.Component):
    """Turns the chunked wire stream into scatter-stream beats, dropping and counting bad pairs.

    A transfer (up to the beat with ``last``, the AXI-Stream TLAST) is the chunked stream of one
    shard of ``size`` elements (sampled with ``sorted`` on the transfer's first beat): for each of the
    ``ceil(size / chunk_size)`` chunks a header word with the pair count, then the pairs
    (:mod:`golden.compress.layout`). Each cycle the parser takes at most one header, at the start of
    its step, and the pairs of one chunk that follow it in the beat; a chunk therefore costs at most
    one extra cycle. Its output beat keeps every pair in its word's slot.

    Pairs are checked as :func:`golden.compress.scatter_stream` does, and a dropped pair is counted
    once under the first check it fails: excess (a word after the last chunk's pairs), out of range
    (``index >= size``), chunk violation (``index`` outside the header's chunk), unsorted (with
    ``sorted``: below the highest index that passed the earlier checks in this chunk). If the
    transfer ends early, ``missing`` counts the pairs and headers that never arrived, and the
    parser still closes the open chunk and emits every remaining chunk as empty, so the output
    always holds all ``size`` elements and nothing waits for input that will not come.

    Parameters
    ----------
    lanes : int
        Words per wire beat and pair slots per output beat: 1, 2, 4, 8 or 16.
    chunk_size : int
        Elements per chunk, a power of two from 2 to 2**24.
    value_format : {"f32", "f16"}
        Pair value encoding.
    counter_width : int
        Width of each error counter, 1 to :data:`COUNTER_WIDTH` (40, the default); narrower
        ones saturate sooner (for tests). Not a registry parameter.

    Attributes
    ----------
    i : In(stream.Signature(wire_layout(lanes)))
        Wire words: ``words[0:count]`` are valid (a ``count`` above ``lanes`` reads as ``lanes``);
        ``last`` ends the transfer.
    o : Out(stream.Signature(scatter_layout(lanes, log2(chunk_size), value_format)))
        Accepted pairs with chunk-relative indices; ``last`` closes a chunk and gives its length.
    size : In(32)
        Shard length in elements.
    sorted : In(1)
        The sender promises non-decreasing indices within each chunk.
    errors : Out(errors_layout(counter_width))
        Counters of the current or last transfer, ``counter_width`` (40) bits, saturating (they
        stop at all ones), cleared when a transfer starts.
    status : Out(5)
        Sticky bits, :class:`golden.compress.ScatterStatus` positions: a counter is non-zero.
    busy : Out(1)
        A transfer is being parsed.
    done : Out(1)
        One-cycle pulse when a transfer has been parsed; ``errors`` is then final.

    Notes
    -----
    Latency: 1 cycle from a word to its output beat (plus 1 cycle at the start of a transfer).
    Throughput: one beat per cycle, less one cycle per chunk whose header is not the first word
    of the parser's step.
    """

    PARAMS = (
        Param("lanes", int, 8, "64-bit words per wire beat", choices=LANE_CHOICES),
        Param("chunk_size", int, 1024, "elements per chunk (power of two)", minimum=2, maximum=1 << 24),
        VALUE_FORMAT_PARAM,
    )

    def __init__(self, *, lanes=8, chunk_size=1024, value_format="f32", counter_width=COUNTER_WIDTH):
        counter_width = check_int("counter_width", counter_width, 1, COUNTER_WIDTH)
        if chunk_size & (chunk_size - 1):
            raise ValueError(f"chunk_size must be a power of two, not {chunk_size}")
        self._chunk_bits = (chunk_size - 1).bit_length()
        super().__init__({
            "i": In(stream.Signature(wire_layout(lanes))),
            "o": Out(stream.Signature(scatter_layout(lanes, self._chunk_bits, value_format))),
            "size": In(32),
            "sorted": In(1),
            "errors": Out(errors_layout(counter_width)),
            "status": Out(len(ERROR_NAMES)),
            "busy": Out(1),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes, chunk_bits, chunk_size = self._lanes, self._chunk_bits, self._chunk_size
        errors = self.errors

        active = Signal()      # inside a transfer
        flushing = Signal()    # the transfer ended early: emitting the chunks it left open or absent
        # Set with `flushing`: in the next cycle `missing` grows by what the registers then say
        # never arrived (counted from the end's combinational state, this was the ECP5 path, 27.3 MHz).
        count_missing = Signal()
        size = Signal(32)
        sorted_ = Signal()
        chunks = Signal(33 - chunk_bits)      # ceil(size / chunk_size)
        headers = Signal(33 - chunk_bits)     # headers read so far = number of the next chunk
        current = Signal(33 - chunk_bits)     # chunk of the open header
        next_base = Signal(33)                # headers * chunk_size
        in_chunk = Signal()                   # a header's pairs are still expected
        remaining = Signal(32)
        length = Signal(chunk_bits + 1)       # elements of the open chunk
        position = Signal(range(lanes))       # words of the input beat already taken
        previous_valid = Signal()             # sorted check: an index passed in this chunk ...
        previous = Signal(chunk_bits)         # ... and the highest one

        left = size - next_base
        next_length = Mux(left >= chunk_size, chunk_size, left[:chunk_bits + 1])

        advance = ~self.o.valid | self.o.ready
        out = self.o.payload
        words = self.i.payload.words
        # A count field above `lanes` (possible in its bit width unless lanes + 1 is a power of two)
        # reads as `lanes`, so every beat ends. (Verilator rejects the constant comparison otherwise.)
        count = self.i.payload.count
        if (1 << len(count)) - 1 > lanes:
            count = Mux(count > lanes, lanes, count)

        # ---- one parse step on the input beat, from word `position` on ----
        header = Signal()
        m.d.comb += header.eq(~in_chunk & (headers < chunks) & (position < count))
        all_excess = ~in_chunk & (headers >= chunks)
        declared = Mux(header, words[position][:32], remaining)
        open_chunk = in_chunk | header
        start = position + header
        window = Mux(declared > lanes, lanes, declared)  # pairs this step can take at most
        chunk_of_step = Mux(header, headers, current)

        is_pair, excess, in_range, in_own_chunk, offsets = [], [], [], [], []
        for k in range(lanes):
            index = words[k][:32]
            is_pair.append(open_chunk & (k >= start) & (k < count) & (k < start + window))
            # (position <= lanes - 1 always holds; Verilator rejects the constant comparison.)
            at_or_after = (position <= k) if k < lanes - 1 else 1
            excess.append(all_excess & at_or_after & (k < count))
            in_range.append(index < size)
            in_own_chunk.append((index >> chunk_bits) == chunk_of_step)
            offsets.append(index[:chunk_bits])
        pairs = Signal(lanes)
        passed = Signal(lanes)
        m.d.comb += [pairs.eq(Cat(is_pair)),
                     passed.eq(pairs & Cat(in_range) & Cat(in_own_chunk))]
        # Sorted check against the highest passed index: the previous steps' and earlier lanes'.
        previous_live = previous_valid & ~header
        accepted = Signal(lanes)
        in_order = []
        for k in range(lanes):
            earlier = [~passed[i] | (offsets[k] >= offsets[i]) for i in range(k)]
            ordered = Cat(~previous_live | (offsets[k] >= previous), *earlier).all()
            in_order.append(~sorted_ | ordered)
        m.d.comb += accepted.eq(passed & Cat(in_order))

        taken = _popcount(pairs)
        after = Signal(32)
        m.d.comb += after.eq(declared - taken)
        chunk_end = open_chunk & (after == 0)
        new_position = Mux(all_excess, count, start + taken)
        consumed = Signal()
        m.d.comb += consumed.eq(new_position >= count)
        headers_after = headers + header
        open_after = open_chunk & ~chunk_end

        m.d.comb += self.i.ready.eq(advance & active & ~flushing & consumed)
        m.d.sync += self.done.eq(0)
        finish = [active.eq(0), flushing.eq(0), self.done.eq(1)]

        with m.If(advance):
            m.d.sync += self.o.valid.eq(0)
            with m.If(~active):
                with m.If(self.i.valid):
                    chunk_count = (self.size + (chunk_size - 1)) >> chunk_bits
                    m.d.sync += [active.eq(1), size.eq(self.size), sorted_.eq(self.sorted),
                                 chunks.eq(chunk_count), headers.eq(0), next_base.eq(0), in_chunk.eq(0),
                                 position.eq(0), errors.eq(0)]
            with m.Elif(flushing):
                # Close the open chunk, then one empty chunk per absent header.
                m.d.sync += [self.o.valid.eq(1), out.last.eq(1),
                             out.length.eq(Mux(in_chunk, length, next_length))]
                for k in range(lanes):
                    m.d.sync += out.pairs[k].valid.eq(0)
                with m.If(in_chunk):
                    m.d.sync += in_chunk.eq(0)
                    with m.If(headers == chunks):
                        m.d.sync += finish
                with m.Else():
                    m.d.sync += [headers.eq(headers + 1), next_base.eq(next_base + chunk_size)]
                    with m.If(headers + 1 == chunks):
                        m.d.sync += finish
            with m.Elif(self.i.valid):
                m.d.sync += [
                    self.o.valid.eq(accepted.any() | chunk_end),
                    out.last.eq(chunk_end),
                    out.length.eq(Mux(header, next_length, length)),
                    position.eq(Mux(consumed, 0, new_position)),
                    remaining.eq(after),
                    in_chunk.eq(open_after),
                    headers.eq(headers_after),
                ]
                for k in range(lanes):
                    m.d.sync += [out.pairs[k].valid.eq(accepted[k]), out.pairs[k].index.eq(offsets[k]),
                                 out.pairs[k].value.eq(words[k][32:32 + value_width(self._value_format)])]
                with m.If(header):
                    m.d.sync += [current.eq(headers), length.eq(next_length), previous_valid.eq(0),
                                 next_base.eq(next_base + chunk_size)]
                # The highest accepted lane holds the highest passed index (unsorted ones are lower).
                for k in range(lanes):
                    with m.If(accepted[k]):
                        m.d.sync += [previous_valid.eq(1), previous.eq(offsets[k])]
                dropped = {
                    "out_of_range": pairs & ~Cat(in_range),
                    "chunk_violation": pairs & Cat(in_range) & ~Cat(in_own_chunk),
                    "unsorted": passed & ~accepted,
                    "excess_pairs": Cat(excess),
                }
                for name, mask in dropped.items():
                    m.d.sync += errors[name].eq(_saturating_add(errors[name], _popcount(mask)))
                with m.If(consumed & self.i.payload.last):
                    with m.If(open_after | (headers_after < chunks)):
                        m.d.sync += [flushing.eq(1), count_missing.eq(1)]
                    with m.Else():  # nothing is missing
                        m.d.sync += finish
        # The cycle after the end: `in_chunk`, `remaining` and `headers` hold the end's values (the
        # flush updates them at this cycle's edge at the earliest, and finishes no sooner).
        with m.If(count_missing):
            unseen = Mux(in_chunk, remaining, 0) + (chunks - headers)
            m.d.sync += [errors.missing.eq(_saturating_add(errors.missing, unseen)), count_missing.eq(0)]

        m.d.comb += [
            self.status.eq(Cat(errors[name] != 0 for name in ERROR_NAMES)),
            self.busy.eq(active),
        ]
        return m


register_block(
    "topk_chunk_parser", ChunkParser, family="compress",
    summary="Chunked Top-K wire-stream parser: headers, pair checks and error counters per golden.compress.",
    golden="golden.compress.parse:parse_chunked",
    drops={
        "errors": ("pairs dropped by the parser: five 40-bit saturating counters (out_of_range, "
                   "chunk_violation, unsorted, excess_pairs, missing)"),
    },
)
