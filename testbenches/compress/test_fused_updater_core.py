"""``topk_fused_updater_core`` (:class:`rtl.compress.fused_updater_core.FusedUpdaterCore`): cocotb tests
(collected by cocotb) and their pytest runner (at the bottom).

Each run is one optimizer step of a shard whose gradient arrives as a chunked Top-K wire stream
(0.1 %, 1 % or 10 % density, sorted or not, sometimes corrupted). The expected outputs chain the
two golden models: :func:`golden.compress.scatter_stream` rebuilds the dense f32 gradient (and
the error counters), and :func:`golden.optim.host.reference_update` applies the step to it. Every
masked-in lane's parameter, states and 16-bit copy, the counters and both status outputs must
match bit for bit, with random valid gaps on both inputs and random backpressure on the output.
"""

import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge, with_timeout

from golden.compress import scatter_stream
from golden.optim.host import COPY_FORMAT_CODES, STATE_NAMES, reference_update, run_flags, scalar_bits
from golden.optim.vectors import f32_tensor, random_hyper
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, Scoreboard
from testbenches.compress.tb import (
    CLOCK_NS,
    PAUSE_PROBABILITY,
    RATIOS,
    check_cleared,
    check_report,
    collect_reports,
    corrupted_stream,
    random_size,
    stall_salt,
    top_k_stream,
)

MODULE = __name__
DEFAULT_RUNS = 6
CORRUPTIONS = ("out_of_range", "truncated", "unsorted", "duplicates")


