"""The delayed-update parameters in disaggregated memory (``parameter_store``): one AXI4 read of a
partition serves every leaf that asked for it (request buffering), bit-exact.

The testbench stores one step of delayed-update training's new parameters
(:func:`golden.collective.delayed_update_step` on random gradients and state) in a cocotbext-axi
``AxiRam`` where the store expects them (line ``c`` of partition ``p`` at byte
``base + (p * chunks + c) * 64``), and leaves fetch partitions. Every fetch must be answered by
exactly one line sequence whose mask names its leaf, in chunk order, equal to the golden's
parameters; the read bursts on the bus are counted by a :class:`~scripts.sim.axi.BurstMonitor`.
"""

import math

import cocotb
import numpy as np
import pytest

from golden.collective import LINE_WORDS, delayed_update_step, line_value
from scripts.sim import knobs
from scripts.sim.axi import BurstMonitor, FaultyAxiRam, random_pauses_all
from scripts.sim.devices.collective import HYPER
from scripts.sim.runner import component_from_env, resolved_params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB
from testbenches.collective.tb import random_words, rejects_at_elaboration

MAX_BURST = 64  # the store's reader: one burst per read of up to 64 lines


class TB(ClockedTB):
    def __init__(self, dut, *, salt=0, stalls=False):
        super().__init__(dut)
        params = resolved_params_from_env()
        self.leaves, self.partitions, self.chunks = params["leaves"], params["partitions"], params["chunks"]
        self.base = params["base"]
        self.ram = FaultyAxiRam(dut, "m_axi_", self.clock, dut.rst, in_flight=4)
        if stalls:
            self.ram.set_pause_generators(random_pauses_all(knobs.rng(300 + salt), 0.3))
        self.ar = BurstMonitor(dut, "m_axi", self.clock, direction="read", data_width=512,
                               max_burst=MAX_BURST, max_outstanding=2)
        component = component_from_env()
        self.requests = StreamSource(dut, "requests", self.clock, stream_layout(component, "requests"),
                                     pause=random_pauses(knobs.rng(100 + salt), 0.4) if stalls else never())
        self.lines = StreamSink(dut, "o", self.clock, stream_layout(component, "o"),
                                backpressure=random_pauses(knobs.rng(200 + salt), 0.4) if stalls else never())

    @property
    def drivers(self):
        return [self.requests, self.lines]

    def store(self, rng):
        """One golden step's new parameters, written into the RAM; kept as ``(partitions, chunks)`` ints."""
        shape = (self.partitions, self.chunks, LINE_WORDS)
        gradients = random_words(rng, (self.leaves, *shape), specials=0.01)
        state = [random_words(rng, shape, specials=0), random_words(rng, shape, specials=0),
                 random_words(rng, shape, specials=0) & 0x7FFFFFFF]
        params = delayed_update_step(gradients, *state, step=1, **HYPER)[0]
        self.expected = [[line_value(line) for line in lines] for lines in params]
        for p, c in np.ndindex(self.partitions, self.chunks):
            self.ram.write(self.base + (p * self.chunks + c) * 64, self.expected[p][c].to_bytes(64, "little"))

    def fetch(self, leaf, partition):
        self.requests.send_nowait({"leaf": leaf, "partition": partition})

    async def answers(self, count):
        """Take lines until ``count`` fetches are answered; return ``{(leaf, partition): times}`` and the
        masks of the reads, in order. Each read's lines must be its partition's, in chunk order."""
        answered, masks = {}, []

        async def take():
            while sum(answered.values()) < count:
                first = await self.lines.recv()
                got = [first] + [await self.lines.recv() for _ in range(self.chunks - 1)]
                partition, mask = first["partition"], first["leaves"]
                assert [line["chunk"] for line in got] == list(range(self.chunks)), knobs.describe()
                assert [line["last"] for line in got] == [0] * (self.chunks - 1) + [1], knobs.describe()
                assert all(line["partition"] == partition and line["leaves"] == mask for line in got)
                assert [line["data"] for line in got] == self.expected[partition], (
                    f"partition {partition}: parameters differ; {knobs.describe()}")
                masks.append(mask)
                for leaf in range(self.leaves):
                    if mask >> leaf & 1:
                        answered[leaf, partition] = answered.get((leaf, partition), 0) + 1

        await self.bounded(take(), cycles=200 * (count + 1) * self.chunks, what="fetches answered")
        return answered, masks

    def counter(self, name):
        return int(getattr(self.dut, name).value)

    def bursts_per_read(self):
        return math.ceil(self.chunks / MAX_BURST)


