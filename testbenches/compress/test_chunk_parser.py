"""Tests of ``topk_chunk_parser`` (:class:`rtl.compress.chunk_parser.ChunkParser`).

Each transfer is a chunked wire stream (:func:`golden.compress.encode_stream`), well formed or
corrupted in one of the ways :func:`golden.compress.scatter_checked` defines, cut into beats of
random fill (some with a ``count`` field above ``lanes``) and sent with random valid gaps and
backpressure. The golden model is :func:`golden.compress.parse.parse_chunked` (itself checked
here against :func:`golden.compress.scatter_stream`): every chunk must come out closed by a
``last`` beat with its length, holding exactly the accepted pairs, in order, each in the slot of
its word's lane and with its chunk-relative index and raw value; the five error counters and the
status bits at the ``done`` pulse must equal the golden ones; nothing may hang on bad input.

* ``well_formed``: sparse to dense streams, sorted and unsorted, duplicate indices, empty chunks;
* ``bad_input``: every corruption of the decompressor's tests (out of range, chunk violations,
  unsorted, excess words, truncation, wrong and huge header counts, random words, empty transfers);
* ``reset_mid_transfer``: reset while a transfer streams, then a clean one with nothing left over.

The pytest runners are at the bottom of this file.
"""

import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge, with_timeout

from golden.compress import (
    chunk_count,
    encode_pairs,
    encode_stream,
    group_by_chunk,
    scatter,
    scatter_stream,
)
from golden.compress.parse import parse_chunked
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import CLOCK_PERIOD_NS, Scoreboard
from testbenches.compress.tb import (
    CORRUPTIONS,
    CompressTB,
    check_report,
    collect_reports,
    corrupted_stream,
    corrupted_transfers,
    random_size,
    random_values,
    wait_report,
)

DEFAULT_TRANSFERS = 24


def pair_stream(rng, size, chunk_size, pairs, value_format, promised_sorted):
    """A well-formed chunked stream of ``pairs`` random pairs (duplicate indices allowed) over ``size``."""
    indices = rng.integers(0, size, pairs) if size else np.zeros(0, np.int64)
    values = random_values(rng, len(indices), value_format)
    indices, values, counts = group_by_chunk(indices, values, size=size, chunk_size=chunk_size,
                                             sort_within_chunk=promised_sorted)
    return encode_stream(indices, values, value_format=value_format, counts=counts)


class ChunkCollector:
    """Rebuilds chunks from the parser's output beats: ``{"length", "pairs": [(slot, index, value)]}``."""

    def __init__(self, sink):
        self.sink = sink
        self.chunks = []
        self.open = []
        cocotb.start_soon(self._run())

    def clear(self):
        self.chunks.clear()
        self.open = []

    async def _run(self):
        while True:
            beat = await self.sink.recv()
            for slot, pair in enumerate(beat["pairs"]):
                if pair["valid"]:
                    self.open.append((slot, pair["index"], pair["value"]))
            if beat["last"]:
                self.chunks.append({"length": beat["length"], "pairs": self.open})
                self.open = []