class FusedTB(ClockedTB):
    def __init__(self, dut, *, idle=False, backpressure=False, salt=0):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params = params_from_env()
        self.optimizer = self.component.optimizer
        self.states = STATE_NAMES[self.optimizer]
        self.lanes, self.wire_lanes = params["lanes"], params["wire_lanes"]
        self.chunk_size, self.value_format = params["chunk_size"], params["value_format"]

        def pauses(offset):
            return random_pauses(knobs.rng(offset + salt), PAUSE_PROBABILITY) if idle else never()

        self.pairs = StreamSource(dut, "pairs", self.clock, stream_layout(self.component, "pairs"),
                                  pause=pauses(100))
        self.state = StreamSource(dut, "state", self.clock, stream_layout(self.component, "state"),
                                  pause=pauses(150))
        self.sink = StreamSink(dut, "o", self.clock, stream_layout(self.component, "o"),
                               backpressure=random_pauses(knobs.rng(200 + salt), PAUSE_PROBABILITY)
                               if backpressure else never())
        self.reports = []
        dut.clear.value = 0
        cocotb.start_soon(collect_reports(self))

    def wire_beats(self, words):
        beats = []
        for start in range(0, max(len(words), 1), self.wire_lanes):
            chunk = [int(word) for word in words[start:start + self.wire_lanes]]
            beats.append({"words": chunk + [0] * (self.wire_lanes - len(chunk)), "count": len(chunk),
                          "last": 0})
        beats[-1]["last"] = 1
        return beats

    async def run(self, rng, words, size, promised_sorted, variant, label):
        scoreboard, states, errors, expected = await self.start(rng, words, size, promised_sorted, variant,
                                                                label)
        reports = len(self.reports)
        self.state.send_many(states)
        self.pairs.send_many(self.wire_beats(words))

        async def receive():
            for _ in range(len(states)):
                item = await self.sink.recv()
                scoreboard.check([lane for k, lane in enumerate(item["lanes"]) if item["mask"] >> k & 1])

        budget = 8 * (len(words) + len(states) + 400)
        await with_timeout(receive(), budget * CLOCK_NS, "ns")
        scoreboard.check_complete()
        assert len(self.reports) == reports + 1, f"{label}: {len(self.reports) - reports} done pulses"
        check_report(self.reports[reports], errors, label)
        nonfinite = int(self.dut.nonfinite.value)
        assert nonfinite == expected["nonfinite"], f"{label}: nonfinite {nonfinite}; {knobs.describe()}"

    async def start(self, rng, words, size, promised_sorted, variant, label):
        """Golden results of one step, its run-level inputs set and ``clear`` pulsed.

        Returns the scoreboard of its outputs, its state beats, the golden counters and the
        golden update.
        """
        hyper = random_hyper(rng, self.optimizer, variant)
        copy_format = COPY_FORMAT_CODES[variant % 3]
        dense, errors = scatter_stream(words, size, value_format=self.value_format,
                                       chunk_size=self.chunk_size, sorted_within_chunk=promised_sorted)
        tensors = {"param": f32_tensor(rng, size, specials=0.02)}
        for name in self.states:
            tensors[name] = f32_tensor(rng, size, scale=1e-3, positive=name != "exp_avg", specials=0.02)
        expected = reference_update(self.optimizer, param=tensors["param"], grad=dense.view(np.uint32),
                                    states={name: tensors[name] for name in self.states}, hyper=hyper,
                                    grad_format="f32", copy_format=copy_format)
        for name, bits in scalar_bits(self.optimizer, hyper).items():
            getattr(self.dut, f"scalars__{name}").value = bits
        for name, value in run_flags(self.optimizer, hyper).items():
            getattr(self.dut, name).value = value
        self.dut.copy_format.value = COPY_FORMAT_CODES.index(copy_format)
        self.dut.size.value = size
        self.dut.sorted.value = int(promised_sorted)
        self.dut.clear.value = 1
        await RisingEdge(self.clock)
        self.dut.clear.value = 0

        scoreboard = Scoreboard(f"fused {self.optimizer} {label} copy {copy_format} {hyper}")
        states = []
        for start in range(0, size, self.lanes):
            count = min(self.lanes, size - start)
            lanes, outs = [], []
            for k in range(self.lanes):
                index = start + min(k, count - 1)
                lanes.append({name: int(tensors[name][index]) for name in ("param",) + self.states})
                if k < count:
                    out = {name: int(expected[name][index]) for name in ("param",) + self.states}
                    out["param16"] = 0 if expected["param16"] is None else int(expected["param16"][index])
                    outs.append(out)
            states.append({"mask": (1 << count) - 1, "lanes": lanes})
            scoreboard.expect(outs, {"element": start})
        return scoreboard, states, errors, expected


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def steps_bit_exact(dut, idle, backpressure):
    """Optimizer steps on Top-K gradients (well formed and corrupted) equal the chained golden models."""
    salt = stall_salt(idle, backpressure)
    tb = FusedTB(dut, idle=idle, backpressure=backpressure, salt=salt)
    rng = knobs.rng(50 + salt)
    await tb.reset()
    for run in range(knobs.vectors(DEFAULT_RUNS, limit=60)):
        size = random_size(rng, tb.chunk_size, int(rng.integers(1, 5)))
        if run % 2 == 0:
            ratio = RATIOS[run // 2 % len(RATIOS)]
            promised_sorted = bool(rng.random() < 0.5)
            words, *_ = top_k_stream(rng, size, tb.chunk_size, ratio, tb.value_format, promised_sorted)
            label = {"run": run, "ratio": ratio, "size": size, "sorted": promised_sorted}
        else:
            kind = CORRUPTIONS[run // 2 % len(CORRUPTIONS)]
            words, promised_sorted = corrupted_stream(rng, kind, size, tb.chunk_size, tb.value_format)
            label = {"run": run, "kind": kind, "size": size, "sorted": promised_sorted}
        await tb.run(rng, words, size, promised_sorted, 4 * salt + run, label)


@cocotb.test()
async def reset_mid_run(dut):
    """Reset in the middle of a step, under stalls; the next step equals the chained golden models, alone.

    Each round starts a step (wire stream and state beats with random valid gaps, random
    backpressure on the output) and raises reset at a random cycle at which wire and state
    beats have been taken and outputs are still due (gradient sums in the chunk buffers,
    results in the core's pipeline). Right after the reset the counters, status bits and
    ``nonfinite`` read 0. Then a new step must give exactly its golden outputs, counters and
    one ``done`` (nothing of the cut step, no extra beat), within a cycle bound.
    """
    tb = FusedTB(dut, idle=True, backpressure=True, salt=9)
    rng = knobs.rng(90)
    await tb.reset()
    for round_ in range(3):
        size = random_size(rng, tb.chunk_size, 4)
        words, *_ = top_k_stream(rng, size, tb.chunk_size, 0.1, tb.value_format, False)
        scoreboard, states, _, _ = await tb.start(rng, words, size, False, round_, {"cut": round_})
        marks = (tb.state.sent, tb.pairs.sent, tb.sink.received, len(states))
        tb.state.send_many(states)
        tb.pairs.send_many(tb.wire_beats(words))

        def step_open(marks=marks):
            state, pairs, received, due = marks
            return tb.state.sent > state and tb.pairs.sent > pairs and tb.sink.received - received < due

        # Once both streams flow, the step stays open at least one cycle per state beat due.
        await tb.wait_until(step_open, cycles=20 * (len(states) + len(words)) + 1000, what="the step's start")
        await tb.reset_mid_transfer(rng, after=(1, len(states) // 2), drivers=[tb.pairs, tb.state, tb.sink],
                                    until=step_open)
        check_cleared(dut, f"round {round_}", "nonfinite")
        size = random_size(rng, tb.chunk_size, int(rng.integers(1, 4)))
        words, *_ = top_k_stream(rng, size, tb.chunk_size, RATIOS[round_], tb.value_format, True)
        await tb.run(rng, words, size, True, 3 + round_, {"round": round_, "after": "reset", "size": size})
        await tb.cycles(50)
        assert tb.sink.empty(), f"round {round_}: an extra output {tb.sink.queue[0]}; {knobs.describe()}"


# ---- pytest runner ----


@pytest.mark.parametrize("params", [
    {"optimizer": "adam", "lanes": 1, "wire_lanes": 4, "chunk_size": 32, "banks": 4, "value_format": "f16"},
    pytest.param({"optimizer": "sgd", "lanes": 2, "wire_lanes": 8, "chunk_size": 64, "banks": 8,
                  "value_format": "f32"}, marks=pytest.mark.slow),
], ids=lambda p: "{optimizer}-M{lanes}-L{wire_lanes}-S{chunk_size}-{value_format}".format(**p))
def test_fused_updater_core(params):
    run_cocotb("topk_fused_updater_core", MODULE, params=params)
