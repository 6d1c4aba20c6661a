"""Host device of the DLRM embedding-bag kernel (``embedding_bag``): HBM of tables, batches, golden.

:class:`BagTB` drives ``embedding_bag`` with random batches in ``KeyedJaggedTensor`` layout
(through :func:`scripts.sim.devices.dlrm.kjt_lookups`) against an ``AxiRam`` holding every table,
and predicts every pooled line with :func:`golden.dlrm.pool`; :func:`throughput_session` (session
``dlrm_bag.throughput``) measures lookups per cycle on one Zipf batch, and :func:`run_throughput`
runs it in a simulation (``bench_dlrm bag``; the kernel's test ``zipf_batch_throughput`` awaits
the same session).
"""

import logging

import numpy as np

from golden.dlrm import JaggedBatch, pool, reduce_gradients
from scripts.sim import knobs
from scripts.sim.axi import FaultyAxiRam, random_pauses_all
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, Scoreboard

from .dlrm import BASE, kjt_lookups, zipf_rows

__all__ = ["BagTB", "hbm", "SPARE_ROWS", "BENCH_SHAPE", "SESSIONS", "throughput_session", "run_throughput"]

SPARE_ROWS = 6  # rows from `rows` up to 2**row_bits - 1: out of range, yet the row field holds them
# The bench's kernel: four tables of 1,018 rows, 64 samples, a cache of 256 rows with 8 MSHRs.
BENCH_SHAPE = {"tables": 4, "row_bits": 10, "bag_bits": 6, "dim": 16, "sets": 64, "ways": 4, "mshrs": 8,
               "capacity": 16, "positions": 64, "group": 16}


def hbm(tb, *, stall, salt):
    """The HBM of an embedding-bag block's ``m_axi`` port: an ``AxiRam`` (errors injectable), quiet,
    pausing every channel with probability ``stall`` (seeded from ``salt + 2``)."""
    ram = FaultyAxiRam(tb.dut, "m_axi_", tb.clock, tb.dut.rst, in_flight=4)
    for interface in (ram.read_if, ram.write_if):
        interface.log.setLevel(logging.WARNING)
    if stall:
        ram.set_pause_generators(random_pauses_all(knobs.rng(salt + 2), stall))
    return ram


