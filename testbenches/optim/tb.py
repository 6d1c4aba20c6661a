"""Shared cocotb testbench parts of the optim family: the kernels' counted lane converters.

:class:`LaneConverterTB` drives ``counted_gearbox`` and ``counted_width_converter`` (clock,
reset, a source on ``i`` and a sink on ``o`` with the stalls of :data:`STALLS`, and a
:class:`PortMonitor` on both ports); each test file adds its lengths and its checks.
:func:`back_to_back` and :func:`reset_rounds` are the two converters' test bodies, and
:func:`converter_tests` their cocotb tests.

``NEARTRAIN_SEED`` seeds the data and the stalls; ``NEARTRAIN_VECTORS`` (default 100) is the
number of random lengths per stall pattern (a quarter as many reset rounds).
"""

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge, Timer

from golden.bus import random_words
from scripts.sim import knobs
from scripts.sim.runner import params_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses
from scripts.sim.tb import ClockedTB, Scoreboard, hex_of

__all__ = ["DEFAULT_TENSORS", "STALLS", "SETTLE", "ceil_div", "reproduce", "PortMonitor", "LaneConverterTB",
           "back_to_back", "reset_rounds", "converter_tests", "one_per_cycle", "stall_pattern"]

# Random tensor lengths per stall pattern without NEARTRAIN_VECTORS.
DEFAULT_TENSORS = 100

# (idle probability on the input, backpressure probability on the output) per stall pattern.
STALLS = {"none": (0.0, 0.0), "idle": (0.4, 0.0), "backpressure": (0.0, 0.4), "both": (0.3, 0.5)}
# Cycles the junk beat is held on the input, and the port watched, after a tensor or a reset.
SETTLE = 8


