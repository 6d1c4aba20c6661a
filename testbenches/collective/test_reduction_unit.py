"""The reduction unit, in both orders: every partition's sums bit-exact with golden.collective's table.

Leaves' contributions arrive interleaved across the open partitions, in random order, with random
gaps and backpressure; the reduced lines must equal :class:`golden.collective.ReductionTable`'s,
in completion order, and so must the drop counters when bad contributions are mixed in.
"""

import cocotb

from golden.collective import Contribution, ReductionTable
from scripts.sim import knobs
from scripts.sim.runner import resolved_params_from_env, run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.collective.tb import StreamTB, leaf_traffic, nonfinite, parametrize_shapes, reshuffled

COUNTERS = ("bad_leaf", "bad_partition", "bad_chunk", "conflicts", "duplicates")


class TB(StreamTB):
    def __init__(self, dut, *, idle=False, backpressure=False, salt=0):
        super().__init__(dut, idle=idle, backpressure=backpressure, salt=salt)
        self.params = resolved_params_from_env()
        self.shape = {name: self.params[name] for name in ("leaves", "partitions", "slots", "chunks")}
        self.lines = self.component.lines

    def golden(self):
        return ReductionTable(**self.shape, mode=self.params["mode"])

    def send(self, contributions):
        for c in contributions:
            self.source.send_nowait(dict(leaf=c.leaf, partition=c.partition, chunk=c.chunk, data=c.data))

    def expect(self, table, contributions):
        """Feed ``table`` the sequence and return a scoreboard of the reduced lines it predicts."""
        board = Scoreboard("reduction unit o")
        self.expected_nonfinite = 0
        self.expected_reduced = 0
        for partition, lines in table.run(contributions):
            self.expected_reduced += 1
            for chunk, line in enumerate(lines):
                self.expected_nonfinite += nonfinite(line)
                board.expect({"partition": partition, "chunk": chunk, "last": int(chunk == len(lines) - 1),
                              "data": line})
        return board

    async def check(self, board, table, sent):
        bound = 6 * sent + 40 * self.shape["leaves"] * (board.pending + 20) + self.lines + 200
        await self.expect_from(self.sink, board, cycles=bound)
        # Dropped contributions sent after the last reduced line still count: the counters are read
        # once every contribution went in (with gaps, the last ones may trail the last line).
        await self.bounded(self.source.wait_idle(), cycles=bound, what="contributions sent")
        await self.cycles(4)
        actual = {name: int(getattr(self.dut, name).value) for name in COUNTERS}
        assert actual == table.counters, f"counters {actual} != golden {table.counters}; {knobs.describe()}"
        assert int(self.dut.nonfinite.value) == self.expected_nonfinite, knobs.describe()
        assert int(self.dut.reduced.value) == self.expected_reduced, knobs.describe()
        # The output queue is fed on credits, done and feedback by invariants: none refused a write.
        assert int(self.dut.overflow.value) == 0, f"a reduction unit queue overflowed; {knobs.describe()}"


def traffic(tb, rng, count, **options):
    return leaf_traffic(rng, **tb.shape, count=count, **options)


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def partitions_reduce_bit_exact(dut, idle, backpressure):
    tb, salt = await TB.under_stalls(dut, idle, backpressure)
    sequence = traffic(tb, knobs.rng(30 + salt), knobs.vectors(6, limit=60))  # rounds of whole partitions
    table = tb.golden()
    board = tb.expect(table, sequence)
    tb.send(sequence)
    await tb.check(board, table, len(sequence))


@cocotb.test()
async def arrival_order_does_not_change_the_bits(dut):
    """The same partitions, sent twice in two random arrival orders, give the same reduced bits.

    In arrival mode the bits may differ (the golden predicts them); in leaf-id order they may not.
    """
    tb = TB(dut, idle=True, salt=5)
    await tb.reset()
    rng = knobs.rng(41)
    first = traffic(tb, rng, 3)
    again = reshuffled(rng, first)
    table = tb.golden()
    board = tb.expect(table, first + again)
    tb.send(first + again)
    received = []
    for _ in range(board.pending):
        item = await tb.bounded(tb.sink.recv(), cycles=20000, what="reduced lines")
        board.check(item)
        received.append(item)
    by_key = {}
    for item in received:
        by_key.setdefault((item["partition"], item["chunk"]), []).append(item["data"])
    assert all(len(bits) == 2 for bits in by_key.values()), knobs.describe()
    if tb.params["mode"] == "deterministic":
        assert all(len(set(bits)) == 1 for bits in by_key.values()), knobs.describe()


