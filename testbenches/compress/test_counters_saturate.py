"""The parser's error counters saturate: driven past their limit they stop at all ones, never wrap.

The counters are 40 bits wide (2**40 words would take hours of simulation), so this builds a
:class:`rtl.compress.chunk_parser.ChunkParser` with 4-bit counters (``counter_width``, a
constructor knob) in ``amaranth.sim`` and sends it transfers whose golden counts
(:func:`golden.compress.scatter_stream`) exceed 15: a header that declares 2**32 - 1 pairs and
then ends (``missing`` jumps past the limit in one step), and 40 pairs in the wrong chunk, 40 out
of range and 40 unsorted (counted one by one). Each counter must read ``min(golden, 15)``, and
its status bit must be set.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden.compress import encode_pairs, scatter_stream
from golden.compress.registers import ERROR_NAMES
from rtl.compress.chunk_parser import ChunkParser

LIMIT = 15
CHUNK = 8


def _words(chunks):
    """A chunked stream: per chunk, a header with its declared count and then its pair words."""
    words = []
    for declared, indices in chunks:
        words.append(np.uint64(declared))
        values = np.ones(len(indices), np.float32)
        words += list(encode_pairs(np.asarray(indices, np.int64), values, value_format="f32"))
    return np.asarray(words, np.uint64)


def _parse(words, size, sorted_):
    dut = ChunkParser(lanes=1, chunk_size=CHUNK, value_format="f32", counter_width=4)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    out = {}

    async def bench(ctx):
        ctx.set(dut.size, size)
        ctx.set(dut.sorted, sorted_)
        ctx.set(dut.o.ready, 1)
        for index, word in enumerate(words):
            ctx.set(dut.i.payload.words[0], int(word))
            ctx.set(dut.i.payload.count, 1)
            ctx.set(dut.i.payload.last, int(index == len(words) - 1))
            ctx.set(dut.i.valid, 1)
            while not ctx.get(dut.i.ready):
                await ctx.tick()
            await ctx.tick()
        ctx.set(dut.i.valid, 0)
        for _ in range(20 * CHUNK + 100):
            if ctx.get(dut.done):
                break
            await ctx.tick()
        else:
            raise AssertionError("no done pulse")
        await ctx.tick()
        out["errors"] = {name: ctx.get(getattr(dut.errors, name)) for name in ERROR_NAMES}
        out["status"] = ctx.get(dut.status)

    sim.add_testbench(bench)
    sim.run()
    return out["errors"], out["status"]


CASES = {
    # Chunk 0 declares 2**32 - 1 pairs, and the transfer ends: every one is missing, and chunk 1's header.
    "missing": ([(0xFFFFFFFF, [])], 2 * CHUNK, 0),
    # 40 pairs of chunk 0 whose index lies in chunk 1: chunk violations.
    "chunk_violation": ([(40, [CHUNK + 1] * 40), (0, [])], 2 * CHUNK, 0),
    # A short last chunk (size 12): 40 pairs past the shard's end in it.
    "out_of_range": ([(0, []), (40, [CHUNK + 6] * 40)], CHUNK + 4, 0),
    # 41 pairs that go down and up within chunk 0, promised sorted: 40 unsorted.
    "unsorted": ([(41, [3, 1] * 20 + [3]), (0, [])], 2 * CHUNK, 1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_error_counter_stops_at_its_limit(case):
    chunks, size, sorted_ = CASES[case]
    words = _words(chunks)
    _dense, golden = scatter_stream(words, size, value_format="f32", chunk_size=CHUNK,
                                    sorted_within_chunk=bool(sorted_))
    assert getattr(golden, case) > LIMIT, f"the {case} transfer must pass the 4-bit limit"
    errors, status = _parse(words, size, sorted_)
    assert errors == {name: min(getattr(golden, name), LIMIT) for name in ERROR_NAMES}
    assert status == int(golden.status)
