"""``topk_scatter`` (:class:`rtl.compress.scatter.ScatterEngine`): cocotb tests (collected by
cocotb) and their pytest runners (at the bottom).

Chunks of every index pattern of :func:`golden.compress.adversarial_indices` (plus unsorted indices
with duplicates, and empty chunks) stream through back to back, with holes in the pair slots and
random valid gaps and backpressure; every output beat must equal :func:`golden.compress.scatter` of
its chunk bit for bit. ``throughput`` counts clock cycles for one long chunk at full rate (the
session of the host device :mod:`scripts.sim.devices.compress` that ``bench_compress.py`` runs).
"""

import cocotb
import numpy as np
import pytest
from cocotb.triggers import with_timeout

from golden.compress import adversarial_indices
from scripts.sim import channel, knobs
from scripts.sim.devices.compress import EngineTB, chunk_beats, scatter_throughput
from scripts.sim.runner import params_from_env, run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.compress.tb import (
    CLOCK_NS,
    check_rejected,
    dense_beats,
    engine_id,
    engine_params,
    random_values,
)

MODULE = __name__
DEFAULT_CHUNKS = 12
KINDS = ("random", "same_bank", "same_index", "consecutive", "unsorted", "empty")


def chunk_indices(rng, kind, length, banks, limit):
    """Indices of one chunk of ``length`` elements following ``kind`` (at most ``limit`` pairs)."""
    if kind == "empty":
        return np.zeros(0, np.int64)
    if kind == "unsorted":  # uniform with replacement: duplicates anywhere, in random order
        return rng.integers(0, length, rng.integers(0, limit + 1)).astype(np.int64)
    capacity = {"same_bank": length // banks, "same_index": limit}.get(kind, length)
    if kind == "same_bank" and capacity == 0:
        return np.zeros(0, np.int64)
    return adversarial_indices(kind, int(rng.integers(1, min(capacity, limit) + 1)), length, banks, rng)


def random_chunk(tb, rng, chunk, scoreboard):
    """Chunk number ``chunk`` of a sequence (its pattern from ``KINDS``): its golden beats go to
    ``scoreboard``; returns its input beats and a cycle budget for it."""
    kind = KINDS[chunk % len(KINDS)]
    length = tb.chunk_size if rng.random() < 0.6 else int(rng.integers(1, tb.chunk_size + 1))
    indices = chunk_indices(rng, kind, length, tb.banks, 3 * tb.chunk_size)
    values = random_values(rng, len(indices), tb.value_format)
    expected = dense_beats(indices, values, length, tb.out_lanes)
    scoreboard.expect_many(expected, [{"chunk": chunk, "kind": kind, "beat": n}
                                      for n in range(len(expected))])
    beats = chunk_beats(rng, indices, values, length, tb.lanes, hole_probability=0.2)
    return beats, len(beats) + len(indices) * 6 + len(expected)


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def chunks_bit_exact(dut, idle, backpressure):
    """Back-to-back chunks of every pattern, bit-exact against golden scatter, under stalls."""
    tb, rng = await EngineTB.started(dut, idle, backpressure, salt=0)
    scoreboard = Scoreboard("topk_scatter o")
    words = 0
    for chunk in range(knobs.vectors(DEFAULT_CHUNKS, limit=120)):
        beats, cost = random_chunk(tb, rng, chunk, scoreboard)
        tb.source.send_many(beats)
        words += cost

    async def drain():
        for _ in range(scoreboard.pending):
            scoreboard.check(await tb.sink.recv())

    await with_timeout(drain(), (4 * words + 2 * tb.chunk_size + 1000) * CLOCK_NS, "ns")
    await tb.cycles(50)
    while not tb.sink.empty():
        scoreboard.check(tb.sink.queue.popleft())
    scoreboard.check_complete()
    assert not dut.busy.value, "busy stays high after the last chunk"


@cocotb.test()
async def throughput(dut):
    """Cycles for one chunk of pairs at full rate; the caller's job names the pattern (default random).

    The session :func:`scripts.sim.devices.compress.scatter_throughput` that ``bench_compress``
    runs, on NEARTRAIN_VECTORS pairs (half a chunk by default); every output beat checked.
    """
    length = params_from_env()["chunk_size"]
    await scatter_throughput(dut, {"kind": channel.job() or "random",
                                   "pairs": knobs.vectors(length // 2, limit=length)})


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset while chunks scatter and drain, under stalls; the next chunks equal golden, alone.

    Each round sends three chunks with random valid gaps and backpressure and raises reset at
    a random cycle at which pair beats have been taken and output beats are still due (sums
    sit in the chunk buffers). After the reset the engine zeroes both buffers (``i.ready``
    low), then two new chunks must come out exactly as golden scatter makes them (nothing of
    the cut chunks' sums, no extra beat), within a cycle bound, and ``busy`` must fall.
    """
    tb = EngineTB(dut, idle=True, backpressure=True, salt=5)
    rng = knobs.rng(40)
    await tb.reset()
    for round_ in range(3):
        cut = Scoreboard("cut chunks")
        beats = [beat for chunk in range(3) for beat in random_chunk(tb, rng, chunk, cut)[0]]
        sent, received, due = tb.source.sent, tb.sink.received, cut.pending
        tb.source.send_many(beats)

        def chunk_open(sent=sent, received=received, due=due):
            return tb.source.sent > sent and tb.sink.received - received < due

        await tb.reset_mid_transfer(rng, after=(1, 150), drivers=[tb.source, tb.sink], until=chunk_open)
        scoreboard = Scoreboard(f"topk_scatter o, round {round_} after reset")
        cost = 0
        for chunk in range(2):
            beats, words = random_chunk(tb, rng, 3 * round_ + chunk, scoreboard)
            tb.source.send_many(beats)
            cost += words
        await tb.expect_from(tb.sink, scoreboard, cycles=4 * cost + 2 * tb.chunk_size + 1000, settle=50)
        assert not dut.busy.value, f"busy stays high after the chunks; {knobs.describe()}"


# ---- pytest runners ----


@pytest.mark.parametrize("params", [
    engine_params(4, 8, 64, 4),
    pytest.param(engine_params(1, 2, 32, 2, "f16", bank_writes=1), marks=pytest.mark.slow),
    pytest.param(engine_params(8, 16, 128, 8, "f16"), marks=pytest.mark.slow),
    pytest.param(engine_params(16, 32, 256, 16), marks=pytest.mark.slow),
    pytest.param(engine_params(4, 4, 32, 1, queue_depth=2), marks=pytest.mark.slow),
], ids=engine_id)
def test_scatter_engine(params):
    run_cocotb("topk_scatter", MODULE, params=params)


@pytest.mark.filterwarnings("ignore::amaranth.hdl._ir.UnusedElaboratable")
def test_parameters_are_validated():
    from rtl.compress.scatter import ScatterEngine

    check_rejected(ScatterEngine, [
        ({"lanes": 3}, "lanes"),
        ({"banks": 12}, "banks must be a power of two"),
        ({"banks": 16, "chunk_size": 16}, "chunk_size"),
        ({"banks": 8, "out_lanes": 16}, "out_lanes"),
    ])
