"""The optimizer updater core (``updater_core``) against ``golden.optim`` (through ``golden.optim.host``):
cocotb tests (collected by cocotb) and their pytest runner (at the bottom).

Each run picks random hyper-parameters (every control decision of the model), a gradient
format and a copy format, writes the host scalars and flags, and streams random tensors
whose length is not a multiple of the lane count (the last transfer has a partial mask).
Every masked-in lane's new parameter, states and 16-bit copy must equal the golden bits,
and the sticky non-finite status must equal the golden status. Random idle cycles on the
input and random backpressure on the output check that the credit FIFO loses nothing.

The fast suite runs each optimizer once with few lanes, SGD with 3 (a count that is not a
power of two); wider cores are slow (their Verilator builds take minutes).
"""

import cocotb
import pytest
from cocotb.triggers import with_timeout

from golden.optim.host import (
    COPY_FORMAT_CODES,
    GRAD_FORMAT_CODES,
    STATE_NAMES,
    reference_update,
    run_flags,
    scalar_bits,
)
from golden.optim.vectors import f32_tensor, gradient_tensor, random_hyper
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, PulseCounter, Scoreboard
from testbenches.optim.tb import one_per_cycle, stall_pattern

MODULE = __name__
DEFAULT_VECTORS = 600
RESET_ROUNDS = 3


