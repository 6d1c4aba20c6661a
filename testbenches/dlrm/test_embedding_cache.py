"""The embedding cache: hit/miss sequence and rows bit-exact with golden.dlrm's LRU, under stalls.

Zipf and uniform traces of row lookups go through the cache with random pauses on every AXI
channel of the HBM model, random gaps on the lookup and update streams and backpressure on the
row lines; every line (its row, tag, hit flag and data) and the hit, miss and bad-index counters
must equal the golden's. Out-of-range lookups and updates are dropped and counted; updates are
written through to HBM and into the cached copy; a reset in the middle of a lookup leaves a
cold cache.
"""

import cocotb
import pytest
from cocotb.triggers import ClockCycles

from scripts.sim import knobs
from scripts.sim.devices.dlrm import throughput_session
from scripts.sim.runner import params_from_env, run_cocotb
from testbenches.collective.tb import parametrize_shapes, rejects_at_elaboration
from testbenches.dlrm.tb import BASE, LINE_BYTES, CacheTB, zipf_rows


@cocotb.test()
@cocotb.parametrize(stall=[0.0, 0.3])
async def zipf_trace_matches_the_golden_lru(dut, stall):
    tb = CacheTB(dut, stall=stall, salt=int(stall * 10))
    await tb.reset()
    rows = zipf_rows(knobs.vectors(1500), rows=tb.rows, salt=int(stall * 10))
    board = tb.lookups(rows)
    assert 0 < tb.golden.hits < len(rows), "the trace must both hit and miss"
    await tb.check(board, len(rows))
    if tb.params.get("mshrs", 1) > 1:
        assert board.overtaken > 0, "no row left before an earlier lookup's: hits never passed a miss"


