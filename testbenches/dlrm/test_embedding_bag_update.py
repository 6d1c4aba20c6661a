"""The embedding-bag training step (SGD): HBM rows after one step bit-exact (raw bits) with the golden.

Random batches in ``KeyedJaggedTensor`` layout (bags of 0 to 6 lookups, a few rows out of range,
lookups of a table that does not exist mixed in) and random pooled gradients (every magnitude,
one word in a hundred raw bits: NaNs and infinities, whose rows are counted and not updated) go
through ``embedding_bag_update`` with random gaps on ``i`` and pauses on every AXI channel of the
HBM model. After the step, every row of every table in HBM must equal, bit for bit,
:func:`golden.dlrm.embedding_bag.row_gradients` (``capacity`` = the block's) then
:func:`golden.dlrm.embedding_bag.sgd_rows`; the counters must be the golden's. A reset in the
middle of a step leaves a block that applies the next step exactly to whatever HBM then holds.
``NEARTRAIN_SEED`` and ``NEARTRAIN_VECTORS`` (steps) are printed on failure. One Verilator build,
under ``@pytest.mark.slow`` (the fast suite is at its time limit).
"""


import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge

from golden.dlrm import JaggedBatch
from golden.dlrm.embedding_bag import row_gradients, sgd_rows
from scripts.sim import knobs
from scripts.sim.devices.dlrm import BASE
from scripts.sim.devices.dlrm_bag import hbm
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB
from testbenches.collective.tb import parametrize_shapes, rejects_at_elaboration

SPARE_ROWS = 6  # rows from `rows` up to 2**row_bits - 1: out of range, yet the row field holds them


def _random_floats(rng, shape):
    """float32 of every magnitude; one word in 100 raw bits (NaNs, infinities)."""
    values = (rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))).astype(np.float32)
    raw = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.where(rng.random(shape) < 0.01, raw, values)


