"""The dedupe unit: issued rows, overflow cuts and fanned-out lines equal golden.dlrm.dedupe's.

Batches of lookups (Zipf, all duplicates, all unique) go in with random gaps; a responder answers
each segment's requests in a random order, with random gaps, and slips in bad replies (a tag no
entry of the segment holds, a line answered twice, a reply with nothing asked); the requests must
be the golden's unique rows with their entry numbers, the output every lookup's row in input
order, and the counters the golden's.
"""

import cocotb
import numpy as np

from golden.dlrm import segments, zipf_ranks
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.collective.tb import parametrize_shapes
from testbenches.dlrm.tb import StalledTB


def popular_rows(count, *, salt):
    """``count`` lookups of one table of 200 rows under a Zipf law of exponent 1.2 (many repeats)."""
    return [int(rank) + 1000 for rank in zipf_ranks(knobs.rng(salt), count, n=200, alpha=1.2)]


def line_data(row, line):
    """The reply data of ``line`` of ``row``: distinct per row and line, fixed by the seed."""
    return int.from_bytes(np.random.default_rng([knobs.seed(), row, line]).bytes(64), "little")


class TB(StalledTB):
    def __init__(self, dut, *, stall=0.0, salt=0):
        super().__init__(dut, stall=stall, salt=salt)
        self.capacity, self.positions = self.params.get("capacity", 16), self.params.get("positions", 64)
        self.source = self.stream_source("i", 1)
        self.replies = self.stream_source("rep", 2)
        self.requests = self.stream_sink("req", 3)
        self.sink = self.stream_sink("o", 4)
        self.rng = knobs.rng(salt + 5)
        self.restart()

    def restart(self):
        """Forget everything expected (after a reset): the counters start again from zero."""
        self.segments = []
        self.expected = {"issued": 0, "duplicates": 0, "overflows": 0, "bad_replies": 0}
        self.board = Scoreboard("dedupe o")
        self.lookups = 0
        self.inject = False
        self.responder = cocotb.start_soon(self.respond())

    @property
    def drivers(self):
        return [self.source, self.replies, self.requests, self.sink]

    def batch(self, rows):
        """Send one batch; predict its requests, lines and counters."""
        cut, overflows = segments(rows, capacity=self.capacity, positions=self.positions)
        self.segments.extend(cut)
        self.expected["overflows"] += overflows
        self.expected["issued"] += sum(len(unique) for unique, _ in cut)
        self.expected["duplicates"] += len(rows) - sum(len(unique) for unique, _ in cut)
        for number, row in enumerate(rows):
            self.source.send_nowait({"index": row, "last": int(number == len(rows) - 1)})
            for line in range(self.lines):
                self.board.expect({"index": row, "line": line, "data": line_data(row, line),
                                   "last": int(number == len(rows) - 1 and line == self.lines - 1)},
                                  {"lookup": self.lookups + number})
        self.lookups += len(rows)

    def bad_reply(self, tag, line):
        self.replies.send_nowait({"tag": tag, "line": line, "data": 0xBAD})
        self.expected["bad_replies"] += 1

    async def respond(self):
        """Answer each segment's requests (checked against the golden) in a random order."""
        served = 0
        while True:
            while served == len(self.segments):
                await self.cycles(1)
            unique, _ = self.segments[served]
            for tag, row in enumerate(unique):
                request = await self.requests.recv()
                assert request == {"index": row, "tag": tag}, (
                    f"request {request} of segment {served} != golden {{index: {row}, tag: {tag}}}; "
                    f"{knobs.describe()}")
            answers = [(tag, line) for tag in range(len(unique)) for line in range(self.lines)]
            answers = [answers[k] for k in self.rng.permutation(len(answers))]
            for tag, line in answers[:-1]:
                self.replies.send_nowait({"tag": tag, "line": line, "data": line_data(unique[tag], line)})
            if self.inject and len(answers) > 1:
                # A line answered twice, and a tag this segment never issued: both before the last reply.
                self.bad_reply(*answers[0])
                if len(unique) < self.capacity:
                    self.bad_reply(len(unique), 0)
            tag, line = answers[-1]
            self.replies.send_nowait({"tag": tag, "line": line, "data": line_data(unique[tag], line)})
            served += 1

    def bound(self):
        return int((self.lookups * self.lines * 4 + 40 * len(self.segments) + 200) * (1 + 8 * self.stall))


@cocotb.test()
@cocotb.parametrize(stall=[0.0, 0.3])
async def zipf_batches(dut, stall):
    tb = TB(dut, stall=stall, salt=int(10 * stall))
    await tb.reset()
    rows = popular_rows(knobs.vectors(600), salt=7)
    rng = knobs.rng(8)
    start = 0
    while start < len(rows):
        size = int(rng.integers(1, 3 * tb.positions))
        tb.batch(rows[start:start + size])
        start += size
    await tb.check()
    assert tb.expected["overflows"] > 0 and tb.expected["duplicates"] > 0


@cocotb.test()
async def all_duplicates_and_all_unique(dut):
    tb = TB(dut, stall=0.2, salt=20)
    await tb.reset()
    tb.batch([5] * (2 * tb.positions + 3))  # one row, overflowing only the position list
    tb.batch(list(range(100, 100 + 3 * tb.capacity + 1)))  # no repeats: every entry, then a cut
    await tb.check()
    assert tb.expected["issued"] == 3 + 3 * tb.capacity + 1


@cocotb.test()
async def bad_replies_are_counted_and_dropped(dut):
    tb = TB(dut, stall=0.2, salt=30)
    await tb.reset()
    tb.bad_reply(0, 0)  # nobody asked for anything yet
    await tb.replies.wait_idle()
    tb.inject = True
    rows = popular_rows(knobs.vectors(300), salt=31)
    tb.batch(rows[:150])
    tb.batch(rows[150:])
    await tb.check()
    assert tb.expected["bad_replies"] > 2


@cocotb.test()
async def reset_in_the_middle_of_a_lookup(dut):
    tb = TB(dut, stall=0.3, salt=40)
    await tb.reset()
    tb.batch(popular_rows(200, salt=41))
    await tb.reset_mid_transfer(knobs.rng(42), after=(5, 60), drivers=tb.drivers)
    tb.responder.cancel()
    tb.restart()
    tb.batch(popular_rows(knobs.vectors(200), salt=43))
    await tb.check()


SHAPES = {
    "default": {"capacity": 16, "positions": 32},
    "dim32": {"capacity": 8, "positions": 20, "dim": 32},
}


# A second build per block costs a minute of make test: the wider shape runs in make test-full.
SLOW_SHAPES = {"dim32"}


@parametrize_shapes(SHAPES, SLOW_SHAPES)
def test_dedupe_unit(shape):
    run_cocotb("dedupe_unit", __name__, params=SHAPES[shape])