@cocotb.test()
async def bad_contributions_are_counted_and_dropped(dut):
    tb = TB(dut, idle=True, backpressure=True, salt=7)
    await tb.reset()
    rng = knobs.rng(53)
    shape = tb.shape
    clean = traffic(tb, rng, knobs.vectors(5, limit=50))  # rounds of whole partitions
    sequence = []
    seen = []
    for c in clean:
        sequence.append(c)
        seen.append(c)
        roll = rng.random()
        if roll < 0.03 and shape["leaves"] < 16:
            bad_leaf = int(rng.integers(shape["leaves"], 16))
            sequence.append(Contribution(bad_leaf, c.partition, c.chunk, c.data))
        elif roll < 0.06 and shape["partitions"] < 1024:
            sequence.append(Contribution(c.leaf, int(rng.integers(shape["partitions"], 1024)), c.chunk, 1))
        elif roll < 0.09:
            sequence.append(Contribution(c.leaf, c.partition, int(rng.integers(shape["chunks"], 4096)), 2))
        elif roll < 0.12:
            # A leaf sends a line of a partition that is still open a second time, with other data.
            old = seen[int(rng.integers(max(0, len(seen) - 8), len(seen)))]
            if old.partition == c.partition:
                sequence.append(Contribution(old.leaf, old.partition, old.chunk, old.data ^ 0x5A5A))
        elif roll < 0.15 and c.partition + shape["slots"] < shape["partitions"]:
            # A leaf running ahead: a partition whose slot still holds this one.
            sequence.append(Contribution(c.leaf, c.partition + shape["slots"], c.chunk, c.data))
    table = tb.golden()
    board = tb.expect(table, sequence)
    assert sum(table.counters.values()) > 0, "the test injected no bad contribution"
    tb.send(sequence)
    await tb.check(board, table, len(sequence))


@cocotb.test()
async def slots_complete_on_consecutive_cycles(dut):
    """Two partitions, in different slots, take their last lines back to back with no gap, so both
    slots complete on consecutive cycles: the queue of complete slots must keep both (it lost the
    second, and the unit hung, at ``NEARTRAIN_VECTORS=18`` before it got an entry more)."""
    tb = TB(dut, salt=17)
    await tb.reset()
    rng = knobs.rng(71)
    open_at_once = min(2, tb.shape["slots"])
    sequence = []
    for _ in range(knobs.vectors(2, limit=20)):
        start = sequence[-1].partition + 1 if sequence else 0
        lines = traffic(tb, rng, open_at_once, first=start)
        ids = list(dict.fromkeys(c.partition for c in lines))
        of = [[c for c in lines if c.partition == p] for p in ids]
        # Every line but the last of each partition, then the last ones back to back.
        sequence += [c for part in of for c in part[:-1]] + [part[-1] for part in of]
    table = tb.golden()
    board = tb.expect(table, sequence)
    assert table.counters == dict.fromkeys(COUNTERS, 0), "the sequence must be clean"
    tb.send(sequence)
    await tb.check(board, table, len(sequence))


@cocotb.test()
async def reset_mid_partition(dut):
    tb = TB(dut, idle=True, backpressure=True, salt=11)
    await tb.reset()
    rng = knobs.rng(61)
    tb.send(traffic(tb, rng, 3))
    await tb.reset_mid_transfer(rng, after=(5, 60), drivers=tb.drivers)
    sequence = traffic(tb, rng, 3, first=7)
    table = tb.golden()
    board = tb.expect(table, sequence)
    tb.send(sequence)
    await tb.check(board, table, len(sequence))


SHAPES = {
    "default": {},
    "short_partitions": {"leaves": 2, "slots": 1, "chunks": 3, "partitions": 8},
    "wide": {"leaves": 16, "slots": 4, "chunks": 20, "partitions": 1024},
    "arrival": {"mode": "arrival"},
    "arrival_short_partitions": {"mode": "arrival", "leaves": 16, "slots": 4, "chunks": 3, "partitions": 64},
}


# The wide shape is the longest simulation: make test-full only (the 16-leaf arrival shape keeps a
# 16-leaf build in make test).
SLOW_SHAPES = {"wide"}


@parametrize_shapes(SHAPES, SLOW_SHAPES)
def test_reduction_unit(shape):
    run_cocotb("reduction_unit", __name__, params=SHAPES[shape])