@cocotb.test()
async def uniform_trace_with_bad_indexes(dut):
    tb, rng = await CacheTB.ready(dut, stall=0.2, salt=20)
    span = 4 * tb.golden.sets * tb.golden.ways
    rows = [int(r) for r in rng.integers(0, span, knobs.vectors(800))]
    for position in rng.choice(len(rows), len(rows) // 20, replace=False):
        rows[position] = tb.rows + int(rng.integers(0, 1000))
    board = tb.lookups(rows)
    assert tb.expected_bad > 0
    await tb.check(board, len(rows))


@cocotb.test()
async def updates_write_through(dut):
    tb, rng = await CacheTB.ready(dut, stall=0.2, salt=30)
    warm = zipf_rows(knobs.vectors(300), rows=tb.rows, salt=32)
    await tb.check(tb.lookups(warm), len(warm))
    # Half the updates hit cached rows, half do not; a few are out of range.
    present = [row for row in set(warm) if tb.golden.find(row) is not None]
    targets = [int(rng.choice(present)) if k % 2 else int(rng.integers(0, tb.rows)) for k in range(60)]
    targets[7] = tb.rows + 3
    for row in targets:
        tb.update(row, int(rng.integers(0, tb.lines)), int.from_bytes(rng.bytes(LINE_BYTES), "little"))
    await tb.wait_until(lambda: int(tb.dut.updates.value) == len(targets) - 1, cycles=tb.bound(len(targets)),
                        what="updates written through")
    again = list(dict.fromkeys(targets[:-1])) + warm[:100]
    again = [row for row in again if row < tb.rows]
    await tb.check(tb.lookups(again), len(again))
    memory = tb.ram.read(BASE, len(tb.image))
    assert memory == bytes(tb.image), f"HBM differs from the written-through image; {knobs.describe()}"


@cocotb.test()
async def reset_in_the_middle_of_a_lookup(dut):
    tb, rng = await CacheTB.ready(dut, stall=0.3, salt=40)
    tb.lookups(zipf_rows(200, rows=tb.rows, salt=42))

    def fetching():
        return int(tb.dut.m_axi__arvalid.value) or int(tb.dut.m_axi__rvalid.value)

    await tb.reset_mid_transfer(rng, after=(10, 80), drivers=tb.drivers, until=fetching)
    tb.cold()
    # The cache sweeps its sets after reset before it takes lookups; the rows queue meanwhile.
    rows = zipf_rows(knobs.vectors(400), rows=tb.rows, salt=43)
    await tb.check(tb.lookups(rows), len(rows))


@cocotb.test()
async def misses_to_one_row_merge(dut):
    """Runs of lookups of one cold row: one HBM read each run (``check`` counts the beats read against
    the golden's misses), the first lookup a miss and the others hits, every lookup answered."""
    tb, rng = await CacheTB.ready(dut, stall=0.2, salt=70)
    runs = [int(row) for row in rng.choice(tb.rows, 24, replace=False)]
    rows = [row for row in runs for _ in range(int(rng.integers(2, 6)))]
    await tb.check(tb.lookups(rows), len(rows))
    assert tb.golden.misses == len(runs)


@cocotb.test()
async def pending_ways_are_kept(dut):
    """The ways of rows still being read. In a few sets: ``ways - 1`` rows, a new row P, the same
    rows again (hits, merged into their reads, which make P's way the oldest) and a new row Q, back
    to back: Q's miss must not claim P's way before P's lookup has its row. Then a miss of a new
    row and, while its read is in flight, an update of it: the update must not be overwritten by
    the fill (the lookups after it return the updated row)."""
    tb, rng = await CacheTB.ready(dut, salt=80)
    sets, ways = tb.golden.sets, tb.golden.ways
    rows = []
    for home in rng.choice(sets, min(sets, 6), replace=False):
        others = [int(home) + k * sets for k in range(1, ways)]
        rows += others + [int(home) + ways * sets] + others + [int(home) + (ways + 1) * sets]
    await tb.check(tb.lookups(rows), len(rows))
    row = int(rng.integers(2 * ways * sets, tb.rows))
    board = tb.lookups([row])
    await ClockCycles(tb.clock, 3)  # the lookup taken, its read in flight
    tb.update(row, tb.lines - 1, int.from_bytes(rng.bytes(LINE_BYTES), "little"))
    tb.lookups([row, row], board)
    await tb.check(board, 3)
    assert int(tb.dut.updates.value) == 1


@cocotb.test()
async def throughput_at_hit(dut):
    """One row line per cycle while lookups hit (the bench's session, at the test's length). With
    MSHRs and one-line rows, misses overlap: on the Zipf trace (mostly misses) at least 80 % of
    ``min(mshrs / 9, 1 / 2)`` lookups per cycle, since a miss takes about 9 cycles from lookup to
    row out with the bench's HBM model; the cap 1/2 stays below the 0.72 to 0.74 that the bench
    measures with 8 and 16 MSHRs (the reader's planner takes a row read per cycle then)."""
    result = await throughput_session(dut, {"lookups": knobs.vectors(400)})
    params = params_from_env()
    mshrs = params.get("mshrs", 1)
    if mshrs > 1 and params.get("dim", 16) == 16:
        zipf = result["Zipf (3,900 rows, alpha 1.05)"]
        rate, floor = zipf["lookups"] / zipf["cycles"], 0.8 * min(mshrs / 9, 1 / 2)
        assert rate >= floor, f"Zipf trace: {rate:.3f} lookups per cycle < {floor:.3f}; {knobs.describe()}"


@cocotb.test()
async def long_zipf_trace(dut):
    """10^5 lookups (``NEARTRAIN_VECTORS``) of a Zipf trace under stalls: the LRU sequence holds."""
    tb = CacheTB(dut, stall=0.1, salt=60)
    await tb.reset()
    rows = zipf_rows(knobs.vectors(100_000), rows=tb.rows, salt=61)
    await tb.check(tb.lookups(rows), len(rows))


FAST_TESTS = ["zipf_trace_matches_the_golden_lru", "uniform_trace_with_bad_indexes", "updates_write_through",
              "reset_in_the_middle_of_a_lookup", "misses_to_one_row_merge", "pending_ways_are_kept",
              "throughput_at_hit"]

SHAPES = {
    "mshrs4": {"sets": 16, "ways": 4, "mshrs": 4},
    "ways4": {"sets": 16, "ways": 4},
    "ways1": {"sets": 64, "ways": 1},
    "ways2": {"sets": 32, "ways": 2},
    "ways8": {"sets": 8, "ways": 8},
    "dim64": {"sets": 16, "ways": 4, "dim": 64},
    "mshrs2_ways1": {"sets": 64, "ways": 1, "mshrs": 2},
    "mshrs16_dim64": {"sets": 8, "ways": 8, "dim": 64, "mshrs": 16},
}
# One build in make test (a minute each): the non-blocking cache; the blocking one (mshrs=1, every
# way count), the multi-line row and the other MSHR counts in make test-full.
SLOW_SHAPES = {"ways4", "ways1", "ways2", "ways8", "dim64", "mshrs2_ways1", "mshrs16_dim64"}


@parametrize_shapes(SHAPES, SLOW_SHAPES)
def test_embedding_cache(shape):
    run_cocotb("embedding_cache", __name__, params=SHAPES[shape], testcase=FAST_TESTS)


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["ways4", "mshrs4"])
def test_embedding_cache_long_zipf_trace(shape):
    run_cocotb("embedding_cache", __name__, params=SHAPES[shape], testcase="long_zipf_trace")


@pytest.mark.parametrize("mshrs", [0, 3, 32])
def test_mshrs_outside_its_choices_is_an_elaboration_error(mshrs):
    rejects_at_elaboration("embedding_cache", {"mshrs": mshrs}, r"mshrs must be one of 1, 2, 4, 8, 16")