class TB(ClockedTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params_from_env()
        self.optimizer = self.component.optimizer
        self.lanes = self.params["lanes"]
        self.states = STATE_NAMES[self.optimizer]
        self.source = StreamSource(dut, "i", self.clock, stream_layout(self.component, "i"))
        self.sink = StreamSink(dut, "o", self.clock, stream_layout(self.component, "o"))
        dut.clear.value = 0

    def configure(self, hyper, grad_format, copy_format):
        for name, bits in scalar_bits(self.optimizer, hyper).items():
            getattr(self.dut, f"scalars__{name}").value = bits
        for name, value in run_flags(self.optimizer, hyper).items():
            getattr(self.dut, name).value = value
        self.dut.grad_format.value = GRAD_FORMAT_CODES.index(grad_format)
        self.dut.copy_format.value = COPY_FORMAT_CODES.index(copy_format)

    async def clear_status(self):
        self.dut.clear.value = 1
        await self.cycles(1)
        self.dut.clear.value = 0


def random_run(tb, rng, n, variant, specials=None):
    """Random inputs for ``n`` elements, their transfers and the golden outputs.

    ``variant`` fixes the model's control decisions (``golden.optim.vectors.VARIANTS``) and the formats:
    runs 0 to 8 of a test meet every gradient format with every copy format. ``specials`` is the
    share of IEEE specials in every tensor (None: 0 in a quarter of the runs, else 0.05).
    """
    grad_format = GRAD_FORMAT_CODES[variant % 3]
    copy_format = COPY_FORMAT_CODES[variant // 3 % 3]
    hyper = random_hyper(rng, tb.optimizer, variant)
    if specials is None:
        # A quarter of the runs have clean gradients, so the status is seen both ways.
        specials = 0.0 if rng.random() < 0.25 else 0.05
    tensors = {"param": f32_tensor(rng, n, specials=specials),
               "grad": gradient_tensor(rng, n, grad_format, specials=specials)}
    for name in tb.states:
        tensors[name] = f32_tensor(rng, n, scale=1e-3, positive=name != "exp_avg", specials=specials)
    expected = reference_update(tb.optimizer, param=tensors["param"], grad=tensors["grad"],
                                states={name: tensors[name] for name in tb.states}, hyper=hyper,
                                grad_format=grad_format, copy_format=copy_format)
    return hyper, grad_format, copy_format, tensors, expected


def transfers(tb, tensors, expected, n):
    """Input payloads, and per transfer the expected masked-in lanes, for ``n`` elements."""
    payloads, wanted = [], []
    for start in range(0, n, tb.lanes):
        count = min(tb.lanes, n - start)
        lanes, outs = [], []
        for k in range(tb.lanes):
            index = start + min(k, count - 1)  # masked-out lanes repeat the last element
            lanes.append({name: int(tensors[name][index]) for name in tensors})
            if k < count:
                out = {name: int(expected[name][index]) for name in ("param",) + tb.states}
                out["param16"] = 0 if expected["param16"] is None else int(expected["param16"][index])
                outs.append(out)
        payloads.append({"mask": (1 << count) - 1, "lanes": lanes})
        wanted.append(outs)
    return payloads, wanted


def masked_in(item):
    return [lane for k, lane in enumerate(item["lanes"]) if item["mask"] >> k & 1]


async def drain(tb, scoreboard, count):
    for _ in range(count):
        scoreboard.check(masked_in(await tb.sink.recv()))


async def run_updates(tb, rng, runs, elements, first_variant):
    for run in range(runs):
        n = int(rng.integers(1, elements + 1))
        hyper, grad_format, copy_format, tensors, expected = random_run(tb, rng, n, first_variant + run)
        tb.configure(hyper, grad_format, copy_format)
        await tb.clear_status()
        payloads, wanted = transfers(tb, tensors, expected, n)
        scoreboard = Scoreboard(f"{tb.optimizer} core {tb.params} run {run} {hyper} grad {grad_format} "
                                f"copy {copy_format}")
        scoreboard.expect_many(wanted, payloads)
        tb.source.send_many(payloads)

        await with_timeout(drain(tb, scoreboard, len(payloads)), 10 * (6 * len(payloads) + 2000), "ns")
        scoreboard.check_complete()
        status = int(tb.dut.nonfinite.value)
        assert status == expected["nonfinite"], (
            f"run {run}: nonfinite status {status}, golden {expected['nonfinite']}; {knobs.describe()}")


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def golden_match_under_stalls(dut, idle, backpressure):
    """Random runs (hyper-parameters, formats, lengths); outputs and status equal golden.optim."""
    tb = TB(dut)
    salt = stall_pattern(tb, idle, backpressure, hold=0.5)
    await tb.reset()
    elements = max(1, knobs.vectors(DEFAULT_VECTORS) // 3)
    # The four stall patterns run variants 0-11 between them: every model branch and format pair.
    await run_updates(tb, knobs.rng(salt), 3, elements, 3 * salt)


@cocotb.test()
async def one_transfer_per_cycle(dut):
    """Back-to-back input with an always-ready output: II = 1 through the credit FIFO."""
    tb = TB(dut)
    await tb.reset()
    rng = knobs.rng(9)
    count = 200
    n = count * tb.lanes
    hyper, grad_format, copy_format, tensors, expected = random_run(tb, rng, n, 0)
    tb.configure(hyper, grad_format, copy_format)
    payloads, _ = transfers(tb, tensors, expected, n)
    assert len(payloads) == count
    await one_per_cycle(tb, payloads)


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset while results are in flight and the status is set; the next run equals golden, alone.

    Each round streams a run with IEEE specials under random idle cycles and backpressure, and
    raises reset at a random cycle at which the sticky non-finite status is set and inputs have
    been taken whose results have not left. Then a run with clean gradients, without a
    ``clear`` pulse: its outputs must be exactly the golden ones (nothing from before the
    reset), the status 0 (reset cleared it), the gradient tap must pulse once per transfer,
    all within a cycle bound.
    """
    tb = TB(dut)
    tb.source.set_pause_generator(random_pauses(knobs.rng(301), 0.3))
    tb.sink.set_backpressure_generator(random_pauses(knobs.rng(302), 0.4))
    tap = PulseCounter(tb.clock, dut.gradient__valid)  # the valid-only tap
    await tb.reset()
    await tb.clear_status()
    rng = knobs.rng(300)
    elements = max(tb.lanes, knobs.vectors(DEFAULT_VECTORS) // 3)
    for round_ in range(RESET_ROUNDS):
        n = 120 * tb.lanes
        hyper, grad_format, copy_format, tensors, expected = random_run(tb, rng, n, 3 * round_, specials=0.1)
        assert grad_format == "f32"
        tensors["grad"][0] = 0x7F80_0000  # +Inf: the status is set from the first transfer on
        tb.configure(hyper, grad_format, copy_format)
        payloads, _ = transfers(tb, tensors, expected, n)
        sent, received = tb.source.sent, tb.sink.received
        tb.source.send_many(payloads)

        def cut_with_status(sent=sent, received=received):
            return int(dut.nonfinite.value) == 1 and tb.source.sent - sent > tb.sink.received - received

        await tb.reset_mid_transfer(rng, after=(1, 40), drivers=[tb.source, tb.sink, tap],
                                    until=cut_with_status)

        n = int(rng.integers(1, elements + 1))
        hyper, grad_format, copy_format, tensors, expected = random_run(tb, rng, n, 3 * round_ + 1,
                                                                        specials=0.0)
        tb.configure(hyper, grad_format, copy_format)
        payloads, wanted = transfers(tb, tensors, expected, n)
        scoreboard = Scoreboard(f"{tb.optimizer} core {tb.params} round {round_} after reset, {hyper} "
                                f"grad {grad_format} copy {copy_format}")
        scoreboard.expect_many(wanted, payloads)
        tb.source.send_many(payloads)
        await tb.bounded(drain(tb, scoreboard, len(payloads)), what=scoreboard.name,
                         cycles=10 * len(payloads) + 2 * tb.component.latency + 200)
        await tb.cycles(20)
        assert tb.sink.empty(), (f"round {round_}: an extra output after the reset and the run: "
                                 f"{tb.sink.queue[0]}; {knobs.describe()}")
        scoreboard.check_complete()
        assert tap.count == len(payloads), (f"round {round_}: the gradient tap pulsed {tap.count} times for "
                                            f"{len(payloads)} transfers after the reset; {knobs.describe()}")
        status = int(dut.nonfinite.value)
        assert status == expected["nonfinite"] == 0, (
            f"round {round_}: nonfinite {status} after a reset and a clean run; {knobs.describe()}")


# ---- pytest runner ----

CASES = [
    {"optimizer": "adam", "lanes": 1},
    {"optimizer": "sgd", "lanes": 3},
    {"optimizer": "adagrad", "lanes": 1},
    pytest.param({"optimizer": "adam", "lanes": 4}, marks=pytest.mark.slow),
    pytest.param({"optimizer": "sgd", "lanes": 2}, marks=pytest.mark.slow),
    pytest.param({"optimizer": "adagrad", "lanes": 4}, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items()))
def test_updater_core(params):
    run_cocotb("updater_core", MODULE, params=params)
