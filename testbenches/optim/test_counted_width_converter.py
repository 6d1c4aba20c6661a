"""Tests of ``counted_width_converter`` (:class:`rtl.optim.counted_width_converter.CountedWidthConverter`)
on Verilator.

One width divides the other: a word is a transfer of the narrow side, ``p`` words make an input
and ``q`` an output (one of them is 1, the other the ratio). A tensor of ``n`` words (``count``,
the narrow side's transfers, at least 1, sampled at ``start``) goes in as ``ceil(n / p)`` transfers
and must come out as ``ceil(n / q)``, the words in order, the first of a wide transfer in its
lowest bits. The reference is the obvious one: output word ``k`` is input word ``k``. When
splitting, the pieces of the last input beyond ``n`` are random junk that must be dropped; when
gathering, the pieces of the last output beyond ``n`` are stale (unspecified) and not compared.
Unlike the gearbox, this converter leaves it to its source not to offer more than the tensor's
beats (and nothing before a ``start``), so no junk beat is offered after a tensor. The handshake
monitor of :mod:`.tb` counts the transfers on both ports and checks that an
offered output is held until it is taken.

* ``tensors_back_to_back``: tensors of 1 word, a multiple of the ratio and random lengths that
  are not, one after another in one simulation, under four stall patterns (none; random idle
  cycles between inputs, valid held until the transfer; random backpressure on the output;
  both). Without stalls, each tensor must move at full rate (one narrow transfer per cycle);
* ``reset_mid_transfer``: reset while a tensor flows under stalls; until the next ``start``
  nothing leaves, and a fresh tensor then converts correctly.

``NEARTRAIN_SEED`` seeds the data and the stalls; ``NEARTRAIN_VECTORS`` (default 100) is the
number of random lengths per stall pattern (a quarter as many reset rounds). The pytest runner
is at the bottom of this file.
"""

import cocotb
import pytest
from cocotb.triggers import ReadOnly, RisingEdge, Timer

from golden.bus import random_words
from scripts.sim import knobs
from scripts.sim.runner import params_from_env, run_cocotb
from scripts.sim.tb import Scoreboard, hex_of

from .tb import DEFAULT_TENSORS, SETTLE, STALLS, LaneConverterTB, ceil_div, reproduce


class TB(LaneConverterTB):
    def __init__(self, dut, *, stall="none", salt=0):
        params = params_from_env()
        super().__init__(dut, word=min(params["input_width"], params["output_width"]), stall=stall, salt=salt)
        self.ratio = max(self.p, self.q)

    def lengths(self, rng, count):
        """1, a multiple of the ratio, then ``count`` random lengths that are not one.

        No tensor of 0 words: the contract wants a count of at least 1. At a ratio of 1 (a wire,
        the count ignored) every length is a multiple.
        """
        lengths = [1, self.ratio * int(rng.integers(1, 6))]
        while len(lengths) < count + 2:
            n = int(rng.integers(2, 8 * self.ratio + 8))
            if self.ratio == 1 or n % self.ratio:
                lengths.append(n)
        return lengths

    async def start(self, n):
        """Drive ``count`` = ``n`` and pulse ``start`` for one cycle.

        Returns after that edge's read-only phase: the source, which has already run for that
        edge, offers what is queued from now on at the next edge at the earliest.
        """
        self.dut.count.value = n
        self.dut.start.value = 1
        await RisingEdge(self.clock)
        self.dut.start.value = 0
        await ReadOnly()
        await Timer(1, "ps")

    async def run(self, rng, n, label, *, full_rate=False):
        """Start a tensor of ``n`` random words, move it through, and check everything about it."""
        q = self.q
        where = f"{label}, n={n}, {self.shape()}"
        words = random_words(rng, n, self.word)
        beats = self.beats(rng, words)
        inputs, outputs = ceil_div(n, self.p), ceil_div(n, q)
        scoreboard = Scoreboard(f"counted_width_converter o ({where})")
        scoreboard.expect_many([words[k * q:(k + 1) * q] for k in range(outputs)],
                               [{"output": k, "words": f"{k * q}..{min(n, (k + 1) * q) - 1}"}
                                for k in range(outputs)])
        took, sent = self.monitor.inputs, self.monitor.outputs
        await self.start(n)
        edge = self.monitor.edges
        self.source.send_many(beats)

        async def drain():
            for k in range(outputs):
                scoreboard.check(self.words_of(await self.sink.recv(), n - k * q))

        await self.bounded(drain(), cycles=10 * (inputs + outputs) + 50,
                           what=lambda: f"{where}: {scoreboard.checked} of {outputs} outputs arrived")
        if full_rate:
            # Latency 1 and one narrow transfer per cycle: after the start edge, one edge for the
            # source to raise valid, one per narrow transfer, one for the wide side's register.
            elapsed, bound = self.monitor.last_output - edge, max(inputs, outputs) + 2
            assert elapsed <= bound, (
                f"{where}: the last output {elapsed} cycles after start, full rate allows {bound}; "
                f"{reproduce()}")
        await self.cycles(SETTLE)
        assert self.monitor.inputs - took == inputs, (
            f"{where}: {self.monitor.inputs - took} inputs taken, expected ceil(n/p) = {inputs}; "
            f"{reproduce()}")
        while not self.sink.empty():  # anything more is an extra output
            scoreboard.check(self.words_of(self.sink.queue.popleft(), q))
        scoreboard.check_complete()
        assert self.monitor.outputs - sent == outputs, (
            f"{where}: {self.monitor.outputs - sent} outputs, expected ceil(n/q) = {outputs}; "
            f"{reproduce()}")
        assert not self.dut.o__valid.value, f"{where}: o.valid after the last output; {reproduce()}"
        self.check_protocol(where)

    def check_protocol(self, where):
        assert not self.monitor.violations, (f"{where}: output not held until taken: "
                                             f"{self.monitor.violations[:3]}; {reproduce()}")