class BagTB(ClockedTB):
    """The kernel, its HBM (an ``AxiRam`` holding every table) and the golden pooling.

    ``stall`` is the probability of a pause on every AXI channel, of an idle cycle on ``i`` and of
    backpressure on ``o``. Table ``t`` has ``rows = 2**row_bits - SPARE_ROWS`` rows of random
    float32 values, at byte ``BASE + t * 2**row_bits * dim * 4`` of HBM; the spare rows are the
    out-of-range ones the row field can still name. :meth:`send` queues a batch and expects its
    pooled lines from :func:`golden.dlrm.pool`; :meth:`check` awaits them and the counters.
    """

    def __init__(self, dut, *, stall=0.0, salt=0):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = p = params_from_env()
        self.lines, self.stall = self.component.lines, stall
        self.tables, self.row_bits, self.bag_bits = p["tables"], p["row_bits"], p["bag_bits"]
        self.group, self.dim = p["group"], p["dim"]
        self.rows = (1 << self.row_bits) - SPARE_ROWS
        self.ram = hbm(self, stall=stall, salt=salt)
        self.weights = [self._table(knobs.rng(salt + 10 + t)) for t in range(self.tables)]
        for t, w in enumerate(self.weights):
            self.ram.write(BASE + (t << self.row_bits) * self.dim * 4, w.tobytes())

        def pauses(offset):
            return random_pauses(knobs.rng(salt + offset), stall) if stall else never()

        self.source = StreamSource(dut, "i", self.clock, stream_layout(self.component, "i"), pause=pauses(3))
        self.sink = StreamSink(dut, "o", self.clock, stream_layout(self.component, "o"),
                               backpressure=pauses(4))
        dut.rows.value, dut.base.value = self.rows, BASE
        self.board = Scoreboard("embedding bag o")
        self.bad = self.lookups = self.overflows = 0

    def _table(self, rng):
        """Random float32 rows of every magnitude; one word in 100 raw bits (NaNs, infinities)."""
        shape = ((1 << self.row_bits), self.dim)
        w = (rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))).astype(np.float32)
        raw = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32).view(np.float32)
        return np.where(rng.random(shape) < 0.01, raw, w)

    @property
    def drivers(self):
        return [self.source, self.sink]

    def random_batch(self, rng, samples, *, bad=0.05):
        """A batch of ``samples`` per table: bags of 0 to 9 Zipf rows, a ``bad`` fraction out of range."""
        lengths = rng.integers(0, 10, self.tables * samples)
        values = np.array(zipf_rows(int(lengths.sum()) + 1, rows=self.rows, salt=int(rng.integers(1 << 16))),
                          np.int64)[:lengths.sum()]
        wrong = rng.random(values.size) < bad
        values[wrong] = rng.integers(self.rows, 1 << self.row_bits, int(wrong.sum()))
        return JaggedBatch(values, np.concatenate([[0], np.cumsum(lengths)]), self.tables)

    def send(self, batch, rng, *, bad_tables=0):
        """Queue ``batch``'s lookups (and ``bad_tables`` lookups of a missing table among them, if the
        table field can name one); expect its pooled lines from the golden. Returns the good lookups."""
        items = kjt_lookups(batch, group=self.group, row_bits=self.row_bits, bag_bits=self.bag_bits)
        pooled, bad = pool([w[:self.rows] for w in self.weights], batch)
        lines = self.dim // 16
        words = pooled.view(np.uint32)
        first_seen = []
        for item in items:
            if item["row"] < self.rows and (item["table"], item["bag"]) not in first_seen:
                first_seen.append((item["table"], item["bag"]))
            if item["group_end"] and first_seen:
                for number, (table, bag) in enumerate(first_seen):
                    for line in range(lines):
                        data = words[table, bag, 16 * line:16 * line + 16].tobytes()
                        self.board.expect({"bag": bag, "table": table, "line": line,
                                           "last": int(number == len(first_seen) - 1 and line == lines - 1),
                                           "data": int.from_bytes(data, "little")}, {"group_of": first_seen})
                first_seen = []
        missing = (1 << max(1, (self.tables - 1).bit_length())) - self.tables
        if missing and bad_tables:
            for position in sorted(rng.choice(len(items) + 1, bad_tables), reverse=True):
                items.insert(int(position), {"row": 0, "bag": 0, "table": self.tables, "group_end": 0,
                                             "last": 0})
            bad += bad_tables
        for item in items:
            self.source.send_nowait(item)
        self.bad += bad
        self.lookups += len(items)
        return sum(item["row"] < self.rows and item["table"] < self.tables for item in items)

    def send_one_group(self, batch):
        """Queue ``batch`` as ONE group of all its bags (the host breaking the grouping): expect what
        the pooling table does then, :func:`golden.dlrm.reduce_gradients` of the fanned-out lines at
        ``group * dim / 16`` keys (partial sums flushed at each overflow). Returns the good lookups."""
        items = kjt_lookups(batch, group=batch.offsets.size - 1, row_bits=self.row_bits,
                            bag_bits=self.bag_bits)
        lines = self.dim // 16
        fanned = [((item["table"], item["bag"], line),
                   self.weights[item["table"]][item["row"], 16 * line:16 * line + 16].view(np.uint32))
                  for item in items if item["row"] < self.rows for line in range(lines)]
        sums, overflows = reduce_gradients(fanned, capacity=self.group * lines)
        for number, ((table, bag, line), words) in enumerate(sums):
            self.board.expect({"bag": bag, "table": table, "line": line, "last": int(number == len(sums) - 1),
                               "data": int.from_bytes(words.tobytes(), "little")})
        for item in items:
            self.source.send_nowait(item)
        self.bad += sum(item["row"] >= self.rows for item in items)
        self.lookups += len(items)
        self.overflows += overflows
        return len(fanned) // lines

    def bound(self):
        return int((self.lookups * (self.dim // 16 + 1) * 40 + 500) * (1 + 6 * self.stall))

    async def check(self, good_lookups):
        await self.expect_from(self.sink, self.board, cycles=self.bound())
        counters = {name: int(getattr(self.dut, name).value)
                    for name in ("bad_index", "overflows", "hbm_error", "hits", "misses", "duplicates")}
        assert counters["bad_index"] == self.bad, f"counters {counters}, {self.bad} bad; {knobs.describe()}"
        assert counters["overflows"] == self.overflows and counters["hbm_error"] == 0, \
            f"{counters}, {self.overflows} overflows expected; {knobs.describe()}"
        # Every good lookup is a duplicate in the dedupe table or asked of the cache (a hit or a miss).
        asked = counters["hits"] + counters["misses"] + counters["duplicates"]
        assert asked == good_lookups, f"{counters}: {asked} != {good_lookups} good; {knobs.describe()}"


async def throughput_session(dut, job):
    """Lookups per cycle on one Zipf batch of ``2**bag_bits`` samples (no stalls, no bad lookups),
    from the first lookup queued to the last pooled line, every line checked on the way. Returns
    ``{"lookups", "cycles", "hits", "misses", "duplicates"}``."""
    tb = BagTB(dut, salt=60)
    await tb.reset()
    rng = knobs.rng(160)
    batch = tb.random_batch(rng, 1 << tb.bag_bits, bad=0.0)
    start = tb.cycle
    count = tb.send(batch, rng)
    await tb.check(count)
    cycles = tb.cycle - start - 20  # expect_from waits 20 settling cycles after the last line
    return {"lookups": count, "cycles": cycles,
            **{name: int(getattr(dut, name).value) for name in ("hits", "misses", "duplicates")}}


SESSIONS = {"throughput": throughput_session}


def run_throughput(params):
    """:func:`throughput_session` on ``embedding_bag`` built with ``params``."""
    from scripts.sim.devices import run_session

    return run_session("embedding_bag", "dlrm_bag.throughput", {}, params=params)
