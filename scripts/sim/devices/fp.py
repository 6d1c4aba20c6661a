"""Host device of the FP units: which golden function checks which unit, its operands, and its testbench.

:func:`golden_binding` maps a registered FP block and its parameters to the operand
fields of its input payload, the format of those operands, and the ``golden.fp``
function that computes the expected ``(result, flags)``. :class:`UnitTB` drives one unit
on its own ``i``/``o`` streams. One set of cocotb tests (``testbenches/fp/tb.py``) and one
benchmark then serve every unit: the session ``fp.issue_rate`` (:func:`issue_rate_session`,
run by :func:`measure_issue_rate`) is the bench's issue rate, and a test of every unit.
"""

import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np

import golden.fp as gfp
from scripts.sim import channel, knobs
from scripts.sim.runner import component_from_env, params_from_env
from scripts.sim.stream import StreamSink, StreamSource, stream_layout
from scripts.sim.tb import ClockedTB

__all__ = ["GoldenBinding", "golden_binding", "operand_vectors", "raw_bits", "UnitTB", "issue_rate_session",
           "SESSIONS", "measure_issue_rate"]


@dataclass(frozen=True)
class GoldenBinding:
    """How to drive and check one FP unit configuration."""

    operands: tuple
    operand_format: str
    evaluate: Callable

    @property
    def arity(self):
        return len(self.operands)


def _arithmetic(function, operands, params):
    fmt, flush = params["fmt"], params["flush_subnormals"]
    return GoldenBinding(operands, fmt, lambda *xs: function(*xs, fmt=fmt, flush_subnormals=flush))


def golden_binding(block, params):
    """The :class:`GoldenBinding` of registered FP block ``block`` with full parameters ``params``.

    Raises
    ------
    ValueError
        For a block this table does not know.
    """
    if block == "fp_add":
        return _arithmetic(gfp.sub if params.get("subtract") else gfp.add, ("a", "b"), params)
    if block == "fp_mul":
        return _arithmetic(gfp.mul, ("a", "b"), params)
    if block == "fp_fma":
        return _arithmetic(gfp.fma, ("a", "b", "c"), params)
    if block == "fp_div":
        return _arithmetic(gfp.div, ("a", "b"), params)
    if block == "fp_sqrt":
        return _arithmetic(gfp.sqrt, ("a",), params)
    if block in ("fp_compare", "fp_min_max"):
        function = getattr(gfp, params["operation"])
        binding = _arithmetic(function, ("a", "b"), params)
        if block == "fp_compare":
            def evaluate(a, b):
                return tuple(np.asarray(x).astype(np.uint64) for x in binding.evaluate(a, b))
            return GoldenBinding(binding.operands, binding.operand_format, evaluate)
        return binding
    if block in ("fp_convert", "fp_to_int", "int_to_fp"):
        if block == "fp_convert":
            source, target = params["source"], params["target"]
        elif block == "fp_to_int":
            source, target = params["fmt"], params["integer"]
        else:
            source, target = params["integer"], params["fmt"]
        flush = params["flush_subnormals"]
        return GoldenBinding(("a",), source,
                             lambda x: gfp.convert(x, source, target, flush_subnormals=flush))
    raise ValueError(f"no golden binding for FP block {block!r}")


def operand_vectors(binding, rng, count):
    """Directed operands followed by ``count`` random tuples, in the golden model's own dtypes.

    For float operands the directed part is every special value against every other (for
    fma the third operand cycles through them); integer operands are all random (their
    generator already mixes in the range edges and rounding boundaries).
    """
    fmt = binding.operand_format
    if fmt in gfp.INTEGER_FORMATS:
        return (gfp.random_operands(rng, count, fmt),)
    specials = gfp.special_values(fmt)
    pairs = list(itertools.product(specials, repeat=min(binding.arity, 2)))
    directed = [np.array(column, dtype=specials.dtype) for column in zip(*pairs, strict=True)]
    if binding.arity == 3:
        directed.append(np.resize(specials, len(pairs)))
    random = gfp.random_operand_tuples(rng, count, fmt, binding.arity)
    return tuple(np.concatenate([d, r.astype(specials.dtype)]) for d, r in zip(directed, random, strict=True))


def raw_bits(values, width):
    """Two's-complement raw bits of ``values`` (any integer dtype) as Python ints of ``width`` bits."""
    mask = (1 << width) - 1
    return [int(v) & mask for v in np.asarray(values).astype(np.int64)]


class UnitTB(ClockedTB):
    """One FP unit on its own ``i``/``o`` streams."""

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


async def issue_rate_session(dut, job):
    """Back-to-back issue: N operations leave in N + latency - 1 cycles. Returns ``operations``,
    ``cycles`` (first to last result), ``operations_per_cycle`` and the unit's ``latency``; ``job``
    is unused."""
    tb = UnitTB(dut)
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
    return result


SESSIONS = {"issue_rate": issue_rate_session}


def measure_issue_rate(block, params=None):
    """:func:`issue_rate_session` on the FP unit ``block`` built with ``params``: its result dict."""
    from scripts.sim.devices import run_session

    return run_session(block, "fp.issue_rate", None, params=params)
