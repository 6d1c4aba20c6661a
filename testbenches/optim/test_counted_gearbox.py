"""Tests of ``counted_gearbox`` (:class:`rtl.optim.gearbox.CountedGearbox`) on Verilator.

A tensor of ``n`` words (``count``, sampled at ``start``) goes in as ``ceil(n / p)`` transfers of
``p`` words and must come out as ``ceil(n / q)`` transfers of ``q`` words, the words in order, the
first of a transfer in its lowest bits. The reference is the obvious one: output word ``k`` is
input word ``k``. The words of the last input beyond ``n`` are random junk the gearbox must drop,
and the words of the last output beyond ``n`` are stale (unspecified), so they are not compared.
After the tensor's last input the source offers one more beat of junk and holds it: the gearbox
must not take it (``i.ready`` stays low until the next ``start``), and nothing more may leave.
A monitor counts the handshakes on both ports and checks that an output, once offered, is held
(valid and payload unchanged) until it is taken.

* ``tensors_back_to_back``: tensors of 0 words, 1 word, an exact multiple of both sides, random
  lengths that are multiples of neither side and a few that are multiples of one side only, one
  after another in one simulation, under four stall patterns (none; random idle cycles between
  inputs, valid held until the transfer; random backpressure on the output; both). Without
  stalls, each tensor must move at full rate;
* ``reset_mid_transfer``: reset while a tensor flows under stalls; until the next ``start`` the
  gearbox takes no input and sends no output, and a fresh tensor then converts correctly.

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
        super().__init__(dut, word=params_from_env()["word_width"], stall=stall, salt=salt)

    def lengths(self, rng, count):
        """0, 1, a multiple of both sides, ``count`` random lengths that are multiples of neither side,
        and a tenth as many that are multiples of one side only, in random order.

        A multiple of ``q`` only ends in a full output after a trimmed input: the junk of that
        input, if it were kept, would make an output more (with ``p=2, q=3``, no length that is a
        multiple of neither side can show it; the junk only lands in the stale words). A side of
        one word divides every length and is left out of the choice; a kind no length in range
        has (a multiple of ``p`` only when ``q`` divides ``p``) is left out.
        """
        p, q = self.p, self.q

        def kind(n):
            return (p > 1 and n % p == 0, q > 1 and n % q == 0)

        lengths = [0, 1, p * q * int(rng.integers(1, 4))]
        kinds = [(False, False)] * count + [(True, False), (False, True)] * max(1, count // 10)
        for wanted in rng.permutation(kinds).tolist():
            for _ in range(1000):
                n = int(rng.integers(2, 8 * (p + q)))
                if kind(n) == tuple(wanted):
                    lengths.append(n)
                    break
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
        p, q = self.p, self.q
        where = f"{label}, n={n}, {self.shape()}"
        words = random_words(rng, n, self.word)
        beats = self.beats(rng, words)
        junk = random_words(rng, 1, p * self.word)
        inputs, outputs = ceil_div(n, p), ceil_div(n, q)
        scoreboard = Scoreboard(f"counted_gearbox o ({where})")
        scoreboard.expect_many([words[k * q:(k + 1) * q] for k in range(outputs)],
                               [{"output": k, "words": f"{k * q}..{min(n, (k + 1) * q) - 1}"}
                                for k in range(outputs)])
        took, sent = self.monitor.inputs, self.monitor.outputs
        await self.start(n)
        edge = self.monitor.edges
        self.source.send_many(beats + junk)

        async def drain():
            for k in range(outputs):
                scoreboard.check(self.words_of(await self.sink.recv(), n - k * q))

        await self.bounded(drain(), cycles=10 * (inputs + outputs) + 50,
                           what=lambda: f"{where}: {scoreboard.checked} of {outputs} outputs arrived")
        if full_rate and outputs:
            # Latency 1 and one transfer per cycle on the side with fewer words: the bound of the
            # amaranth.sim test (test_gearbox.py), max(inputs, outputs) + 2 cycles after start (the
            # register, and a second output the last input may complete), plus one edge for the
            # source, which raises valid only after the edge that follows the start edge.
            elapsed, bound = self.monitor.last_output - edge, max(inputs, outputs) + 3
            assert elapsed <= bound, (
                f"{where}: the last output {elapsed} cycles after start, full rate allows {bound}; "
                f"{reproduce()}")
        # The junk beat after the tensor is offered (valid held) and must not be taken.
        await self.wait_until(lambda: self.dut.i__valid.value or self.monitor.inputs - took > inputs,
                              cycles=20 * SETTLE, what=f"{where}: the junk beat after the tensor")
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
        self.source.clear()  # drop the junk beat before the next start

    def check_protocol(self, where):
        assert not self.monitor.violations, (f"{where}: output not held until taken: "
                                             f"{self.monitor.violations[:3]}; {reproduce()}")


@cocotb.test()
@cocotb.parametrize(stall=list(STALLS))
async def tensors_back_to_back(dut, stall):
    """Tensors of 0, 1, p*q*k and random lengths back to back: words in order, exact transfer counts."""
    salt = list(STALLS).index(stall)
    tb = TB(dut, stall=stall, salt=salt)
    rng = knobs.rng(salt)
    await tb.reset()
    for number, n in enumerate(tb.lengths(rng, knobs.vectors(DEFAULT_TENSORS))):
        await tb.run(rng, n, f"stall={stall} tensor {number}", full_rate=stall == "none")


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset while a tensor flows under stalls; nothing moves until a start; then a fresh tensor is exact."""
    tb = TB(dut, stall="both", salt=7)
    rng = knobs.rng(8)
    p, q = tb.p, tb.q
    await tb.reset()
    for round_ in range(max(1, knobs.vectors(DEFAULT_TENSORS) // 4)):
        n = int(rng.integers(8 * (p + q), 16 * (p + q)))
        inputs, outputs = ceil_div(n, p), ceil_div(n, q)
        took, sent = tb.monitor.inputs, tb.monitor.outputs
        await tb.start(n)
        tb.source.send_many(tb.beats(rng, random_words(rng, n, tb.word)))

        def flowing(took=took, sent=tb.sink.received, outputs=outputs):
            return tb.monitor.inputs > took and tb.sink.received - sent < outputs

        # At full rate the tensor lasts max(inputs, outputs) cycles; a stalled one longer.
        cycle = await tb.reset_mid_transfer(rng, after=(0, max(inputs, outputs) // 2),
                                            drivers=[tb.source, tb.sink, tb.monitor], until=flowing)
        where = f"round {round_}, reset at cycle {cycle} in a tensor of n={n}, {tb.shape()}"
        assert tb.monitor.outputs - sent < outputs, \
            f"{where}: every output left before the reset; {reproduce()}"
        # Before the next start, a beat on the input is not taken and nothing leaves.
        tb.source.send_many(random_words(rng, 1, p * tb.word))
        await tb.cycles(SETTLE)
        took, sent = tb.monitor.since_clear
        assert (took, sent) == (0, 0) and tb.sink.empty(), (
            f"{where}: {took} inputs taken and {sent} outputs sent after the reset, before a start "
            f"(received {hex_of(list(tb.sink.queue))}); {reproduce()}")
        tb.check_protocol(where)
        tb.source.clear()
        await tb.run(rng, int(rng.integers(1, 6 * (p + q))),
                     f"round {round_}: the tensor after the reset at cycle {cycle}")


# ---------------------------------------------------------------- pytest

MODULE = __name__


def gearbox(p, q, word):
    return {"input_width": p * word, "output_width": q * word, "word_width": word}


# The registered defaults (2-word 64-bit beats into 3-lane vectors), a wider input than output, and
# narrow words into a much wider output.
CASES = [gearbox(2, 3, 32), gearbox(5, 4, 16), gearbox(3, 16, 8)]


@pytest.mark.parametrize("params", CASES,
                         ids=lambda p: "I{input_width}-O{output_width}-W{word_width}".format(**p))
def test_counted_gearbox(params):
    run_cocotb("counted_gearbox", MODULE, params=params)
