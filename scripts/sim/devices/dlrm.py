"""Host device of the DLRM blocks: the embedding cache's bench (HBM model, drivers, golden LRU).

:class:`CacheTB` drives ``embedding_cache`` against an ``AxiRam`` of random rows and predicts
every line with :class:`golden.dlrm.LruCache`; :func:`kjt_lookups` turns a batch in
``KeyedJaggedTensor`` layout into the ``embedding_bag`` kernel's lookup stream;
:func:`throughput_session` (session ``dlrm.throughput``) measures lookups per cycle at hit and on
a Zipf trace, and :func:`run_throughput` runs it in a simulation (``bench_dlrm throughput``; the cache's test
``throughput_at_hit`` awaits the same session).
"""

import logging
from collections import deque

from golden.dlrm import LruCache, lookup_trace
from golden.dlrm.embedding_bag import interleaved_lookups
from scripts.sim import knobs
from scripts.sim.axi import RAM_SIZE, FaultyAxiRam, random_pauses_all
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, Scoreboard, hex_of

__all__ = ["CacheTB", "RowScoreboard", "zipf_rows", "LINE_BYTES", "BASE", "SESSIONS", "throughput_session",
           "run_throughput", "kjt_lookups"]

LINE_BYTES = 64
BASE = 0x40000


def zipf_rows(count, *, rows, alpha=1.05, salt=0):
    """``count`` row ids of a Criteo-Kaggle-shaped Zipf trace scaled down to ``rows`` rows."""
    samples = count // 26 + 1
    trace = lookup_trace("criteo-kaggle", samples=samples, alpha=alpha, seed=knobs.seed() * 1000 + salt,
                         rows=rows)
    return [int(row) for row in trace.ravel()[:count]]


