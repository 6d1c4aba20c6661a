"""What the FP units' tests share on Verilator: the generic cocotb tests and the run configurations.

Every unit runs the same cocotb tests, against ``golden.fp`` through
:func:`scripts.sim.devices.fp.golden_binding`; each unit's ``test_<rtl module>.py`` imports
them by name (cocotb runs the tests in a module's namespace) and holds the runners (made by
:mod:`testbenches.fp.suite`):

* :data:`UNIT_TESTS` on the unit itself: the unit's ``i`` stream carries the operands (and a
  tag, when the unit has one); its ``o`` stream must return, in order, the result bits and
  the five flags that the golden model computes. Optional random gaps on ``i.valid`` and
  backpressure on ``o.ready`` check that the fixed-latency pipeline loses, duplicates and
  reorders nothing; ``one_operation_per_cycle`` checks the issue rate (the session that
  bench_fp.py measures with, :func:`scripts.sim.devices.fp.issue_rate_session`).
* :data:`LANES_TEST` on :class:`testbenches.fp.parallel_units.ParallelUnits` (10^6 vectors
  per unit): the same operands (every special against every special, then class-mixing
  random tuples from ``golden.fp``), dealt round-robin over the lanes, with random gaps on
  ``i.valid`` and random backpressure on ``o.ready``. Packing and the comparison with
  ``golden.fp`` are vectorised; the first mismatch names the vector index, its operands, the
  expected and actual bits and flags, and the knobs that reproduce it.

The fast set of runners covers every unit at least once and every arithmetic unit in more
than one format; the slow set (``make test-full``) covers every unit in every format and
subnormal mode (:func:`every_configuration`), and runs 10**6 random vectors per configuration.
"""

import itertools
import os

import cocotb
import numpy as np
from cocotb.triggers import with_timeout

import golden.fp as gfp
from scripts.sim import channel, knobs
from scripts.sim.devices.fp import UnitTB, golden_binding, issue_rate_session, operand_vectors, raw_bits
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses
from scripts.sim.tb import ClockedTB, Scoreboard
from testbenches.fp.parallel_units import ParallelUnits

__all__ = ["UNIT_TESTS", "LANES_TEST", "UnitTB", "LanesTB", "golden_match_under_stalls",
           "one_operation_per_cycle", "reset_mid_transfer", "golden_match_parallel", "every_configuration",
           "configurations", "unary_16_bit_configurations", "configuration_id", "run_unit", "run_lanes",
           "run_million"]

# The cocotb tests of a unit on its own, and the one of its 16-lane fixture.
UNIT_TESTS = ["golden_match_under_stalls", "one_operation_per_cycle", "reset_mid_transfer"]
LANES_TEST = "golden_match_parallel"

UNIT_RANDOM_VECTORS = 3000
# Reset test: rounds of (operations, reset in their middle, clean operations), operations per batch.
RESET_ROUNDS = 25
RESET_OPERATIONS = 200


async def _run_unit(dut, idle, backpressure):
    tb = UnitTB(dut)
    salt = 2 * idle + backpressure
    tb.set_idle_generator(random_pauses(knobs.rng(salt + 100), 0.3) if idle else never())
    tb.set_backpressure_generator(random_pauses(knobs.rng(salt + 200), 0.3) if backpressure else never())
    await tb.reset()

    operands = operand_vectors(tb.binding, knobs.rng(salt), knobs.vectors(UNIT_RANDOM_VECTORS))
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
    await _run_unit(dut, *stalls)