class UpdateTB(ClockedTB):
    """The block, its HBM (an ``AxiRam`` holding every table) and the golden step.

    Table ``t`` has ``rows = 2**row_bits - SPARE_ROWS`` rows at byte ``BASE + t * 2**row_bits * dim
    * 4``. :meth:`step` queues a batch's items and returns the golden tables and counts.
    """

    def __init__(self, dut, *, stall=0.0, salt=0):
        super().__init__(dut)
        self.component = component_from_env()
        p = params_from_env()
        self.tables, self.row_bits, self.dim = p["tables"], p["row_bits"], p["dim"]
        self.capacity = p["capacity"]
        self.lines, self.stall = self.dim // 16, stall
        self.rows = (1 << self.row_bits) - SPARE_ROWS
        self.ram = hbm(self, stall=stall, salt=salt)
        for t in range(self.tables):
            self.ram.write(self._address(t), _random_floats(knobs.rng(salt + 10 + t),
                                                            (1 << self.row_bits, self.dim)).tobytes())
        pause = random_pauses(knobs.rng(salt + 3), stall) if stall else never()
        self.source = StreamSource(dut, "i", self.clock, stream_layout(self.component, "i"), pause=pause)
        dut.rows.value, dut.base.value = self.rows, BASE
        self.expected = {"bad_index": 0, "bad_gradient": 0, "updates": 0}

    def _address(self, table):
        return BASE + (table << self.row_bits) * self.dim * 4

    def table(self, t):
        """Table ``t`` as HBM holds it now, ``(2**row_bits, dim)`` float32."""
        size = (1 << self.row_bits) * self.dim * 4
        return np.frombuffer(self.ram.read(self._address(t), size), np.float32).reshape(-1, self.dim)

    def random_batch(self, rng, samples, *, bad=0.05):
        """Bags of 0 to 6 rows drawn from ``capacity / (dim / 16)`` rows of each table (so the
        reduction never overflows), a ``bad`` fraction out of range (at least one if ``bad``)."""
        touched = [rng.choice(self.rows, self.capacity // self.lines, replace=False)
                   for _ in range(self.tables)]
        lengths = rng.integers(0, 7, self.tables * samples)
        values = np.concatenate([rng.choice(touched[slot // samples], n) for slot, n in enumerate(lengths)]
                                + [np.zeros(0, np.int64)]).astype(np.int64)
        wrong = rng.random(values.size) < bad
        if bad and values.size:
            wrong[rng.integers(values.size)] = True  # at least one, whatever the draw
        values[wrong] = rng.integers(self.rows, 1 << self.row_bits, int(wrong.sum()))
        return JaggedBatch(values, np.concatenate([[0], np.cumsum(lengths)]), self.tables)

    def step(self, batch, rng, *, lr, bad_tables=0):
        """Queue the step's items (each bag's gradient lines, then its lookups, table by table, ``last``
        on each table's final item) and ``bad_tables`` lookups of a missing table among them; return
        the golden tables."""
        grad = _random_floats(rng, (self.tables, batch.batch, self.dim))
        # A bag in twenty, and one that looked something up, with a NaN or an infinity: the rows it
        # looked up are not updated.
        poisoned = rng.random((self.tables, batch.batch)) < 0.05
        looked = np.flatnonzero(np.diff(batch.offsets))
        if looked.size:
            poisoned.flat[rng.choice(looked)] = True
        specials = rng.choice([np.inf, -np.inf, np.nan], int(poisoned.sum()))
        grad[poisoned, int(rng.integers(self.dim))] = specials
        words = grad.view(np.uint32)
        items = []
        for t in range(self.tables):
            for sample in range(batch.batch):
                for line in range(self.lines):
                    data = words[t, sample, 16 * line:16 * line + 16].tobytes()
                    items.append({"gradient": 1, "row": 0, "table": 0, "line": line, "last": 0,
                                  "data": int.from_bytes(data, "little")})
                items += [{"gradient": 0, "row": int(row), "table": t, "line": 0, "last": 0, "data": 0}
                          for row in batch.bag(t, sample)]
            items[-1]["last"] = 1
        missing = (1 << max(1, (self.tables - 1).bit_length())) - self.tables
        if missing and bad_tables:
            for position in sorted(rng.choice(len(items), bad_tables), reverse=True):
                items.insert(int(position), {"gradient": 0, "row": 0, "table": self.tables, "line": 0,
                                             "last": 0, "data": 0})
            self.expected["bad_index"] += bad_tables
        self.expected["bad_index"] += int(np.sum(batch.values >= self.rows))
        self.dut.lr.value = int(np.float32(lr).view(np.uint32))
        golden, self.step_rows = [], 0
        for t in range(self.tables):
            rows = row_gradients(batch, grad, t, rows=self.rows, capacity=self.capacity)
            new, bad = sgd_rows(self.table(t), rows, lr=lr)
            golden.append(new)
            self.expected["bad_gradient"] += bad
            self.expected["updates"] += (len(rows) - bad) * self.lines
            self.step_rows += len(rows) - bad
        for item in items:
            self.source.send_nowait(item)
        self.started = self.cycle
        return golden

    async def check(self, golden, *, cycles):
        """Wait for every update to be written (and HBM quiet), then compare HBM and the counters."""
        dut, quiet = self.dut, 0
        await self.bounded(self.source.wait_idle(), cycles=cycles, what="the step's items taken")
        for _ in range(cycles):
            await RisingEdge(self.clock)
            busy = any(int(getattr(dut, f"m_axi__{name}valid").value) for name in ("aw", "w", "b"))
            done = int(dut.updates.value) >= self.expected["updates"]
            quiet = quiet + 1 if done and not busy else 0
            if quiet > 100:
                break
        cycles = self.cycle - self.started - 101  # less the quiet cycles waited
        cocotb.log.info(f"step: {self.step_rows} rows updated in {cycles} cycles from the first item queued")
        names = (*self.expected, "overflows", "hbm_error")
        counters = {name: int(getattr(dut, name).value) for name in names}
        assert counters == {**self.expected, "overflows": 0, "hbm_error": 0}, \
            f"counters {counters} != golden {self.expected}; {knobs.describe()}"
        for t, expected in enumerate(golden):
            got, want = self.table(t).view(np.uint32), expected.view(np.uint32)
            wrong = np.flatnonzero(np.any(got != want, axis=1))
            assert not wrong.size, (f"table {t}: rows {wrong[:8].tolist()} differ, e.g. row {wrong[0]}: "
                                    f"{got[wrong[0]][:4]} != {want[wrong[0]][:4]}; {knobs.describe()}")


def _cycles(batch, tb):
    return int((batch.values.size * tb.lines * 8 + tb.tables * tb.capacity * 80 + 2000) * (1 + 6 * tb.stall))


@cocotb.test()
@cocotb.parametrize(stall=[0.0, 0.3])
async def steps_match_the_golden(dut, stall):
    tb = UpdateTB(dut, stall=stall, salt=int(stall * 10))
    await tb.reset()
    rng = knobs.rng(200 + int(stall * 10))
    for number in range(knobs.vectors(3)):
        batch = tb.random_batch(rng, int(rng.integers(1, 9)), bad=0.1 if number % 2 else 0.0)
        golden = tb.step(batch, rng, lr=float(rng.uniform(0.001, 2.0)), bad_tables=3)
        await tb.check(golden, cycles=_cycles(batch, tb))
    assert min(tb.expected.values()) > 0, f"a check that checked nothing: {tb.expected}"
    # A step whose lookups are all out of range changes nothing and ends.
    all_bad = JaggedBatch(np.full(5, tb.rows, np.int64), np.array([0, 2] + [5] * (tb.tables * 2 - 1)),
                          tb.tables)
    golden = tb.step(all_bad, rng, lr=0.5)
    await tb.check(golden, cycles=_cycles(all_bad, tb))


@cocotb.test()
async def reset_in_the_middle_of_a_step(dut):
    tb = UpdateTB(dut, stall=0.2, salt=40)
    await tb.reset()
    rng = knobs.rng(240)
    tb.step(tb.random_batch(rng, 16), rng, lr=0.25)

    # Cut the step among its HBM writes: 0 to 2 cycles after a random one of them was taken.
    cut = int(rng.integers(1, max(tb.expected["updates"], 2)))
    await tb.wait_until(lambda: int(tb.dut.updates.value) >= cut, cycles=4000, what=f"update {cut}")
    await tb.reset_mid_transfer(rng, after=(0, 2), drivers=[tb.source])
    await tb.cycles(50)
    tb.expected = {"bad_index": 0, "bad_gradient": 0, "updates": 0}
    batch = tb.random_batch(rng, 8)
    golden = tb.step(batch, rng, lr=0.75, bad_tables=2)  # from the tables as the reset left them
    await tb.check(golden, cycles=_cycles(batch, tb))


SHAPES = {
    # Three tables (the table field's fourth value is out of range), one-line rows, a cache of 8 rows.
    "small": {"tables": 3, "row_bits": 5, "dim": 16, "sets": 4, "ways": 2, "capacity": 16},
    # Two-line rows (gradient lines, products and results indexed by line), two tables.
    "dim32": {"tables": 2, "row_bits": 5, "dim": 32, "sets": 4, "ways": 2, "capacity": 16},
}


@parametrize_shapes(SHAPES, set(SHAPES))
def test_embedding_bag_update(shape):
    run_cocotb("embedding_bag_update", __name__, params=SHAPES[shape],
               testcase=["steps_match_the_golden", "reset_in_the_middle_of_a_step"])


@pytest.mark.parametrize("params, message", [
    ({"dim": 128, "capacity": 4}, r"capacity must hold a row's 8 lines"),
    ({"sets": 12}, r"sets must be a power of two"),
])
def test_parameters_outside_the_reduction_are_elaboration_errors(params, message):
    rejects_at_elaboration("embedding_bag_update", params, message)