def kjt_lookups(batch, *, group, row_bits, bag_bits):
    """The ``embedding_bag`` kernel's lookups of ``batch`` (a :class:`golden.dlrm.JaggedBatch`).

    In :func:`golden.dlrm.embedding_bag.interleaved_lookups` order, bags ``group`` at a time; each
    lookup a dict of the kernel's input fields: ``table`` and ``bag`` (the sample) of its bag,
    ``row``, ``group_end`` on the final lookup of each group, ``last`` on the batch's final one.
    A row the ``row_bits``-bit field cannot hold (negative, or too large) is a ValueError: out of
    range is what the kernel counts, rows from the table's ``rows`` up to ``2**row_bits - 1``.
    """
    if batch.batch > 1 << bag_bits:
        raise ValueError(f"{batch.batch} samples do not fit a {bag_bits}-bit bag number")
    pairs = list(interleaved_lookups(batch, group=group))
    items = []
    for position, (slot, row) in enumerate(pairs):
        if not 0 <= row < 1 << row_bits:
            raise ValueError(f"row {row} does not fit a {row_bits}-bit row field")
        final = position + 1 == len(pairs)
        items.append({"row": row, "bag": slot % batch.batch, "table": slot // batch.batch,
                      "group_end": int(final or pairs[position + 1][0] // group != slot // group),
                      "last": int(final)})
    return items


class RowScoreboard(Scoreboard):
    """The lines of a non-blocking cache (``mshrs`` > 1): each row's in lookup order, rows in any order.

    This is what ``golden.dlrm.cache`` says such a cache returns: every lookup's lines, each with its
    ``tag``, ``hit`` flag and data as the golden predicts them, a row's lookups in their order; a line
    of a row no lookup is still owed for, or one that differs from the next one owed for its row, is
    a mismatch.
    """

    def __init__(self, name):
        super().__init__(name)
        self._owed = {}  # row -> positions of its expected lines, in order
        self._latest = -1
        self.overtaken = 0  # lines received after a line of a later lookup: the reordering seen

    def expect(self, expected, inputs=None):
        self._owed.setdefault(expected["index"], deque()).append(len(self._expected))
        super().expect(expected, inputs)

    def check(self, actual):
        owed = self._owed.get(int(actual["index"]))
        if not owed:
            raise AssertionError(f"{self.name}: line of row {actual['index']} that no lookup is owed "
                                 f"(item #{self.checked}): {hex_of(actual)}; {knobs.describe()}")
        position = owed.popleft()
        self.overtaken += position < self._latest
        self._latest = max(self._latest, position)
        if self._expected[position] != actual:
            raise AssertionError(
                f"{self.name}: mismatch at element {position} (item #{self.checked} received): inputs "
                f"{hex_of(self._inputs[position])}, expected {hex_of(self._expected[position])}, actual "
                f"{hex_of(actual)}; {knobs.describe()}")
        self.checked += 1


class CacheTB(ClockedTB):
    """The embedding cache with its HBM (an ``AxiRam`` of random rows) and the golden LRU.

    ``stall`` is the probability of a pause on every AXI channel, of an idle cycle on ``i`` and
    ``u``, and of backpressure on ``o``. ``beats_read`` counts the beats HBM has read since the
    last :meth:`cold` (one read of ``dim / 16`` beats per miss, however many lookups merge into it).
    """

    def __init__(self, dut, *, rows=3900, stall=0.0, salt=0):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = params_from_env()
        self.lines = self.component.lines
        self.row_bytes = self.lines * LINE_BYTES
        self.rows = rows
        if BASE + rows * self.row_bytes > RAM_SIZE:
            raise ValueError(f"{rows} rows do not fit the HBM model")
        self.ram = FaultyAxiRam(dut, "m_axi_", self.clock, dut.rst, in_flight=4)
        for interface in (self.ram.read_if, self.ram.write_if):
            interface.log.setLevel(logging.WARNING)
        self.beats_read = 0
        read_beat = self.ram.read_if._read

        async def counted(address, length):
            self.beats_read += 1
            return await read_beat(address, length)
        self.ram.read_if._read = counted
        self.image = bytearray(knobs.rng(salt + 1).bytes(rows * self.row_bytes))
        self.ram.write(BASE, bytes(self.image))
        if stall:
            self.ram.set_pause_generators(random_pauses_all(knobs.rng(salt + 2), stall))

        def pauses(offset):
            return random_pauses(knobs.rng(salt + offset), stall) if stall else never()

        def layout(port):
            return stream_layout(self.component, port)

        self.source = StreamSource(dut, "i", self.clock, layout("i"), pause=pauses(3))
        self.updates = StreamSource(dut, "u", self.clock, layout("u"), pause=pauses(4))
        self.sink = StreamSink(dut, "o", self.clock, layout("o"), backpressure=pauses(5))
        dut.rows.value = rows
        dut.base.value = BASE
        self.stall = stall
        self.golden = LruCache(sets=self.params.get("sets", 64), ways=self.params.get("ways", 4))
        self.expected_bad = 0

    @classmethod
    async def ready(cls, dut, *, stall=0.0, salt):
        """A reset testbench (``stall``, seeded by ``salt``) and ``knobs.rng(salt + 1)`` for its traffic."""
        tb = cls(dut, stall=stall, salt=salt)
        await tb.reset()
        return tb, knobs.rng(salt + 1)

    @property
    def drivers(self):
        return [self.source, self.updates, self.sink]

    def cold(self):
        """Start the golden over, as the cache is after a reset."""
        self.golden = LruCache(sets=self.golden.sets, ways=self.golden.ways)
        self.expected_bad = 0
        self.beats_read = 0

    def line(self, row, line):
        start = row * self.row_bytes + line * LINE_BYTES
        return int.from_bytes(self.image[start:start + LINE_BYTES], "little")

    def lookups(self, rows, board=None):
        """Send lookups of ``rows`` (tags count up); return the scoreboard of the lines predicted."""
        in_order = self.params.get("mshrs", 1) == 1  # the blocking cache returns rows in lookup order
        board = board or (Scoreboard if in_order else RowScoreboard)("embedding cache o")
        tag_mask = (1 << max(self.params.get("tag_width", 8), 1)) - 1
        for number, row in enumerate(rows):
            tag = number & tag_mask
            self.source.send_nowait({"index": row, "tag": tag})
            if row >= self.rows:
                self.expected_bad += 1
                continue
            hit, _ = self.golden.access(row)
            for line in range(self.lines):
                board.expect({"index": row, "tag": tag, "line": line, "last": int(line == self.lines - 1),
                              "hit": int(hit), "data": self.line(row, line)}, {"lookup": number, "row": row})
        return board

    def update(self, row, line, value):
        """Send a write-through update; the image (what HBM must hold) follows it."""
        self.updates.send_nowait({"index": row, "line": line, "data": value})
        if row >= self.rows or line >= self.lines:
            self.expected_bad += 1
            return
        start = row * self.row_bytes + line * LINE_BYTES
        self.image[start:start + LINE_BYTES] = value.to_bytes(LINE_BYTES, "little")

    def bound(self, lookups):
        """Cycles enough for ``lookups`` lookups if each missed, with stalls."""
        return int((lookups * (self.lines + 30) + 300) * (1 + 6 * self.stall))

    async def check(self, board, lookups):
        await self.expect_from(self.sink, board, cycles=self.bound(lookups))
        counters = {name: int(getattr(self.dut, name).value) for name in ("hits", "misses", "bad_index")}
        expected = {"hits": self.golden.hits, "misses": self.golden.misses, "bad_index": self.expected_bad}
        assert counters == expected, f"counters {counters} != golden {expected}; {knobs.describe()}"
        assert int(self.dut.hbm_error.value) == 0
        assert self.beats_read == self.golden.misses * self.lines, \
            f"HBM read {self.beats_read} beats for {self.golden.misses} misses; {knobs.describe()}"


async def _timed(tb, rows):
    """Cycles from queueing ``rows`` to their last line, checked against the golden on the way."""
    board = tb.lookups(rows)
    start = tb.cycle
    for _ in range(board.pending):
        board.check(await tb.sink.recv())
    return tb.cycle - start


async def throughput_session(dut, job):
    """One row line per cycle while ``job["lookups"]`` lookups hit, then the rate on Zipf traces.

    Every line is checked against the golden LRU on the way; returns ``{trace: {"lookups",
    "cycles", "hits"}}`` for the all-hit trace and each Zipf one.
    """
    tb, rng = await CacheTB.ready(dut, salt=50)
    count = job["lookups"]
    resident = list(range(tb.golden.sets * tb.golden.ways))  # every set filled, nothing evicted
    await tb.check(tb.lookups(resident), len(resident))
    hits_before = tb.golden.hits
    rows = [int(row) for row in rng.choice(resident, count)]
    cycles = await _timed(tb, rows)
    assert tb.golden.hits - hits_before == count
    # One line per cycle (a row is dim / 16 lines), two cycles of latency, one for the source's valid.
    assert cycles <= count * tb.lines + 4, f"{count} hits took {cycles} cycles; {knobs.describe()}"
    result = {"all hits": {"lookups": count, "cycles": cycles, "hits": count}}
    # Zipf traces over job["zipf_rows"] rows (default the bench's 3,900): fewer rows, more hits.
    for rows in job.get("zipf_rows", (tb.rows,)):
        hits_before = tb.golden.hits
        cycles = await _timed(tb, zipf_rows(count, rows=rows, salt=52))
        result[f"Zipf ({rows:,} rows, alpha 1.05)"] = {"lookups": count, "cycles": cycles,
                                                      "hits": tb.golden.hits - hits_before}
    return result


SESSIONS = {"throughput": throughput_session}


def run_throughput(params, lookups, trace_rows=None):
    """:func:`throughput_session` of ``lookups`` lookups on ``embedding_cache`` built with ``params``
    (Zipf traces over each of ``trace_rows`` rows, by default the one over 3,900)."""
    from scripts.sim.devices import run_session

    job = {"lookups": lookups} | ({"zipf_rows": list(trace_rows)} if trace_rows else {})
    return run_session("embedding_cache", "dlrm.throughput", job, params=params)