@cocotb.test()
async def one_operation_per_cycle(dut):
    """Back-to-back issue: N operations leave in N + latency - 1 cycles (the bench's session)."""
    await issue_rate_session(dut, None)


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset at a random cycle while operations flow under stalls; the next batch equals golden.fp, alone.

    Each round issues random operands with random valid gaps and backpressure, raises reset
    at a random cycle while they flow (from the first issue to ``latency + 20`` cycles later,
    before the last), then issues new random operands: the output must be exactly their
    golden results and flags (nothing left in the pipeline from before the reset, nothing
    lost), within a cycle bound.
    """
    tb = UnitTB(dut)
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


# ---------------------------------------------------------------- the 16-lane fixture

# The fast suite's size; the slow runner asks for 10**6 through NEARTRAIN_VECTORS.
LANES_RANDOM_VECTORS = 5000
STALL_PROBABILITY = 0.3


class LanesTB(ClockedTB):
    """``lanes`` copies of one FP unit behind one wide stream (:class:`ParallelUnits`)."""

    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env(ParallelUnits)
        params = params_from_env()
        self.block = params["block"]
        self.lanes = params["lanes"]
        self.binding = golden_binding(self.block, self.component_params(params))
        self.source = StreamSource(dut, "i", self.clock)
        self.sink = StreamSink(dut, "o", self.clock)

    def component_params(self, params):
        from rtl.registry import get_block

        return get_block(self.block).resolve(params["unit_params"])

    def set_idle_generator(self, generator=None):
        self.source.set_pause_generator(generator)

    def set_backpressure_generator(self, generator=None):
        self.sink.set_backpressure_generator(generator)

    def pack_inputs(self, operands):
        """One int per cycle: lane k of cycle j carries vector j * lanes + k."""
        layout = self.component.unit_input_layout
        words = [0] * len(operands[0])
        for name, values in zip(self.binding.operands, operands, strict=True):
            offset = layout[name].offset
            for index, value in enumerate(raw_bits(values, layout[name].width)):
                words[index] |= value << offset
        width = layout.size
        return [sum(word << (lane * width) for lane, word in enumerate(words[start:start + self.lanes]))
                for start in range(0, len(words), self.lanes)]

    def unpack_outputs(self, words, count):
        layout = self.component.unit_output_layout
        width, mask = layout.size, (1 << layout.size) - 1
        flat = [(word >> (lane * width)) & mask for word in words for lane in range(self.lanes)][:count]
        fields = {}
        for name in ("result", "flags"):
            field = layout[name]
            field_mask = (1 << field.width) - 1
            fields[name] = np.array([(item >> field.offset) & field_mask for item in flat], dtype=np.uint64)
        return fields


def exhaustive_operands(binding):
    """Every encoding of a unary 16-bit operand, in the golden model's dtype."""
    fmt = binding.operand_format
    if binding.arity != 1 or fmt not in ("f16", "bf16"):
        raise ValueError(f"exhaustive runs are for unary f16/bf16 operands, not {fmt} x {binding.arity}")
    return (np.arange(1 << 16).astype(gfp.special_values(fmt).dtype),)


@cocotb.test()
async def golden_match_parallel(dut):
    """Every vector's bits and flags equal golden.fp, under random valid gaps and backpressure."""
    tb = LanesTB(dut)
    tb.set_idle_generator(random_pauses(knobs.rng(101), STALL_PROBABILITY))
    tb.set_backpressure_generator(random_pauses(knobs.rng(202), STALL_PROBABILITY))
    await tb.reset()

    if channel.job() == "exhaustive":
        operands = exhaustive_operands(tb.binding)
    else:
        operands = operand_vectors(tb.binding, knobs.rng(0), knobs.vectors(LANES_RANDOM_VECTORS))
    count = len(operands[0])
    padding = -count % tb.lanes
    # Pad the last beat with copies of the first vectors; their outputs are dropped.
    padded = tuple(np.concatenate([column, column[:padding]]) for column in operands)
    words = tb.pack_inputs(padded)
    expected_bits, expected_flags = tb.binding.evaluate(*operands)
    width = tb.component.unit_output_layout["result"].width
    expected_bits = np.array(raw_bits(expected_bits, width), dtype=np.uint64)
    expected_flags = np.asarray(expected_flags).astype(np.uint64)

    tb.source.send_many(words)
    received = []

    async def drain():
        for _ in range(len(words)):
            received.append(await tb.sink.recv())

    await with_timeout(drain(), 10 * (4 * len(words) + 1000), "ns")
    await tb.cycles(tb.component.latency + 10)
    assert tb.sink.empty(), f"{tb.block}: results beyond the {len(words)} beats sent"

    actual = tb.unpack_outputs(received, count)
    wrong = np.flatnonzero((actual["result"] != expected_bits) | (actual["flags"] != expected_flags))
    if wrong.size:
        index = int(wrong[0])
        inputs = ", ".join(f"{name}={hex(int(column[index]) & ((1 << 64) - 1))}"
                           for name, column in zip(tb.binding.operands, operands, strict=True))
        expected = f"result {hex(int(expected_bits[index]))} flags {hex(int(expected_flags[index]))}"
        got = f"result {hex(int(actual['result'][index]))} flags {hex(int(actual['flags'][index]))}"
        where = f"{tb.block} {params_from_env()}: {wrong.size} of {count} vectors differ"
        raise AssertionError(
            f"{where}; first at vector {index} ({inputs}): expected {expected}, got {got}; "
            f"reproduce with {knobs.describe(LANES_RANDOM_VECTORS)}")
    dut._log.info("%s: %d vectors match golden.fp in bits and flags (%d lanes, %d cycles)",
                  tb.block, count, tb.lanes, tb.cycle)
    channel.reply({"block": tb.block, "unit_params": params_from_env()["unit_params"], "vectors": count})


