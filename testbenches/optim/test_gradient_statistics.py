"""The statistics unit (``gradient_statistics``) against ``golden.optim.gradient_statistics``: cocotb
tests (collected by cocotb) and their pytest runner (at the bottom).

Each run clears the unit, streams a gradient (random idle cycles between transfers; the
unit is always ready, so there is no backpressure to apply), drains it and compares the
NaN count, the Inf count and the whole 586-bit accumulator with the golden model. Runs mix
random values of every class with gradients made of one repeated value (every element in
one bucket, back to back: the read-modify-write forwarding) and of the extremes (largest
finite, smallest subnormal), and of one whose last addition carries through 448 bits of
the accumulator (:func:`carry_ripple`). Two lane counts in the fast suite; agreeing with the golden model bit
for bit at both shows the result does not depend on the lane count.
"""

import math

import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge, with_timeout

from golden.optim.host import reference_statistics
from golden.optim.registers import STATISTICS_BUCKETS as BUCKETS
from golden.optim.vectors import f32_tensor
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, PulseCounter

MODULE = __name__
DEFAULT_VECTORS = 2000


class TB(ClockedTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        self.lanes = params_from_env()["lanes"]
        self.source = StreamSource(dut, "i", self.clock, stream_layout(self.component, "i"))
        dut.clear.value = 0
        dut.drain.value = 0

    async def pulse(self, name):
        getattr(self.dut, name).value = 1
        await RisingEdge(self.clock)
        getattr(self.dut, name).value = 0

    def payloads(self, bits):
        """The transfers of gradient ``bits`` (uint32), the last one masked."""
        n = len(bits)
        payloads = []
        for start in range(0, n, self.lanes):
            count = min(self.lanes, n - start)
            lanes = [int(bits[start + min(k, count - 1)]) ^ (0 if k < count else 0x7F80_0001)
                     for k in range(self.lanes)]  # masked-out lanes: garbage that must not count
            payloads.append({"mask": (1 << count) - 1, "lanes": lanes})
        return payloads

    async def run(self, bits):
        """Stream ``bits`` (uint32), drain, and return (nan_count, inf_count, accumulator)."""
        await self.pulse("clear")
        self.source.send_many(self.payloads(bits))
        await self.source.wait_idle()
        await self.pulse("drain")
        while not int(self.dut.done.value):
            await RisingEdge(self.clock)
        return int(self.dut.nan_count.value), int(self.dut.inf_count.value), int(self.dut.accumulator.value)


def carry_ripple(top_bit=510):
    """A gradient (uint32 bits) whose sum of squares is exactly ``2**(top_bit + 2)`` units.

    Its buckets add up, from the top down, to ``2**top_bit - 1`` minus a small remainder; the
    last bucket (subnormals and the smallest normals) brings the remainder and 4 more. At the
    default, every bit from 64 to 511 of the accumulator is one until the last addition, whose
    carry must then ripple through all of them: the drain's carry settling at its longest.
    """
    largest = (1 << 24) - 1

    def element(bucket, significand):
        if bucket == 0:
            exponent = 1 if significand >> 23 else 0
        else:
            exponent = bucket + 1
        return (exponent << 23) | (significand & 0x7F_FFFF)

    elements, remaining = [], (1 << top_bit) - 1
    for bucket in range(BUCKETS - 1, 0, -1):
        shift = 2 * (bucket - 1)
        wanted = remaining >> shift
        if wanted < 1 << 46:  # below the smallest square of this bucket's normal numbers
            continue
        count = -(-wanted // (largest * largest))
        for k in range(count):
            significand = min(largest, math.isqrt(wanted // (count - k)))
            elements.append(element(bucket, significand))
            wanted -= significand * significand
            remaining -= (significand * significand) << shift
    last = 4 * remaining + 4
    while last:
        significand = min(largest, math.isqrt(last))
        elements.append(element(0, significand))
        last -= significand * significand
    return np.array(elements, np.uint32)


def gradients(rng, total):
    """A list of test gradients (uint32 bits) adding up to about ``total`` elements."""
    one_bucket = np.full(max(1, total // 8), 0x3F80_0001, np.uint32)
    extremes = rng.choice(np.array([0x7F7F_FFFF, 0xFF7F_FFFF, 0x0000_0001, 0x8000_0001, 0x007F_FFFF,
                                    0, 0x8000_0000, 0x7F80_0000, 0x7FC0_0000], np.uint32), max(1, total // 8))
    runs = [one_bucket, extremes, f32_tensor(rng, 1, specials=0.5), rng.permutation(carry_ripple())]
    left = max(1, total - sum(len(r) for r in runs))
    runs.append(f32_tensor(rng, left, specials=0.2))
    runs.append(f32_tensor(rng, int(rng.integers(1, 64)), scale=1e-30, specials=0.0))
    return runs


@cocotb.test()
@cocotb.parametrize(idle=[False, True])
async def golden_match(dut, idle):
    """NaN/Inf counts and the exact accumulator equal golden.optim.gradient_statistics."""
    tb = TB(dut)
    tb.source.set_pause_generator(random_pauses(knobs.rng(101), 0.4) if idle else never())
    await tb.reset()
    rng = knobs.rng(int(idle))
    for number, bits in enumerate(gradients(rng, knobs.vectors(DEFAULT_VECTORS))):
        expected = reference_statistics(bits.astype(np.uint32), "f32")
        got = await with_timeout(tb.run(bits), 10 * (4 * len(bits) + 2000), "ns")
        wanted = (expected.nan_count, expected.inf_count, expected.accumulator)
        assert got == wanted, (f"lanes {tb.lanes} gradient {number} ({len(bits)} elements): (nan, inf, acc) "
                               f"= {tuple(hex(v) for v in got)}, golden {tuple(hex(v) for v in wanted)}; "
                               f"{knobs.describe(DEFAULT_VECTORS)}")


@cocotb.test()
@cocotb.parametrize(during=["stream", "drain"])
async def reset_mid_run(dut, during):
    """Reset in the middle of a gradient's stream or of its drain; the next run equals golden.

    When the reset comes, the bucket RAMs hold partial sums of the cut gradient (random idle
    cycles between its transfers; specials among its values). The next gradient's counts and
    exact accumulator must equal the golden model's, its run must end within a cycle bound,
    and no ``done`` pulse may come after the reset but that run's own.
    """
    tb = TB(dut)
    tb.source.set_pause_generator(random_pauses(knobs.rng(311), 0.3))
    done = PulseCounter(tb.clock, dut.done)
    await tb.reset()
    rng = knobs.rng(310 + (during == "drain"))
    for round_ in range(2):
        # After a reset the unit zeroes its buckets (busy high) before it takes anything.
        await tb.wait_until(lambda: not dut.busy.value, cycles=BUCKETS + 8,
                            what="the bucket clear after a reset")
        cut = f32_tensor(rng, 200 * tb.lanes, specials=0.1)
        payloads = tb.payloads(cut)
        await tb.pulse("clear")
        sent, total = tb.source.sent, len(payloads)
        tb.source.send_many(payloads)
        if during == "stream":
            def streaming(sent=sent, total=total):
                return 0 < tb.source.sent - sent < total

            await tb.reset_mid_transfer(rng, after=(1, 60), drivers=[tb.source, done], until=streaming)
        else:
            await tb.bounded(tb.source.wait_idle(), cycles=8 * len(payloads) + 2 * BUCKETS, what="cut stream")
            await tb.pulse("drain")
            # Inside the drain's walk over the buckets (half of them zeroed, half still full).
            await tb.reset_mid_transfer(rng, after=(1, BUCKETS), drivers=[tb.source, done],
                                        until=lambda: int(dut.busy.value) == 1)

        bits = f32_tensor(rng, int(rng.integers(1, 100 * tb.lanes)), specials=0.2)
        got = await tb.bounded(tb.run(bits), cycles=4 * len(bits) + 4 * BUCKETS + 100,
                               what=f"round {round_}: the run after a reset in the {during}")
        expected = reference_statistics(bits.astype(np.uint32), "f32")
        wanted = (expected.nan_count, expected.inf_count, expected.accumulator)
        assert got == wanted, (f"lanes {tb.lanes}, round {round_}, after a reset in the {during}: "
                               f"(nan, inf, acc) = {tuple(hex(v) for v in got)}, golden "
                               f"{tuple(hex(v) for v in wanted)}; {knobs.describe()}")
        assert done.count == 1, f"{done.count} done pulses after the reset, for one run; {knobs.describe()}"


# ---- pytest runner ----

CASES = [{"lanes": 1}, {"lanes": 3}, pytest.param({"lanes": 16}, marks=pytest.mark.slow)]


@pytest.mark.parametrize("params", CASES, ids=lambda p: f"lanes={p['lanes']}")
def test_gradient_statistics(params):
    run_cocotb("gradient_statistics", MODULE, params=params)
