"""cocotb tests for every FP unit: random and directed operands against ``golden.fp``.

The unit's ``i`` stream carries the operands (and a tag, when the unit has one); its
``o`` stream must return, in order, the result bits and the five flags that the golden
model computes. Optional random gaps on ``i.valid`` and backpressure on ``o.ready``
check that the fixed-latency pipeline loses, duplicates and reorders nothing.
"""


import cocotb
import numpy as np
from cocotb.triggers import with_timeout

from scripts.sim import channel, knobs
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, Scoreboard
from testbenches.fp.bindings import golden_binding, operand_vectors, raw_bits

DEFAULT_RANDOM_VECTORS = 3000
# Reset test: rounds of (operations, reset in their middle, clean operations), operations per batch.
RESET_ROUNDS = 25
RESET_OPERATIONS = 200


class TB(ClockedTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        self.block = channel.block()
        self.binding = golden_binding(self.block, params_from_env())
        self.input_layout = stream_layout(self.component, "i")
        self.output_layout = stream_layout(self.component, "o")
        self.tag_width = self.input_layout.size - sum(
            self.input_layout[name].width for name in self.binding.operands)
        self.source = StreamSource(dut, "i", self.clock, self.input_layout)
        self.sink = StreamSink(dut, "o", self.clock, self.output_layout)

    def set_idle_generator(self, generator=None):
        self.source.set_pause_generator(generator)

    def set_backpressure_generator(self, generator=None):
        self.sink.set_backpressure_generator(generator)

    def payloads(self, operands):
        columns = [raw_bits(values, self.input_layout[name].width)
                   for name, values in zip(self.binding.operands, operands, strict=True)]
        payloads = []
        for index, row in enumerate(zip(*columns, strict=True)):
            payload = dict(zip(self.binding.operands, row, strict=True))
            if self.tag_width:
                payload["tag"] = index & ((1 << self.tag_width) - 1)
            payloads.append(payload)
        return payloads

    def expectations(self, operands):
        result, flags = self.binding.evaluate(*operands)
        width = self.output_layout["result"].width
        expected = []
        flag_list = np.asarray(flags).tolist()
        for index, (value, flag) in enumerate(zip(raw_bits(result, width), flag_list, strict=True)):
            item = {"result": value, "flags": int(flag)}
            if self.tag_width:
                item["tag"] = index & ((1 << self.tag_width) - 1)
            expected.append(item)
        return expected


async def run_test(dut, idle, backpressure):
    tb = TB(dut)
    salt = 2 * idle + backpressure
    tb.set_idle_generator(random_pauses(knobs.rng(salt + 100), 0.3) if idle else never())
    tb.set_backpressure_generator(random_pauses(knobs.rng(salt + 200), 0.3) if backpressure else never())
    await tb.reset()

    operands = operand_vectors(tb.binding, knobs.rng(salt), knobs.vectors(DEFAULT_RANDOM_VECTORS))
    payloads = tb.payloads(operands)
    scoreboard = Scoreboard(f"{tb.block} {params_from_env()}")
    scoreboard.expect_many(tb.expectations(operands), payloads)
    tb.source.send_many(payloads)

    async def drain():
        for _ in range(len(payloads)):
            scoreboard.check(await tb.sink.recv())

    await with_timeout(drain(), 10 * (4 * len(payloads) + 1000), "ns")
    await tb.cycles(tb.component.latency + 10)
    while not tb.sink.empty():
        scoreboard.check(tb.sink.queue.popleft())
    scoreboard.check_complete()


_PATTERNS = [(False, False), (False, True), (True, False), (True, True)]


@cocotb.test()
@cocotb.parametrize(stalls=_PATTERNS)
async def golden_match_under_stalls(dut, stalls):
    """Directed and random operands, bits and flags equal to golden.fp, under (idle, backpressure) stalls."""
    await run_test(dut, *stalls)


@cocotb.test()
async def one_operation_per_cycle(dut):
    """Back-to-back issue: N operations leave in N + latency - 1 cycles (the benchmark reads this)."""
    tb = TB(dut)
    await tb.reset()
    count = 1024
    operands = operand_vectors(tb.binding, knobs.rng(9), count)
    payloads = tb.payloads(operands)[-count:]
    tb.source.send_many(payloads)
    await tb.sink.recv()
    first_out = tb.cycle
    for _ in range(count - 1):
        await tb.sink.recv()
    cycles = tb.cycle - first_out + 1
    result = {"operations": count, "cycles": cycles, "operations_per_cycle": count / cycles,
              "latency": tb.component.latency}
    assert cycles == count, f"{count} back-to-back operations took {cycles} output cycles, expected {count}"
    channel.reply(result)


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset at a random cycle while operations flow under stalls; the next batch equals golden.fp, alone.

    Each round issues random operands with random valid gaps and backpressure, raises reset
    at a random cycle while they flow (from the first issue to ``latency + 20`` cycles later,
    before the last), then issues new random operands: the output must be exactly their
    golden results and flags (nothing left in the pipeline from before the reset, nothing
    lost), within a cycle bound.
    """
    tb = TB(dut)
    rng = knobs.rng(300)
    tb.set_idle_generator(random_pauses(knobs.rng(301), 0.3))
    tb.set_backpressure_generator(random_pauses(knobs.rng(302), 0.3))
    await tb.reset()
    scoreboard = Scoreboard(f"{tb.block} {params_from_env()} after reset")

    def batch():
        # The random tail of operand_vectors (its head is the directed specials).
        return tuple(column[-RESET_OPERATIONS:]
                     for column in operand_vectors(tb.binding, rng, RESET_OPERATIONS))

    for _ in range(RESET_ROUNDS):
        before = tb.payloads(batch())
        sent = tb.source.sent
        tb.source.send_many(before)
        await tb.wait_until(lambda sent=sent: tb.source.sent > sent, cycles=100, what="the first operation")
        await tb.reset_mid_transfer(rng, after=(0, tb.component.latency + 20), drivers=[tb.source, tb.sink])
        assert tb.source.sent - sent < len(before), (
            f"reset after the stream: all {len(before)} operations were issued; {knobs.describe()}")
        operands = batch()
        payloads = tb.payloads(operands)
        scoreboard.expect_many(tb.expectations(operands), payloads)
        tb.source.send_many(payloads)
        await tb.expect_from(tb.sink, scoreboard, cycles=4 * len(payloads) + 1000,
                             settle=tb.component.latency + 10)
