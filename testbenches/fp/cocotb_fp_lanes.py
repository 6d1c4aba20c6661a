"""cocotb test for :class:`testbenches.fp.parallel_units.ParallelUnits`: 10^6 vectors per FP unit.

The same operands as ``cocotb_fp_unit`` (every special against every special, then class-
mixing random tuples from ``golden.fp``), dealt round-robin over the lanes, with random
gaps on ``i.valid`` and random backpressure on ``o.ready``. Packing and the comparison with
``golden.fp`` are vectorised; the first mismatch names the vector index, its operands, the
expected and actual bits and flags, and the knobs that reproduce it.
"""


import cocotb
import numpy as np
from cocotb.triggers import with_timeout

import golden.fp as gfp
from scripts.sim import channel, knobs
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, random_pauses
from scripts.sim.tb import ClockedTB
from testbenches.fp.bindings import golden_binding, operand_vectors, raw_bits
from testbenches.fp.parallel_units import ParallelUnits

# The fast suite's size; the slow runner asks for 10**6 through NEARTRAIN_VECTORS.
DEFAULT_RANDOM_VECTORS = 5000
STALL_PROBABILITY = 0.3


class TB(ClockedTB):
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
    tb = TB(dut)
    tb.set_idle_generator(random_pauses(knobs.rng(101), STALL_PROBABILITY))
    tb.set_backpressure_generator(random_pauses(knobs.rng(202), STALL_PROBABILITY))
    await tb.reset()

    if channel.job() == "exhaustive":
        operands = exhaustive_operands(tb.binding)
    else:
        operands = operand_vectors(tb.binding, knobs.rng(0), knobs.vectors(DEFAULT_RANDOM_VECTORS))
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
            f"reproduce with {knobs.describe(DEFAULT_RANDOM_VECTORS)}")
    dut._log.info("%s: %d vectors match golden.fp in bits and flags (%d lanes, %d cycles)",
                  tb.block, count, tb.lanes, tb.cycle)
    channel.reply({"block": tb.block, "unit_params": params_from_env()["unit_params"], "vectors": count})