class ParserTB(CompressTB):
    def __init__(self, dut, **kwargs):
        super().__init__(dut, **kwargs)
        params = self.params
        self.lanes, self.chunk_size = params["lanes"], params["chunk_size"]
        self.value_format = params["value_format"]
        self.collector = ChunkCollector(self.sink)
        self.scoreboard = Scoreboard("topk_chunk_parser chunks")
        self.reports = []
        self.drivers = [self.source, self.sink, self.collector]
        cocotb.start_soon(collect_reports(self))

    def beats(self, rng, words, oversized_counts):
        """Wire beats of random fill (mostly full) and the lane of every word; ``last`` on the final beat."""
        count_limit = 1 << self.lanes.bit_length()  # the count field's range, as the layout sizes it
        beats, lanes, position = [], [], 0
        while position < len(words) or not beats:
            fill = self.lanes if rng.random() < 0.7 else int(rng.integers(0, self.lanes + 1))
            chunk = [int(word) for word in words[position:position + fill]]
            position += len(chunk)
            lanes += range(len(chunk))
            count = len(chunk)
            if oversized_counts and count == self.lanes and rng.random() < 0.3:
                count = int(rng.integers(self.lanes, count_limit))  # reads as `lanes`
            beats.append({"words": chunk + [0] * (self.lanes - len(chunk)), "count": count, "last": 0})
        beats[-1]["last"] = 1
        return beats, lanes

    async def transfer(self, rng, words, size, promised_sorted, label, *, oversized_counts=False):
        """Send a transfer, wait (bounded) for its done pulse, check counters and status, queue its chunks."""
        chunks, errors = parse_chunked(words, size, chunk_size=self.chunk_size,
                                       value_format=self.value_format, sorted_within_chunk=promised_sorted)
        beats, lanes = self.beats(rng, words, oversized_counts)
        for number, chunk in enumerate(chunks):
            pairs = [(lanes[at], offset, value) for at, offset, value in chunk["pairs"]]
            self.scoreboard.expect({"length": chunk["length"], "pairs": pairs}, {**label, "chunk": number})
        self.dut.size.value = size
        self.dut.sorted.value = int(promised_sorted)
        reports = len(self.reports)
        self.source.send_many(beats)
        budget = 8 * (len(words) + len(beats) + chunk_count(size, self.chunk_size) + 50)
        await wait_report(self, reports, budget)
        check_report(self.reports[reports], errors, label)
        return len(chunks)

    async def drain(self):
        """Wait (bounded) for every expected chunk, then check that nothing more comes out."""
        async def receive():
            while len(self.collector.chunks) < self.scoreboard.pending:
                await RisingEdge(self.clock)

        await with_timeout(receive(), (4 * self.scoreboard.pending + 200) * CLOCK_PERIOD_NS, "ns")
        await self.cycles(20)
        pairs = sum(len(chunk["pairs"]) for chunk in self.collector.chunks)
        for chunk in self.collector.chunks:
            self.scoreboard.check(chunk)
        self.dut._log.info("checked %d chunks holding %d pairs", len(self.collector.chunks), pairs)
        self.collector.chunks.clear()
        assert not self.collector.open, \
            f"pairs {self.collector.open} after the last chunk; {knobs.describe()}"
        self.scoreboard.check_complete()
        assert not self.dut.busy.value, f"busy stays high after the last transfer; {knobs.describe()}"


