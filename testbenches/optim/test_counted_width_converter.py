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

The knobs are those of :mod:`.tb`. The pytest runner is at the bottom of this file.
"""

import pytest

from scripts.sim.runner import run_cocotb
from scripts.sim.tb import hex_of

from .tb import SETTLE, LaneConverterTB, converter_tests, reproduce


class TB(LaneConverterTB):
    name = "counted_width_converter"
    # Latency 1 and one narrow transfer per cycle: after the start edge, one edge for the
    # source to raise valid, one per narrow transfer, one for the wide side's register.
    full_rate_slack = 2

    @staticmethod
    def word_width(params):
        return min(params["input_width"], params["output_width"])

    def __init__(self, dut, *, stall="none", salt=0):
        super().__init__(dut, stall=stall, salt=salt)
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

    def cut_length(self, rng):
        return int(rng.integers(16 * self.ratio, 32 * self.ratio))

    def fresh_length(self, rng):
        return int(rng.integers(1, 8 * self.ratio + 8))

    async def after_reset(self, rng, where):
        """Before the next start nothing leaves (the source offers nothing: the converter's contract)."""
        await self.cycles(SETTLE)
        sent = self.monitor.since_clear[1]
        assert sent == 0 and self.sink.empty(), (
            f"{where}: {sent} outputs after the reset, before a start (received "
            f"{hex_of(list(self.sink.queue))}); {reproduce()}")


globals().update(converter_tests(TB))


# ---------------------------------------------------------------- pytest

MODULE = __name__

# The registered defaults (512-bit beats split into 128-bit lane vectors, a power-of-two ratio),
# a gather by 3 and a split by 6 (ratios that are not powers of two, as the kernels' lane counts need).
CASES = [{"input_width": 512, "output_width": 128}, {"input_width": 32, "output_width": 96},
         {"input_width": 96, "output_width": 16}]


@pytest.mark.parametrize("params", CASES, ids=lambda p: "I{input_width}-O{output_width}".format(**p))
def test_counted_width_converter(params):
    run_cocotb("counted_width_converter", MODULE, params=params)
