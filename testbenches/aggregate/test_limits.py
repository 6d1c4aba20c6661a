"""The aggregation pipeline's counters at their limit (``amaranth.sim``, no Verilator build).

Built with 2-bit counters, the pipeline is sent ``b_load`` writes past its ``cols`` rows (each is
ignored and counted in ``range_errors``), some of them back to back: the counter must stop at 3
and stay there, never wrap. Fewer events must count exactly, and an in-range write must not count.
"""

import pytest
from amaranth.sim import Simulator

from rtl.aggregate.aggregation_pipeline import AggregationPipeline
from scripts.sim import knobs

COLS = 4


@pytest.mark.parametrize("bad,expected", [(2, 2), (3, 3), (10, 3)])
def test_range_errors_saturate(bad, expected):
    pipeline = AggregationPipeline(lanes=1, features=1, rows=4, cols=COLS, row_bits=2, col_bits=3,
                                   counter_bits=2)
    rng = knobs.rng(bad)
    seen = []

    async def bench(ctx):
        load = pipeline.b_load
        ctx.set(load.payload.addr, 0)  # in range: written, not counted
        ctx.set(load.valid, 1)
        await ctx.tick()
        for _ in range(bad):
            ctx.set(load.payload.addr, int(rng.integers(COLS, 8)))
            ctx.set(load.valid, 1)
            await ctx.tick()
            if rng.random() < 0.5:
                ctx.set(load.valid, 0)
                await ctx.tick()
            seen.append(ctx.get(pipeline.range_errors))
        ctx.set(load.valid, 0)
        await ctx.tick().repeat(2)
        seen.append(ctx.get(pipeline.range_errors))

    sim = Simulator(pipeline)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen[-1] == expected, f"range_errors {seen[-1]} after {bad} bad writes; {knobs.describe()}"
    assert seen == sorted(seen), f"range_errors went down (wrapped): {seen}; {knobs.describe()}"