@cocotb.test()
@cocotb.parametrize(stall=list(STALLS))
async def tensors_back_to_back(dut, stall):
    """Tensors of 1, ratio*k and random lengths back to back: words in order, exact transfer counts."""
    salt = list(STALLS).index(stall)
    tb = TB(dut, stall=stall, salt=salt)
    rng = knobs.rng(salt)
    await tb.reset()
    for number, n in enumerate(tb.lengths(rng, knobs.vectors(DEFAULT_TENSORS))):
        await tb.run(rng, n, f"stall={stall} tensor {number}", full_rate=stall == "none")


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset while a tensor flows under stalls; nothing leaves until a start; then a fresh tensor is exact."""
    tb = TB(dut, stall="both", salt=7)
    rng = knobs.rng(8)
    await tb.reset()
    for round_ in range(max(1, knobs.vectors(DEFAULT_TENSORS) // 4)):
        n = int(rng.integers(16 * tb.ratio, 32 * tb.ratio))
        inputs, outputs = ceil_div(n, tb.p), ceil_div(n, tb.q)
        took, sent = tb.monitor.inputs, tb.monitor.outputs
        await tb.start(n)
        tb.source.send_many(tb.beats(rng, random_words(rng, n, tb.word)))

        def flowing(took=took, sent=tb.sink.received, outputs=outputs):
            return tb.monitor.inputs > took and tb.sink.received - sent < outputs

        # At full rate the tensor lasts n cycles; a stalled one longer.
        cycle = await tb.reset_mid_transfer(rng, after=(0, max(inputs, outputs) // 2),
                                            drivers=[tb.source, tb.sink, tb.monitor], until=flowing)
        where = f"round {round_}, reset at cycle {cycle} in a tensor of n={n}, {tb.shape()}"
        assert tb.monitor.outputs - sent < outputs, \
            f"{where}: every output left before the reset; {reproduce()}"
        # Before the next start nothing leaves (the source offers nothing: the converter's contract).
        await tb.cycles(SETTLE)
        sent = tb.monitor.since_clear[1]
        assert sent == 0 and tb.sink.empty(), (
            f"{where}: {sent} outputs after the reset, before a start (received "
            f"{hex_of(list(tb.sink.queue))}); {reproduce()}")
        tb.check_protocol(where)
        await tb.run(rng, int(rng.integers(1, 8 * tb.ratio + 8)),
                     f"round {round_}: the tensor after the reset at cycle {cycle}")


# ---------------------------------------------------------------- pytest

MODULE = __name__

# The registered defaults (512-bit beats split into 128-bit lane vectors, a power-of-two ratio),
# a gather by 3 and a split by 6 (ratios that are not powers of two, as the kernels' lane counts need).
CASES = [{"input_width": 512, "output_width": 128}, {"input_width": 32, "output_width": 96},
         {"input_width": 96, "output_width": 16}]


@pytest.mark.parametrize("params", CASES, ids=lambda p: "I{input_width}-O{output_width}".format(**p))
def test_counted_width_converter(params):
    run_cocotb("counted_width_converter", MODULE, params=params)
