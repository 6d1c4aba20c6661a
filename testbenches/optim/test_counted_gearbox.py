"""Tests of ``counted_gearbox`` (:class:`rtl.optim.counted_gearbox.CountedGearbox`) on Verilator.

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

The knobs are those of :mod:`.tb`. The pytest runner is at the bottom of this file.
"""

import pytest

from golden.bus import random_words
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import hex_of

from .tb import SETTLE, LaneConverterTB, converter_tests, reproduce


class TB(LaneConverterTB):
    name = "counted_gearbox"
    # Latency 1 and one transfer per cycle on the side with fewer words: the bound of the
    # amaranth.sim test (test_lane_converters.py), max(inputs, outputs) + 2 cycles after start (the
    # register, and a second output the last input may complete), plus one edge for the
    # source, which raises valid only after the edge that follows the start edge.
    full_rate_slack = 3
    junk_after = True

    @staticmethod
    def word_width(params):
        return params["word_width"]

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

    def cut_length(self, rng):
        return int(rng.integers(8 * (self.p + self.q), 16 * (self.p + self.q)))

    def fresh_length(self, rng):
        return int(rng.integers(1, 6 * (self.p + self.q)))

    async def after_reset(self, rng, where):
        """Before the next start, a beat on the input is not taken and nothing leaves."""
        self.source.send_many(random_words(rng, 1, self.p * self.word))
        await self.cycles(SETTLE)
        took, sent = self.monitor.since_clear
        assert (took, sent) == (0, 0) and self.sink.empty(), (
            f"{where}: {took} inputs taken and {sent} outputs sent after the reset, before a start "
            f"(received {hex_of(list(self.sink.queue))}); {reproduce()}")
        self.source.clear()


globals().update(converter_tests(TB))


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
