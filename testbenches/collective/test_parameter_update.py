"""The GCU's parameter update: Adam on reduced lines, in place, bit-exact with the optim golden.

The testbench loads the state (parameters and moments), sends each partition's reduced lines
with random gaps (partitions in random order), waits for every partition's ``updated`` pulse,
then reads the parameters back through the fetch port. The moments are checked through the next
step, which reads them. Two back-to-back reductions of one partition check that the second reads
what the first wrote.
"""

import cocotb
import numpy as np
import pytest
from cocotb.triggers import RisingEdge

from golden.collective import LINE_WORDS, line_value, mean_scale
from golden.optim import adam, nonfinite_gradient
from golden.optim.host import scalar_bits
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, resolved_params_from_env, run_cocotb
from scripts.sim.stream import StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB
from testbenches.collective.tb import parametrize_shapes, random_words, rejects_at_elaboration

HYPER = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
LEAVES = 3  # the sums are of 3 leaves: grad_scale = 1/3


def _words(value):
    return np.array([value >> (32 * word) & 0xFFFFFFFF for word in range(LINE_WORDS)], np.uint32)


class TB(ClockedTB):
    def __init__(self, dut, *, idle=True, salt=0):
        super().__init__(dut)
        params = resolved_params_from_env()
        self.partitions, self.chunks = params["partitions"], params["chunks"]
        component = component_from_env()
        self.lines = StreamSource(dut, "i", self.clock, stream_layout(component, "i"),
                                  pause=random_pauses(knobs.rng(salt + 101), 0.4) if idle else never())
        self.loads = StreamSource(dut, "load", self.clock, stream_layout(component, "load"))
        shape = (self.partitions, self.chunks, LINE_WORDS)
        self.state = {name: np.zeros(shape, np.uint32) for name in ("param", "exp_avg", "exp_avg_sq")}
        self.updated = []
        cocotb.start_soon(self._watch())

    @property
    def drivers(self):
        return [self.lines, self.loads]

    async def _watch(self):
        while True:
            await RisingEdge(self.clock)
            if int(self.dut.updated__valid.value):
                self.updated.append(int(self.dut.updated__payload.value))

    async def load(self, rng):
        """Random parameters, zero first moments, non-negative second moments; sent to the block."""
        shape = self.state["param"].shape
        self.state["param"] = random_words(rng, shape, specials=0)
        self.state["exp_avg"] = random_words(rng, shape, specials=0)
        self.state["exp_avg_sq"] = random_words(rng, shape, specials=0) & 0x7FFFFFFF
        for code, name in enumerate(self.state):
            for p, c in np.ndindex(shape[:2]):
                self.loads.send_nowait({"tensor": code, "address": p * self.chunks + c,
                                        "data": line_value(self.state[name][p, c])})
        await self.bounded(self.loads.wait_idle(), cycles=8 * self.loads_pending() + 100, what="loads")

    def loads_pending(self):
        return 3 * self.partitions * self.chunks

    def set_step(self, step):
        for name, bits in scalar_bits("adam", dict(HYPER, step=step, grad_scale=mean_scale(LEAVES))).items():
            getattr(self.dut, f"scalars__{name}").value = bits

    def expect(self, partition, sums, step):
        f32 = {name: self.state[name][partition].view(np.float32) for name in self.state}
        new = adam(f32["param"], sums.view(np.float32), f32["exp_avg"], f32["exp_avg_sq"], step=step,
                   grad_scale=mean_scale(LEAVES), **HYPER)
        for name, value in zip(self.state, new, strict=True):
            self.state[name][partition] = np.asarray(value, np.float32).view(np.uint32)

    def send(self, partition, sums):
        for chunk in range(self.chunks):
            last = int(chunk == self.chunks - 1)
            self.lines.send_nowait({"partition": partition, "chunk": chunk, "last": last,
                                    "data": line_value(sums[chunk])})

    async def step(self, rng, step, order, *, specials=0.0):
        """Reduce ``order`` (partition ids, repeats allowed) with one step's scalars; check the params."""
        self.set_step(step)
        self.updated.clear()
        nonfinite = False
        for partition in order:
            sums = random_words(rng, (self.chunks, LINE_WORDS), specials=specials)
            nonfinite |= nonfinite_gradient(sums.view(np.float32))
            self.expect(partition, sums, step)
            self.send(partition, sums)
        await self.wait_until(lambda: len(self.updated) == len(order), what="updated partitions",
                              cycles=(14 * self.chunks + 400) * len(order) + 1000)
        assert self.updated == list(order), f"updated {self.updated}, sent {list(order)}; {knobs.describe()}"
        await self.check_params(f"step {step}")
        return nonfinite

    async def check_params(self, what):
        self.dut.read_en.value = 1
        for p, c in np.ndindex(self.partitions, self.chunks):
            self.dut.read_addr.value = p * self.chunks + c
            await RisingEdge(self.clock)
            await RisingEdge(self.clock)
            got = _words(int(self.dut.read_data.value))
            want = self.state["param"][p, c]
            assert np.array_equal(got, want), (f"{what}: partition {p} line {c}: got {got.tolist()}, "
                                               f"expected {want.tolist()}; {knobs.describe()}")
        self.dut.read_en.value = 0


