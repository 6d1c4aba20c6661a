"""The SIMD AXPBY block (``axpby``) against ``golden.optim.axpby``: cocotb tests (collected by cocotb)
and their pytest runner (at the bottom).

Each batch picks coefficients (ordinary, zero, negative, subnormal, Inf, NaN), streams
random vectors with random idle cycles on ``i`` and random backpressure on ``o``, and
compares every lane's raw bits with the golden model. A separate test measures that
back-to-back transfers leave one per cycle.
"""

import cocotb
import numpy as np
import pytest
from cocotb.triggers import with_timeout

from golden.optim.axpby import axpby
from golden.optim.vectors import f32_tensor
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, Scoreboard
from testbenches.optim.tb import one_per_cycle, stall_pattern

MODULE = __name__
DEFAULT_VECTORS = 1500
RESET_ROUNDS = 3
COEFFICIENTS = np.array([1.0, 0.9, 0.1, -0.5, 0.0, -0.0, 3.0, 2.0**-140, 1e30, np.inf, np.nan],
                        np.float32).view(np.uint32)


class TB(ClockedTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params_from_env()
        self.lanes = self.params["lanes"]
        self.source = StreamSource(dut, "i", self.clock, stream_layout(self.component, "i"))
        self.sink = StreamSink(dut, "o", self.clock, stream_layout(self.component, "o"))

    def set_coefficients(self, alpha, beta):
        self.dut.alpha.value = int(alpha)
        self.dut.beta.value = int(beta)


def random_batch(tb, rng, transfers):
    """Random coefficients and ``transfers`` operand vectors.

    Returns (alpha, beta, payloads, golden results, inputs for the scoreboard).
    """
    alpha, beta = (int(rng.choice(COEFFICIENTS)) for _ in range(2))
    n = transfers * tb.lanes
    a, b = f32_tensor(rng, n), f32_tensor(rng, n)
    y = axpby(np.uint32(alpha).view(np.float32), a.view(np.float32), np.uint32(beta).view(np.float32),
              b.view(np.float32), fused=tb.params["fused"]).view(np.uint32)
    rows = [slice(t * tb.lanes, (t + 1) * tb.lanes) for t in range(transfers)]
    payloads = [{"a": a[r].tolist(), "b": b[r].tolist()} for r in rows]
    return alpha, beta, payloads, [y[r].tolist() for r in rows], [{"alpha": alpha, "beta": beta, **p}
                                                                    for p in payloads]


async def run_batches(tb, rng, total):
    scoreboard = Scoreboard(f"axpby {tb.params}")
    batches = 4
    for _ in range(batches):
        transfers = max(1, total // batches)
        alpha, beta, payloads, expected, inputs = random_batch(tb, rng, transfers)
        tb.set_coefficients(alpha, beta)
        scoreboard.expect_many(expected, inputs)
        tb.source.send_many(payloads)

        async def drain(count):
            for _ in range(count):
                scoreboard.check(await tb.sink.recv())

        # Coefficients change only between batches, once everything in flight has left.
        await with_timeout(drain(transfers), 10 * (5 * transfers + 500), "ns")
    scoreboard.check_complete()


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def golden_match_under_stalls(dut, idle, backpressure):
    """Random vectors and coefficients; every lane's bits equal golden.optim.axpby."""
    tb = TB(dut)
    salt = stall_pattern(tb, idle, backpressure, hold=0.4)
    await tb.reset()
    await run_batches(tb, knobs.rng(salt), knobs.vectors(DEFAULT_VECTORS) // tb.lanes + 1)


@cocotb.test()
async def one_transfer_per_cycle(dut):
    """Back-to-back input: N transfers leave on N consecutive cycles (II = 1, no credit stall)."""
    tb = TB(dut)
    await tb.reset()
    tb.set_coefficients(COEFFICIENTS[1], COEFFICIENTS[2])
    count = 300
    rng = knobs.rng(7)
    payloads = [{"a": f32_tensor(rng, tb.lanes).tolist(), "b": f32_tensor(rng, tb.lanes).tolist()}
                for _ in range(count)]
    await one_per_cycle(tb, payloads)


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset while results are in flight, under random stalls; the next batch equals golden, alone.

    Each round streams a batch with random idle cycles and backpressure and raises reset at a
    random cycle at which inputs have been taken whose results have not left (the pipeline or
    the credit FIFO holds them). Then a new batch with new coefficients: the output must be
    exactly its golden results (nothing from before the reset, nothing lost), within a cycle bound.
    """
    tb = TB(dut)
    tb.source.set_pause_generator(random_pauses(knobs.rng(301), 0.3))
    tb.sink.set_backpressure_generator(random_pauses(knobs.rng(302), 0.4))
    await tb.reset()
    rng = knobs.rng(300)
    for round_ in range(RESET_ROUNDS):
        alpha, beta, payloads, _, _ = random_batch(tb, rng, 200)
        tb.set_coefficients(alpha, beta)
        sent, received = tb.source.sent, tb.sink.received
        tb.source.send_many(payloads)

        def results_in_flight(sent=sent, received=received):
            return tb.source.sent - sent > tb.sink.received - received

        await tb.reset_mid_transfer(rng, after=(1, 60), drivers=[tb.source, tb.sink], until=results_in_flight)
        alpha, beta, payloads, expected, inputs = random_batch(tb, rng, 100)
        tb.set_coefficients(alpha, beta)
        scoreboard = Scoreboard(f"axpby {tb.params} round {round_} after reset")
        scoreboard.expect_many(expected, inputs)
        tb.source.send_many(payloads)
        await tb.expect_from(tb.sink, scoreboard, cycles=10 * len(payloads) + 200)


# ---- pytest runner ----

CASES = [
    {"lanes": 2, "fused": False},
    {"lanes": 1, "fused": True},
    pytest.param({"lanes": 16, "fused": True}, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items()))
def test_axpby(params):
    run_cocotb("axpby", MODULE, params=params)