def random_transfer(rng, tb, n):
    """Size, promise and words of the ``n``-th well-formed transfer: densities from empty to over-full."""
    chunks = int(rng.integers(1, 6))
    size = random_size(rng, tb.chunk_size, chunks) if n % 5 else int(rng.integers(0, 3))
    density = (0.0, 0.05, 0.3, 1.0, 2.0)[n % 5]
    pairs = int(rng.integers(0, int(density * size) + 2)) if size else 0
    promised_sorted = bool(rng.random() < 0.5)
    words = pair_stream(rng, size, tb.chunk_size, pairs, tb.value_format, promised_sorted)
    return size, promised_sorted, words


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def well_formed(dut, idle, backpressure):
    """Well-formed streams: every pair accepted in its slot, chunks closed with their lengths, no error."""
    tb, rng = await ParserTB.started(dut, idle, backpressure, salt=0)
    for n in range(knobs.vectors(DEFAULT_TRANSFERS, limit=240)):
        size, promised_sorted, words = random_transfer(rng, tb, n)
        await tb.transfer(rng, words, size, promised_sorted,
                          {"transfer": n, "size": size, "sorted": promised_sorted})
    await tb.drain()


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def bad_input(dut, idle, backpressure):
    """Every malformation: dropped pairs, counters and status as golden, remaining chunks closed, no hang."""
    tb, rng = await ParserTB.started(dut, idle, backpressure, salt=10)
    rounds = max(1, knobs.vectors(DEFAULT_TRANSFERS, limit=240) // 6)
    for n, kind, size, words, promised_sorted in corrupted_transfers(rng, tb.chunk_size, tb.value_format,
                                                                      rounds):
        await tb.transfer(rng, words, size, promised_sorted,
                          {"transfer": n, "kind": kind, "size": size, "sorted": promised_sorted},
                          oversized_counts=True)
    await tb.drain()


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset while a transfer streams (under stalls); then clean transfers equal the golden, nothing leaks."""
    tb = ParserTB(dut, idle=True, backpressure=True, salt=30)
    rng = knobs.rng(31)
    await tb.reset()
    for round_ in range(4):
        size = random_size(rng, tb.chunk_size, 4)
        words = pair_stream(rng, size, tb.chunk_size, size // 2 + 8, tb.value_format, bool(round_ % 2))
        beats, _ = tb.beats(rng, words, oversized_counts=False)
        tb.dut.size.value = size
        tb.dut.sorted.value = round_ % 2
        tb.source.send_many(beats)
        cycle = await tb.reset_mid_transfer(rng, after=(2, len(beats)), drivers=tb.drivers)
        assert not tb.dut.busy.value and not tb.dut.status.value, \
            f"round {round_}: busy or status after the reset at cycle {cycle}; {knobs.describe()}"
        for n in range(2):
            size, promised_sorted, words = random_transfer(rng, tb, 1 + n)
            await tb.transfer(rng, words, size, promised_sorted,
                              {"round": round_, "after reset at cycle": cycle, "transfer": n})
        await tb.drain()


# ---------------------------------------------------------------- pytest

MODULE = __name__


def parser(lanes, chunk_size, value_format):
    return {"lanes": lanes, "chunk_size": chunk_size, "value_format": value_format}


@pytest.mark.parametrize("params", [
    parser(4, 16, "f16"),
    parser(1, 2, "f32"),
    parser(8, 1024, "f32"),
    pytest.param(parser(16, 64, "f16"), marks=pytest.mark.slow),
    pytest.param(parser(2, 4096, "f32"), marks=pytest.mark.slow),
], ids=lambda p: "L{lanes}-S{chunk_size}-{value_format}".format(**p))
def test_chunk_parser(params):
    run_cocotb("topk_chunk_parser", MODULE, params=params)


@pytest.mark.slow
def test_chunk_parser_long():
    run_cocotb("topk_chunk_parser", MODULE, params=parser(8, 32, "f32"),
               extra_env={"NEARTRAIN_VECTORS": str(knobs.vectors(300))})


@pytest.mark.parametrize("value_format", ["f32", "f16"])
@pytest.mark.parametrize("chunk_size", [1, 2, 16, 1024])
def test_golden_parse_agrees_with_scatter_stream(value_format, chunk_size):
    """The parser model's counters equal scatter_stream's; scattering its accepted pairs gives its dense."""
    rng = knobs.rng(60 + chunk_size)
    dtype = np.float32 if value_format == "f32" else np.float16
    cases = []
    for n in range(knobs.vectors(60)):
        size = int(rng.integers(0, 6 * chunk_size + 1)) if n % 4 else int(rng.integers(0, 3))
        if n % 2:
            kind = CORRUPTIONS[n // 2 % len(CORRUPTIONS)]
            words, promised_sorted = corrupted_stream(rng, kind, size, chunk_size, value_format)
        else:
            promised_sorted = bool(rng.random() < 0.5)
            words = pair_stream(rng, size, chunk_size, int(rng.integers(0, 2 * size + 2)) if size else 0,
                                value_format, promised_sorted)
        cases.append((words, size, promised_sorted))
    for words, size, promised_sorted in cases:
        chunks, errors = parse_chunked(words, size, chunk_size=chunk_size, value_format=value_format,
                                       sorted_within_chunk=promised_sorted)
        dense, expected = scatter_stream(words, size, value_format=value_format, chunk_size=chunk_size,
                                         sorted_within_chunk=promised_sorted)
        assert errors == expected, f"size {size}: {errors} != {expected}; {knobs.describe()}"
        assert [c["length"] for c in chunks] == \
            [min(chunk_size, size - j * chunk_size) for j in range(chunk_count(size, chunk_size))]
        indices = [j * chunk_size + offset for j, c in enumerate(chunks) for _, offset, _ in c["pairs"]]
        bits = np.array([value for c in chunks for _, _, value in c["pairs"]],
                        np.uint32 if value_format == "f32" else np.uint16)
        ours = scatter(np.array(indices, np.int64), bits.view(dtype), size)
        assert np.array_equal(ours.view(np.uint32), dense.view(np.uint32)), f"size {size}; {knobs.describe()}"


def test_golden_parse_by_hand():
    """A hand-worked stream: size 5 in chunks of 2, every kind of drop, and a truncated last chunk."""
    values = np.arange(1, 9, dtype=np.float32)
    def header(count):
        return np.array([count], np.uint64)

    words = np.concatenate([
        header(2), encode_pairs([1, 0], values[:2], value_format="f32"),      # chunk 0: 1, then 0 (unsorted)
        header(3), encode_pairs([7, 0, 3], values[2:5], value_format="f32"),  # chunk 1: >= size, chunk 0, ok
        header(0),                                                            # chunk 2: empty
    ])
    chunks, errors = parse_chunked(words, 5, chunk_size=2, value_format="f32", sorted_within_chunk=True)
    one, three = int(values[0].view(np.uint32)), int(values[4].view(np.uint32))
    assert chunks == [{"length": 2, "pairs": [(1, 1, one)]}, {"length": 2, "pairs": [(6, 1, three)]},
                      {"length": 1, "pairs": []}]
    assert (errors.out_of_range, errors.chunk_violation, errors.unsorted, errors.excess_pairs,
            errors.missing) == (1, 1, 1, 0, 0)
    # Cut after chunk 1's header and one pair: its two other pairs and chunk 2's header are missing.
    chunks, errors = parse_chunked(words[:5], 5, chunk_size=2, value_format="f32")
    assert [len(c["pairs"]) for c in chunks] == [2, 0, 0] and errors.missing == 3
    assert errors.out_of_range == 1