async def _loaded(dut, salt, *, idle=True):
    """A reset block with a random state loaded; the TB and the test's generator."""
    tb = TB(dut, idle=idle, salt=salt)
    await tb.reset()
    rng = knobs.rng(40 + salt)
    await tb.load(rng)
    return tb, rng


@cocotb.test()
async def steps_match_the_golden(dut):
    tb, rng = await _loaded(dut, 1)
    for step in range(1, knobs.vectors(3, limit=30) + 1):  # each step updates every partition
        await tb.step(rng, step, rng.permutation(tb.partitions).tolist())
    assert int(dut.nonfinite.value) == 0, knobs.describe()


@cocotb.test()
async def back_to_back_reductions_of_one_partition(dut):
    """The second reduction of a partition must read the state the first one wrote."""
    tb, rng = await _loaded(dut, 2, idle=False)
    await tb.step(rng, 5, [0, 0, 1, 1, 0])


@cocotb.test()
async def nonfinite_sums_set_the_sticky_status(dut):
    tb, rng = await _loaded(dut, 3)
    nonfinite = await tb.step(rng, 1, list(range(tb.partitions)), specials=0.05)
    assert int(dut.nonfinite.value) == int(nonfinite), knobs.describe()


@cocotb.test()
async def bad_loads_are_counted_and_change_nothing(dut):
    """Loads of tensor code 3 (no such tensor) and past the last line are dropped and counted
    (``bad_loads``; before, dropped silently), and the next step still matches the golden."""
    tb, rng = await _loaded(dut, 5)
    lines = tb.partitions * tb.chunks
    bad = [{"tensor": 3, "address": 0, "data": 1}]
    if lines < 1 << (lines - 1).bit_length():  # an address the port can carry past the last line
        bad.append({"tensor": 0, "address": lines, "data": 1})
    for item in bad:
        tb.loads.send_nowait(item)
    await tb.bounded(tb.loads.wait_idle(), cycles=100, what="bad loads")
    await tb.check_params("parameters after bad loads")
    await tb.step(rng, 1, list(range(tb.partitions)))
    assert int(dut.bad_loads.value) == len(bad), knobs.describe()


@cocotb.test()
async def reset_mid_step(dut):
    tb, rng = await _loaded(dut, 4)
    tb.set_step(1)
    for partition in range(tb.partitions):
        tb.send(partition, random_words(rng, (tb.chunks, LINE_WORDS)))
    await tb.reset_mid_transfer(rng, after=(2, 3 * tb.chunks), drivers=tb.drivers)
    await tb.load(rng)  # a reset leaves the stored state half-updated: the host loads it again
    await tb.step(rng, 1, rng.permutation(tb.partitions).tolist())


SHAPES = {
    "2_lanes": {"lanes": 2, "partitions": 4, "chunks": 3},
    "7_lanes": {"lanes": 7, "partitions": 3, "chunks": 5},
}
SLOW_SHAPES = {"7_lanes"}


@parametrize_shapes(SHAPES, SLOW_SHAPES)
def test_parameter_update(shape):
    run_cocotb("parameter_update", __name__, params=SHAPES[shape])


@pytest.mark.parametrize("params,message", [
    ({"lanes": 3}, "lanes must be one of"),
    ({"partitions": 0}, "partitions must be in 1..64"),
    ({"chunks": 257}, "chunks must be in 1..256"),
])
def test_parameter_update_rejects_bad_parameters(params, message):
    rejects_at_elaboration("parameter_update", params, message)
