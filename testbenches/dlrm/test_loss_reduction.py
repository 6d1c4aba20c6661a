"""The loss reduction: every row line's sum bit-exact with golden.dlrm.reduce_gradients, under stalls.

Batches of gradient lines (binary32 words of mixed scale with NaN, infinities, subnormals and
zeros mixed in) on a few popular rows, so that keys repeat back to back and the adder's hazard
is exercised, and enough keys that the table overflows; the sums must leave in the golden's
order with its bits, and the counters must agree.
"""

import cocotb

from golden.dlrm import WORDS, reduce_gradients, zipf_ranks
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.collective.tb import parametrize_shapes, random_words
from testbenches.dlrm.tb import StalledTB


def line_value(words):
    return sum(int(word) << (32 * k) for k, word in enumerate(words))


class TB(StalledTB):
    def __init__(self, dut, *, stall=0.0, salt=0):
        super().__init__(dut, stall=stall, salt=salt)
        self.capacity = self.params.get("capacity", 16)
        self.source = self.stream_source("i", 1)
        self.sink = self.stream_sink("o", 2)
        self.rng = knobs.rng(salt + 3)
        self.board = Scoreboard("loss reduction o")
        self.expected = {"merged": 0, "overflows": 0}
        self.sent = 0

    @property
    def drivers(self):
        return [self.source, self.sink]

    def batch(self, count, *, rows=24):
        """Send ``count`` gradients of Zipf-popular rows as one batch; predict the sums."""
        ranks = zipf_ranks(self.rng, count, n=rows, alpha=1.1)
        keys = [(int(rank) * 7, int(self.rng.integers(0, self.lines))) for rank in ranks]
        grads = random_words(self.rng, (count, WORDS), specials=0.03)
        sums, overflows = reduce_gradients(zip(keys, grads, strict=True), capacity=self.capacity)
        self.expected["overflows"] += overflows
        self.expected["merged"] += count - len(sums)
        for number, ((index, line), words) in enumerate(zip(keys, grads, strict=True)):
            self.source.send_nowait({"index": index, "line": line, "last": int(number == count - 1),
                                     "data": line_value(words)})
        for number, ((index, line), words) in enumerate(sums):
            self.board.expect({"index": index, "line": line, "last": int(number == len(sums) - 1),
                               "data": line_value(words)}, {"sum": number})
        self.sent += count

    def bound(self):
        return int((8 * self.sent + 200) * (1 + 4 * self.stall))


@cocotb.test()
@cocotb.parametrize(stall=[0.0, 0.3])
async def sums_match_the_golden(dut, stall):
    tb = TB(dut, stall=stall, salt=int(10 * stall))
    await tb.reset()
    for _ in range(4):
        tb.batch(knobs.vectors(150))
    tb.batch(1)
    await tb.check()
    assert tb.expected["overflows"] > 0 and tb.expected["merged"] > 0


@cocotb.test()
async def one_row_back_to_back(dut):
    """Every gradient on one key: each waits for the previous addition (the hazard)."""
    tb = TB(dut, salt=20)
    await tb.reset()
    tb.batch(knobs.vectors(60), rows=1)
    await tb.check()


@cocotb.test()
async def reset_in_the_middle_of_a_batch(dut):
    tb = TB(dut, stall=0.3, salt=30)
    await tb.reset()
    tb.batch(100)
    await tb.reset_mid_transfer(knobs.rng(31), after=(5, 60), drivers=tb.drivers)
    tb.board = Scoreboard("loss reduction o")
    tb.expected = {"merged": 0, "overflows": 0}
    tb.sent = 0
    tb.batch(knobs.vectors(150))
    await tb.check()


SHAPES = {"default": {"capacity": 8}, "dim64": {"capacity": 16, "dim": 64}}


# A second build per block costs a minute of make test: the wider shape runs in make test-full.
SLOW_SHAPES = {"dim64"}


@parametrize_shapes(SHAPES, SLOW_SHAPES)
def test_loss_reduction(shape):
    run_cocotb("loss_reduction", __name__, params=SHAPES[shape])
