"""Tests of ``chunk_sequencer`` (:class:`rtl.optim.chunk_sequencer.ChunkSequencer`).

A run is configured on ``config`` (per tensor: address, beats, chunk_beats, tail strobe, enable)
and started with a ``start`` pulse; the commands on ``cmd`` must equal
:func:`golden.optim.transfers.chunk_schedule` one for one, under random backpressure, and
``busy`` must fall once the last command is taken. Configurations mix disabled tensors, tensors of
zero beats, exact and ragged chunk multiples, chunks longer than the tensor and addresses that
wrap at the top of the address space.

* ``schedules_under_backpressure``: many runs back to back;
* ``start_while_busy_is_ignored``: a ``start`` (and a new configuration) in the middle of a run
  changes nothing and is counted;
* ``reset_mid_transfer``: reset while commands flow, then a clean run with nothing left over.

The pytest runners are at the bottom of this file.
"""

import cocotb
import numpy as np
import pytest
from cocotb.triggers import ReadOnly, RisingEdge, Timer, with_timeout

from golden.bus import random_words
from golden.optim.transfers import chunk_schedule
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, never, pack, random_pauses, stream_layout
from scripts.sim.tb import CLOCK_PERIOD_NS, ClockedTB, Scoreboard

PAUSE = 0.4
DEFAULT_RUNS = 40