# ---------------------------------------------------------------- run configurations and runners

FORMATS = ("f32", "f16", "bf16")
ARITHMETIC = ("fp_add", "fp_mul", "fp_fma", "fp_div", "fp_sqrt")
# 16 copies of the unit check 16 vectors per simulated cycle (see parallel_units.py).
MILLION_LANES = 16


def every_configuration():
    """``(block, params)`` of every unit x format x flush mode (and operation, target, integer)."""
    for block, fmt, flush in itertools.product(ARITHMETIC, FORMATS, (False, True)):
        yield block, {"fmt": fmt, "flush_subnormals": flush}
    for fmt, flush in itertools.product(FORMATS, (False, True)):
        yield "fp_add", {"fmt": fmt, "flush_subnormals": flush, "subtract": True}
        for operation in ("eq", "lt", "le"):
            yield "fp_compare", {"fmt": fmt, "flush_subnormals": flush, "operation": operation}
        for operation in ("min", "max"):
            yield "fp_min_max", {"fmt": fmt, "flush_subnormals": flush, "operation": operation}
        for target in FORMATS:
            if target != fmt:
                yield "fp_convert", {"source": fmt, "target": target, "flush_subnormals": flush}
        for integer in ("i32", "u32"):
            yield "fp_to_int", {"fmt": fmt, "integer": integer, "flush_subnormals": flush}
            yield "int_to_fp", {"fmt": fmt, "integer": integer, "flush_subnormals": flush}


def unary_16_bit_configurations():
    """``(block, params)`` of every unary operation on f16/bf16: sqrt and every conversion."""
    for fmt, flush in itertools.product(("f16", "bf16"), (False, True)):
        yield "fp_sqrt", {"fmt": fmt, "flush_subnormals": flush}
        for target in FORMATS:
            if target != fmt:
                yield "fp_convert", {"source": fmt, "target": target, "flush_subnormals": flush}
        for integer in ("i32", "u32"):
            yield "fp_to_int", {"fmt": fmt, "integer": integer, "flush_subnormals": flush}


def configurations(block, generator=every_configuration):
    """The parameter sets of ``block`` among ``generator()``'s."""
    return [params for name, params in generator() if name == block]


def configuration_id(value):
    return value if isinstance(value, str) else "-".join(f"{k}={w}" for k, w in value.items())


def run_unit(block, module, params):
    """The unit's own cocotb tests (:data:`UNIT_TESTS`, found in ``module``) on ``block``."""
    run_cocotb(block, module, params=params, testcase=UNIT_TESTS)


def run_lanes(block, module, params, lanes, **kwargs):
    """:data:`LANES_TEST` (found in ``module``) on ``lanes`` copies of ``block``."""
    run_cocotb(ParallelUnits, module, params={"block": block, "unit_params": params, "lanes": lanes},
               testcase=LANES_TEST, **kwargs)


def run_million(block, module, params):
    """10**6 vectors (or NEARTRAIN_VECTORS) through :data:`MILLION_LANES` copies of ``block``."""
    run_lanes(block, module, params, MILLION_LANES,
              extra_env={"NEARTRAIN_VECTORS": os.environ.get("NEARTRAIN_VECTORS", "1000000")})