def ceil_div(a, b):
    return -(-a // b)


def reproduce():
    """The knobs that reproduce a failure, for every assertion message."""
    return knobs.describe(DEFAULT_TENSORS)


class PortMonitor:
    """Counts the handshakes on ``i`` and ``o`` and checks that an offered output is held until taken.

    ``edges`` counts rising edges; ``last_output`` is the edge of the latest output transfer.
    Edges in reset are skipped. A driver of :meth:`ClockedTB.reset_mid_transfer`: ``clear()``
    forgets a held output (which the reset may drop) and restarts ``since_clear``, the
    (inputs, outputs) counted since, so that after a reset it counts from the first edge out of it.
    """

    def __init__(self, dut, clock):
        self.dut = dut
        self.edges = self.inputs = self.outputs = self.last_output = 0
        self.since_clear = (0, 0)
        self.violations = []
        self._held = None
        self._task = cocotb.start_soon(self._run(clock))

    def clear(self):
        self._held = None
        self.since_clear = (0, 0)

    async def _run(self, clock):
        dut = self.dut
        while True:
            await RisingEdge(clock)
            self.edges += 1
            if dut.rst.value:
                self._held = None
                continue
            valid, ready = int(dut.o__valid.value), int(dut.o__ready.value)
            payload = int(dut.o__payload.value) if valid else None
            if self._held is not None and (not valid or payload != self._held):
                self.violations.append(f"edge {self.edges}: output {hex_of(self._held)} offered and not "
                                       f"taken, then valid={valid} payload={hex_of(payload)}")
            self._held = payload if valid and not ready else None
            if valid and ready:
                self.outputs += 1
                self.last_output = self.edges
            took = int(dut.i__valid.value) & int(dut.i__ready.value)
            self.inputs += took
            self.since_clear = (self.since_clear[0] + took, self.since_clear[1] + (valid and ready))


class LaneConverterTB(ClockedTB):
    """A converter of ``p`` words per input transfer to ``q`` per output transfer, ``word`` bits each.

    ``stall`` names the pattern of :data:`STALLS`; ``salt`` separates the random streams of the
    tests of one simulation.
    """

    # The block's registry name, for messages.
    name = None
    # Cycles beyond max(inputs, outputs) from the start edge to the last output at full rate.
    full_rate_slack = 2
    # Whether a beat of junk follows each tensor on the input, which the block must not take.
    junk_after = False

    @staticmethod
    def word_width(params):
        """The bits of a word, from the block's parameters."""
        raise NotImplementedError

    def __init__(self, dut, *, stall="none", salt=0):
        super().__init__(dut)
        params = params_from_env()
        self.word = word = self.word_width(params)
        self.p = params["input_width"] // word
        self.q = params["output_width"] // word
        idle, backpressure = STALLS[stall]
        self.source = StreamSource(dut, "i", self.clock,
                                   pause=random_pauses(knobs.rng(100 + salt), idle) if idle else never())
        self.sink = StreamSink(dut, "o", self.clock,
                               backpressure=random_pauses(knobs.rng(200 + salt), backpressure)
                               if backpressure else never())
        self.monitor = PortMonitor(dut, self.clock)
        dut.start.value = 0
        dut.count.value = 0

    def shape(self):
        return f"p={self.p} q={self.q} word={self.word}"

    def beats(self, rng, words):
        """The input transfers of ``words``, the last one filled up with random junk words."""
        padded = list(words) + random_words(rng, self.p, self.word)
        return [sum(padded[b * self.p + j] << (j * self.word) for j in range(self.p))
                for b in range(ceil_div(len(words), self.p))]

    def words_of(self, output, valid):
        """The first ``valid`` words (at most ``q``) of an output transfer."""
        mask = (1 << self.word) - 1
        return [(output >> (j * self.word)) & mask for j in range(min(self.q, valid))]

    async def start(self, n):
        """Drive ``count`` = ``n`` and pulse ``start`` for one cycle.

        Returns after that edge's read-only phase: the source, which has already run for that
        edge, offers what is queued from now on at the next edge at the earliest.
        """
        self.dut.count.value = n
        self.dut.start.value = 1
        await RisingEdge(self.clock)
        self.dut.start.value = 0
        await ReadOnly()
        await Timer(1, "ps")

    async def run(self, rng, n, label, *, full_rate=False):
        """Start a tensor of ``n`` random words, move it through, and check everything about it."""
        p, q = self.p, self.q
        where = f"{label}, n={n}, {self.shape()}"
        words = random_words(rng, n, self.word)
        beats = self.beats(rng, words)
        junk = random_words(rng, 1, p * self.word) if self.junk_after else []
        inputs, outputs = ceil_div(n, p), ceil_div(n, q)
        scoreboard = Scoreboard(f"{self.name} o ({where})")
        scoreboard.expect_many([words[k * q:(k + 1) * q] for k in range(outputs)],
                               [{"output": k, "words": f"{k * q}..{min(n, (k + 1) * q) - 1}"}
                                for k in range(outputs)])
        took, sent = self.monitor.inputs, self.monitor.outputs
        await self.start(n)
        edge = self.monitor.edges
        self.source.send_many(beats + junk)

        async def drain():
            for k in range(outputs):
                scoreboard.check(self.words_of(await self.sink.recv(), n - k * q))

        await self.bounded(drain(), cycles=10 * (inputs + outputs) + 50,
                           what=lambda: f"{where}: {scoreboard.checked} of {outputs} outputs arrived")
        if full_rate and outputs:
            elapsed, bound = self.monitor.last_output - edge, max(inputs, outputs) + self.full_rate_slack
            assert elapsed <= bound, (
                f"{where}: the last output {elapsed} cycles after start, full rate allows {bound}; "
                f"{reproduce()}")
        if self.junk_after:  # the junk beat after the tensor is offered (valid held), not taken
            await self.wait_until(lambda: self.dut.i__valid.value or self.monitor.inputs - took > inputs,
                                  cycles=20 * SETTLE, what=f"{where}: the junk beat after the tensor")
        await self.cycles(SETTLE)
        assert self.monitor.inputs - took == inputs, (
            f"{where}: {self.monitor.inputs - took} inputs taken, expected ceil(n/p) = {inputs}; "
            f"{reproduce()}")
        while not self.sink.empty():  # anything more is an extra output
            scoreboard.check(self.words_of(self.sink.queue.popleft(), q))
        scoreboard.check_complete()
        assert self.monitor.outputs - sent == outputs, (
            f"{where}: {self.monitor.outputs - sent} outputs, expected ceil(n/q) = {outputs}; "
            f"{reproduce()}")
        assert not self.dut.o__valid.value, f"{where}: o.valid after the last output; {reproduce()}"
        self.check_protocol(where)
        self.source.clear()  # drop the junk beat before the next start

    async def cut(self, rng, n, round_):
        """Start a tensor of ``n`` random words and reset while it flows (stalls as configured).

        Returns ``(cycle, where)``: the reset's cycle and the label for messages. Checks that the
        reset came before the tensor's last output.
        """
        inputs, outputs = ceil_div(n, self.p), ceil_div(n, self.q)
        took, sent = self.monitor.inputs, self.monitor.outputs
        await self.start(n)
        self.source.send_many(self.beats(rng, random_words(rng, n, self.word)))

        def flowing(took=took, sent=self.sink.received, outputs=outputs):
            return self.monitor.inputs > took and self.sink.received - sent < outputs

        # At full rate the tensor lasts max(inputs, outputs) cycles; a stalled one longer.
        cycle = await self.reset_mid_transfer(rng, after=(0, max(inputs, outputs) // 2),
                                              drivers=[self.source, self.sink, self.monitor], until=flowing)
        where = f"round {round_}, reset at cycle {cycle} in a tensor of n={n}, {self.shape()}"
        assert self.monitor.outputs - sent < outputs, \
            f"{where}: every output left before the reset; {reproduce()}"
        return cycle, where

    def check_protocol(self, where):
        assert not self.monitor.violations, (f"{where}: output not held until taken: "
                                             f"{self.monitor.violations[:3]}; {reproduce()}")


async def back_to_back(dut, stall, make_tb):
    """The ``tensors_back_to_back`` test body: ``make_tb``'s lengths, one tensor after another."""
    salt = list(STALLS).index(stall)
    tb = make_tb(dut, stall=stall, salt=salt)
    rng = knobs.rng(salt)
    await tb.reset()
    for number, n in enumerate(tb.lengths(rng, knobs.vectors(DEFAULT_TENSORS))):
        await tb.run(rng, n, f"stall={stall} tensor {number}", full_rate=stall == "none")


async def reset_rounds(dut, make_tb):
    """The ``reset_mid_transfer`` test body: rounds of a tensor of ``tb.cut_length(rng)`` words cut by
    a reset under stalls, ``tb.after_reset(rng, where)`` (nothing may move before the next start),
    the handshake check, and a fresh tensor of ``tb.fresh_length(rng)`` words that must be exact."""
    tb = make_tb(dut, stall="both", salt=7)
    rng = knobs.rng(8)
    await tb.reset()
    for round_ in range(max(1, knobs.vectors(DEFAULT_TENSORS) // 4)):
        cycle, where = await tb.cut(rng, tb.cut_length(rng), round_)
        await tb.after_reset(rng, where)
        tb.check_protocol(where)
        await tb.run(rng, tb.fresh_length(rng),
                     f"round {round_}: the tensor after the reset at cycle {cycle}")


def converter_tests(make_tb):
    """The two cocotb tests of a counted converter on ``make_tb``'s bench, as a dict for the test
    module's ``globals()``; cocotb runs them in that module's namespace, under these names."""
    @cocotb.test(name="tensors_back_to_back")
    @cocotb.parametrize(stall=list(STALLS))
    async def tensors_back_to_back(dut, stall):
        """The bench's tensor lengths back to back: words in order, exact transfer counts."""
        await back_to_back(dut, stall, make_tb)

    @cocotb.test(name="reset_mid_transfer")
    async def reset_mid_transfer(dut):
        """Reset while a tensor flows under stalls; nothing moves until a start; a fresh tensor is exact."""
        await reset_rounds(dut, make_tb)

    return {test.name: test for test in (tensors_back_to_back, reset_mid_transfer)}


def stall_pattern(tb, idle, backpressure, *, hold):
    """Random idle cycles (30 %) on ``tb.source`` if ``idle``, random backpressure (probability ``hold``)
    on ``tb.sink`` if ``backpressure``; returns the pattern's salt, 0 to 3, for the test's data."""
    salt = 2 * idle + backpressure
    tb.source.set_pause_generator(random_pauses(knobs.rng(salt + 100), 0.3) if idle else never())
    tb.sink.set_backpressure_generator(random_pauses(knobs.rng(salt + 200), hold) if backpressure
                                       else never())
    return salt

async def one_per_cycle(tb, payloads):
    """Send ``payloads`` back to back to ``tb.source`` with ``tb.sink`` always ready, and check that
    their results leave on consecutive cycles (II = 1, no credit stall)."""
    count = len(payloads)
    tb.source.send_many(payloads)
    cycles = await tb.output_cycles(tb.sink, count)
    assert cycles == count, f"{count} back-to-back transfers left over {cycles} cycles"