class TB(ClockedTB):
    def __init__(self, dut, *, backpressure=False, salt=0):
        super().__init__(dut)
        component = component_from_env()
        params = params_from_env()
        self.tensors = params.get("tensors", 4)
        self.address_width = params.get("address_width", 64)
        self.data_width = params.get("data_width", 512)
        self.config_layout = component.signature.members["config"].shape
        self.sink = StreamSink(dut, "cmd", self.clock, stream_layout(component, "cmd"),
                               backpressure=random_pauses(knobs.rng(200 + salt), PAUSE)
                               if backpressure else never())
        dut.start.value = 0

    def golden(self, configs):
        return chunk_schedule(configs, data_width=self.data_width, address_width=self.address_width)

    async def start(self, configs):
        """Drive ``configs`` and pulse ``start`` for one cycle.

        Returns after the sink has sampled the start edge (a command taken at that edge is
        already in its queue): after that step's read-only phase, before the next edge.
        """
        self.dut.config.value = pack(self.config_layout, configs)
        self.dut.start.value = 1
        await RisingEdge(self.clock)
        self.dut.start.value = 0
        await ReadOnly()
        await Timer(1, "ps")

    def bound(self, commands, configs):
        """Cycles a run may take: one per command plus one per tensor passed over, doubled for stalls."""
        rounds = max([1] + [-(-c["beats"] // max(1, c["chunk_beats"])) for c in configs])
        return 4 * (len(commands) + self.tensors * (rounds + 1)) + 100

    async def run(self, configs, label, *, started=False):
        """One run: start it (unless ``started``), take every command within a cycle bound, check them."""
        expected = self.golden(configs)
        scoreboard = Scoreboard(f"chunk_sequencer cmd ({label})")
        scoreboard.expect_many(expected, [{"run": label, "command": n} for n in range(len(expected))])
        if not started:
            await self.start(configs)

        async def drain():
            for _ in range(len(expected)):
                scoreboard.check(await self.sink.recv())
            while self.dut.busy.value:
                await RisingEdge(self.clock)

        await with_timeout(drain(), self.bound(expected, configs) * CLOCK_PERIOD_NS, "ns")
        await self.cycles(self.tensors + 4)
        while not self.sink.empty():
            scoreboard.check(self.sink.queue.popleft())
        scoreboard.check_complete()
        assert not self.dut.cmd__valid.value, f"{label}: cmd.valid after the run; {knobs.describe()}"

    def random_configs(self, rng, max_commands=60):
        """Random tensor configurations of at most about ``max_commands`` commands in all."""
        beat_bytes = self.data_width // 8
        space = 1 << self.address_width
        configs = []
        for _ in range(self.tensors):
            chunk = int(rng.choice([1, 2, 3, 4, 7, 8, 16, int(rng.integers(1, 1 << 12))]))
            kind = rng.random()
            if kind < 0.1:
                beats = 0
            elif kind < 0.3:
                beats = chunk * int(rng.integers(1, 6))            # an exact multiple of the chunk
            elif kind < 0.4:
                beats = int(rng.integers(1, chunk + 1))             # one chunk, possibly short
            else:
                beats = int(rng.integers(1, chunk * 6 + 1))
            beats = min(beats, chunk * max(1, max_commands // self.tensors))
            if rng.random() < 0.15:  # close below the top: the address wraps during the run
                address = space - int(rng.integers(1, 3 * chunk + 2)) * beat_bytes
            else:
                address = int(rng.integers(0, space // beat_bytes, dtype=np.uint64)) * beat_bytes
            configs.append({"address": address, "beats": beats, "chunk_beats": chunk,
                            "tail_strobe": random_words(rng, 1, beat_bytes)[0],
                            "enable": int(rng.random() < 0.85)})
        return configs


@cocotb.test()
@cocotb.parametrize(backpressure=[False, True])
async def schedules_under_backpressure(dut, backpressure):
    """Random runs back to back, each exactly the golden chunk schedule."""
    tb = TB(dut, backpressure=backpressure, salt=int(backpressure))
    rng = knobs.rng(1 + int(backpressure))
    await tb.reset()
    for run in range(knobs.vectors(DEFAULT_RUNS, limit=400)):
        await tb.run(tb.random_configs(rng), f"run {run}")


@cocotb.test()
async def start_while_busy_is_ignored(dut):
    """A start pulse during a run, with a new configuration, is ignored and counted: the old run
    goes on to its end exactly as configured, and ``ignored_starts`` counts the pulse.

    (Before, such a start abandoned the run, and a configuration changed mid-run changed the
    commands still to come: docs/formal.md's counterexample.)
    """
    tb = TB(dut, backpressure=True, salt=5)
    rng = knobs.rng(6)
    await tb.reset()
    ignored = 0
    for run in range(max(1, knobs.vectors(DEFAULT_RUNS, limit=400) // 2)):
        old = tb.random_configs(rng)
        old_commands = tb.golden(old)
        if len(old_commands) < 2:
            await tb.run(old, f"run {run}")
            continue
        await tb.start(old)
        # At most k + 1 commands are taken by the second start's edge: the run is still busy then.
        await tb.cycles(int(rng.integers(0, len(old_commands) - 1)))
        await tb.start(tb.random_configs(rng))
        ignored += 1
        await tb.run(old, f"run {run} with a start while busy", started=True)
        counted = int(tb.dut.ignored_starts.value)
        assert counted == ignored, f"run {run}: ignored_starts {counted}, not {ignored}; {knobs.describe()}"


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset while commands flow under backpressure; then a clean run equals the golden."""
    tb = TB(dut, backpressure=True, salt=7)
    rng = knobs.rng(8)
    await tb.reset()
    for run in range(max(1, knobs.vectors(DEFAULT_RUNS, limit=400) // 4)):
        doomed = tb.random_configs(rng)
        await tb.start(doomed)
        cycle = await tb.reset_mid_transfer(rng, after=(0, len(tb.golden(doomed)) + 2), drivers=[tb.sink])
        assert not tb.dut.busy.value and not tb.dut.cmd__valid.value, \
            f"run {run}: busy or cmd.valid after the reset at cycle {cycle}; {knobs.describe()}"
        await tb.run(tb.random_configs(rng), f"run {run} after a reset at cycle {cycle}")


# ---------------------------------------------------------------- pytest

MODULE = __name__


def sequencer(tensors, address_width, data_width):
    return {"tensors": tensors, "address_width": address_width, "data_width": data_width}


@pytest.mark.parametrize("params", [
    sequencer(3, 16, 32),
    sequencer(1, 12, 8),
    sequencer(8, 64, 512),
    pytest.param(sequencer(5, 64, 1024), marks=pytest.mark.slow),
], ids=lambda p: "T{tensors}-A{address_width}-D{data_width}".format(**p))
def test_chunk_sequencer(params):
    run_cocotb("chunk_sequencer", MODULE, params=params)


@pytest.mark.slow
def test_chunk_sequencer_long():
    run_cocotb("chunk_sequencer", MODULE, params=sequencer(4, 64, 512),
               extra_env={"NEARTRAIN_VECTORS": str(knobs.vectors(2000))})


def test_golden_schedule_by_hand():
    """The golden schedule on a hand-worked example: chunk order, passing over, tails and wrapping."""
    configs = [
        {"address": 0x100, "beats": 5, "chunk_beats": 2, "tail_strobe": 0x3, "enable": 1},
        {"address": 0x200, "beats": 9, "chunk_beats": 2, "tail_strobe": 0x7, "enable": 0},
        {"address": 0x300, "beats": 0, "chunk_beats": 4, "tail_strobe": 0x1, "enable": 1},
        {"address": 0xFFF8, "beats": 3, "chunk_beats": 1, "tail_strobe": 0x5, "enable": 1},
    ]
    got = [(c["tensor"], c["address"], c["length"], c["strobe"])
           for c in chunk_schedule(configs, data_width=32, address_width=16)]
    assert got == [(0, 0x100, 2, 0xF), (3, 0xFFF8, 1, 0xF),
                   (0, 0x108, 2, 0xF), (3, 0xFFFC, 1, 0xF),
                   (0, 0x110, 1, 0x3), (3, 0x0000, 1, 0x5)]