@cocotb.test()
async def one_read_serves_every_leaf(dut):
    """While partition 0 is read for leaf 0, every leaf asks for partition 1 (in a random order):
    partition 1 is read ONCE, and that one read answers all of them; out-of-range fetches are
    counted and read nothing."""
    tb = TB(dut, salt=1)
    await tb.reset()
    rng = knobs.rng(11)
    tb.store(rng)
    tb.fetch(0, 0)
    for leaf in rng.permutation(tb.leaves):
        tb.fetch(int(leaf), 1)
    tb.fetch(tb.leaves, 0)  # no such leaf
    tb.fetch(0, tb.partitions)  # no such partition
    answered, masks = await tb.answers(1 + tb.leaves)
    await tb.cycles(20)
    everyone = (1 << tb.leaves) - 1
    assert masks == [1, everyone], f"read masks {masks}; {knobs.describe()}"
    assert answered == {(0, 0): 1, **{(leaf, 1): 1 for leaf in range(tb.leaves)}}
    assert len(tb.ar.bursts) == 2 * tb.bursts_per_read(), f"bursts {tb.ar.bursts}; {knobs.describe()}"
    counts = [tb.counter(name) for name in ("reads", "joined", "bad_requests", "error")]
    assert counts == [2, tb.leaves - 1, 2, 0], f"reads, joined, bad, error: {counts}; {knobs.describe()}"
    assert not tb.ar.violations, tb.ar.violations


@cocotb.test()
async def every_fetch_answered_once_under_stalls(dut):
    """Every leaf fetches every partition, in a random order with random gaps, the memory and the
    consumer stalling at random: each fetch is answered exactly once, bit-exact, and the reads
    (counted on the bus) are fewer than the fetches."""
    tb = TB(dut, salt=2, stalls=True)
    await tb.reset()
    rng = knobs.rng(12)
    tb.store(rng)
    fetches = [(leaf, p) for leaf in range(tb.leaves) for p in range(tb.partitions)]
    for k in rng.permutation(len(fetches)):
        tb.fetch(*fetches[k])
    answered, masks = await tb.answers(len(fetches))
    assert answered == dict.fromkeys(fetches, 1), knobs.describe()
    reads = tb.counter("reads")
    dut._log.info(f"{reads} reads (AR bursts {len(tb.ar.bursts)}) for {len(fetches)} fetches")
    assert len(masks) == reads and len(tb.ar.bursts) == reads * tb.bursts_per_read(), knobs.describe()
    assert reads < len(fetches) and tb.counter("joined") == len(fetches) - reads, (
        f"{reads} reads for {len(fetches)} fetches; {knobs.describe()}")
    assert not tb.ar.violations, tb.ar.violations


SHAPES = {"3_leaves": {"leaves": 3, "partitions": 4, "chunks": 4, "base": 4096}}


# A build of its own (an AXI reader with a 128-beat buffer): make test-full only.
@pytest.mark.slow
@pytest.mark.parametrize("shape", list(SHAPES))
def test_parameter_store(shape):
    run_cocotb("parameter_store", __name__, params=SHAPES[shape])


@pytest.mark.parametrize("params,message", [
    ({"base": 32}, "base must be a multiple of 64"),
    ({"address_width": 12, "partitions": 64, "chunks": 4}, "must fit address_width"),
    ({"leaves": 16}, "leaves"),
])
def test_parameter_store_rejects_bad_parameters_at_elaboration(params, message):
    rejects_at_elaboration("parameter_store", params, message)
