"""``chunk_sequencer``'s guards, in ``amaranth.sim`` (quick, no Verilator build):

* the configuration is copied at ``start``: changing every field while busy changes no command;
* a ``start`` while busy is ignored and counted in ``ignored_starts``;
* a ``start`` with an enabled tensor of ``chunk_beats == 0`` issues nothing and is counted in
  ``refused_starts`` (``golden.optim.transfers.chunk_schedule`` refuses such a run too);
* both counters saturate at their limit (a 2-bit ``counter_width``).

The expected commands come from :func:`golden.optim.transfers.chunk_schedule`.
"""

import pytest
from amaranth.sim import Simulator

from golden.optim.transfers import chunk_schedule
from rtl.optim.chunk_sequencer import ChunkSequencer

DATA_WIDTH, ADDRESS_WIDTH = 32, 16
CONFIGS = [{"address": 0x100, "beats": 5, "chunk_beats": 2, "tail_strobe": 0x3, "enable": 1},
           {"address": 0x200, "beats": 3, "chunk_beats": 1, "tail_strobe": 0x7, "enable": 1}]
OTHER = [{"address": 0x900, "beats": 7, "chunk_beats": 3, "tail_strobe": 0x1, "enable": 1},
         {"address": 0xA00, "beats": 1, "chunk_beats": 4, "tail_strobe": 0x5, "enable": 0}]


def _drive(ctx, dut, configs):
    for port, config in zip(dut.config, configs, strict=True):
        for name, value in config.items():
            ctx.set(getattr(port, name), value)


def _simulate(script, counter_width=32):
    """Run ``script(ctx, dut, take)`` where ``take(cycles)`` clocks with cmd.ready high and returns
    the commands taken; returns what the script returns."""
    dut = ChunkSequencer(tensors=2, address_width=ADDRESS_WIDTH, data_width=DATA_WIDTH,
                         counter_width=counter_width)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    out = {}

    async def bench(ctx):
        async def take(cycles, *, start=False):
            commands = []
            ctx.set(dut.cmd.ready, 1)
            ctx.set(dut.start, int(start))
            for _ in range(cycles):
                if ctx.get(dut.cmd.valid):
                    payload = ctx.get(dut.cmd.payload)
                    commands.append({"tensor": payload.tensor, "address": payload.address,
                                     "length": payload.length, "strobe": payload.strobe})
                await ctx.tick()
                ctx.set(dut.start, 0)
            return commands

        out["result"] = await script(ctx, dut, take)

    sim.add_testbench(bench)
    sim.run()
    return out["result"]


def _golden(configs):
    return chunk_schedule(configs, data_width=DATA_WIDTH, address_width=ADDRESS_WIDTH)


def test_config_changes_and_starts_while_busy_are_ignored():
    async def script(ctx, dut, take):
        _drive(ctx, dut, CONFIGS)
        commands = await take(3, start=True)
        _drive(ctx, dut, OTHER)          # the host rewrites everything mid-run ...
        commands += await take(1, start=True)   # ... and starts again
        commands += await take(30)
        return commands, ctx.get(dut.ignored_starts), ctx.get(dut.busy)

    commands, ignored, busy = _simulate(script)
    assert commands == _golden(CONFIGS), "a config change or start while busy changed the run"
    assert ignored == 1 and busy == 0


def test_start_with_chunk_beats_zero_is_refused_and_counted():
    async def script(ctx, dut, take):
        _drive(ctx, dut, [{**CONFIGS[0], "chunk_beats": 0}, CONFIGS[1]])
        refused = await take(20, start=True)
        # A disabled tensor's chunk_beats does not matter; a good run afterwards is untouched.
        _drive(ctx, dut, [{**CONFIGS[0], "chunk_beats": 0, "enable": 0}, CONFIGS[1]])
        good = await take(20, start=True)
        return refused, good, ctx.get(dut.refused_starts)

    refused, good, count = _simulate(script)
    with pytest.raises(ValueError, match="chunk_beats"):
        _golden([{**CONFIGS[0], "chunk_beats": 0}, CONFIGS[1]])
    assert refused == [] and count == 1
    assert good == _golden([{**CONFIGS[0], "enable": 0}, CONFIGS[1]])


def test_refusal_counters_saturate():
    async def script(ctx, dut, take):
        _drive(ctx, dut, [{**CONFIGS[0], "chunk_beats": 0}, CONFIGS[1]])
        for _ in range(5):
            await take(1, start=True)
        _drive(ctx, dut, OTHER)
        await take(1, start=True)        # a long run: the next five starts find it busy
        for _ in range(5):
            await take(1, start=True)
        return ctx.get(dut.refused_starts), ctx.get(dut.ignored_starts)

    refused, ignored = _simulate(script, counter_width=2)
    assert (refused, ignored) == (3, 3), "2-bit counters must stop at 3, not wrap"
