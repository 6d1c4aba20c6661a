"""cocotb tests shared by every bus block: a stream in on ``i``, the regrouped stream out on ``o``.

The golden model is :func:`golden.bus.regroup` (the identity for the skid buffer and the
FIFO). Each run pushes random payloads through with random idle cycles on ``valid`` and
random backpressure on ``ready`` and checks that nothing is lost, duplicated or reordered.
"""


import cocotb
from amaranth.hdl import Shape
from amaranth.lib import data
from cocotb.triggers import with_timeout

from golden.bus import random_words, regroup
from scripts.sim import channel, knobs
from scripts.sim.runner import component_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, Scoreboard

DEFAULT_TRANSFERS = 30000
# Reset test: rounds of (traffic, reset in its middle, clean stream), narrow-side transfers per stream.
RESET_ROUNDS = 25
RESET_TRANSFERS = 200


class TB(ClockedTB):
    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        self.input_width = len(dut.i__payload)
        self.output_width = len(dut.o__payload)
        self.source = StreamSource(dut, "i", self.clock)
        self.sink = StreamSink(dut, "o", self.clock)

    def set_idle_generator(self, generator=None):
        self.source.set_pause_generator(generator)

    def set_backpressure_generator(self, generator=None):
        self.sink.set_backpressure_generator(generator)

    def element_width(self):
        # Plain pipeline blocks are one element wide; the converter declares its element width.
        layout = stream_layout(self.component, "i")
        if isinstance(layout, data.ArrayLayout):
            return Shape.cast(layout.elem_shape).width
        return self.input_width


async def run_test(dut, idle, backpressure, salt):
    tb = TB(dut)
    count = knobs.vectors(DEFAULT_TRANSFERS)
    data_rng = knobs.rng(salt)
    tb.set_idle_generator(random_pauses(knobs.rng(salt + 100), 0.4) if idle else never())
    tb.set_backpressure_generator(random_pauses(knobs.rng(salt + 200), 0.4) if backpressure else never())
    await tb.reset()

    # The count is of transfers on the narrow side, so a split or gather runs as long as a copy.
    words = random_words(data_rng, max(1, count * min(tb.input_width, tb.output_width) // tb.input_width),
                         tb.input_width)
    expected = regroup(words, input_width=tb.input_width, output_width=tb.output_width,
                       element_width=tb.element_width())
    narrow_transfers = max(len(words), len(expected))
    scoreboard = Scoreboard(f"{channel.block()} o")
    scoreboard.expect_many(expected)
    tb.source.send_many(words)

    async def drain():
        for _ in range(len(expected)):
            scoreboard.check(await tb.sink.recv())

    await with_timeout(drain(), 20 * (narrow_transfers + 100) * 10, "ns")
    await tb.cycles(20)
    # Anything beyond the expected stream would be a duplicate.
    while not tb.sink.empty():
        scoreboard.check(tb.sink.queue.popleft())
    scoreboard.check_complete()


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def stream_order_under_stalls(dut, idle, backpressure):
    """Random data with optional random valid gaps and ready backpressure."""
    await run_test(dut, idle, backpressure, salt=2 * idle + backpressure)


@cocotb.test()
async def throughput_without_stalls(dut):
    """Counts cycles for a stream with neither side stalling (the benchmark reads the result)."""
    tb = TB(dut)
    count = knobs.vectors(4096)
    await tb.reset()
    words = random_words(knobs.rng(7), max(1, count * min(tb.input_width, tb.output_width) // tb.input_width),
                         tb.input_width)
    expected = regroup(words, input_width=tb.input_width, output_width=tb.output_width,
                       element_width=tb.element_width())
    tb.source.send_many(words)
    await tb.sink.recv()
    first = tb.cycle
    for _ in range(len(expected) - 1):
        await tb.sink.recv()
    cycles = tb.cycle - first + 1
    # Rate over the intervals between output transfers, counted in narrow-side transfers.
    narrow_per_output = max(1, tb.output_width // tb.input_width)
    narrow = len(expected) * narrow_per_output
    rate = (len(expected) - 1) * narrow_per_output / max(1, cycles - 1)
    result = {"transfers": narrow, "cycles": cycles, "transfers_per_cycle": rate}
    dut._log.info("throughput: %s", result)
    channel.reply(result)


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset at a random cycle of a stream under random stalls; the next stream equals the golden, alone.

    Each round sends random words with random valid gaps and backpressure, raises reset at a
    random cycle while they flow (0..60 cycles after the first word went in, and before the
    last), then sends new random words: the output must be exactly their regrouped stream
    (nothing from before the reset, nothing lost), within a cycle bound.
    """
    tb = TB(dut)
    rng = knobs.rng(300)
    tb.set_idle_generator(random_pauses(knobs.rng(301), 0.4))
    tb.set_backpressure_generator(random_pauses(knobs.rng(302), 0.4))
    await tb.reset()
    narrow = min(tb.input_width, tb.output_width)
    words_for = max(1, RESET_TRANSFERS * narrow // tb.input_width)
    scoreboard = Scoreboard(f"{channel.block()} o after reset")
    for _ in range(RESET_ROUNDS):
        before = random_words(rng, words_for, tb.input_width)
        sent = tb.source.sent
        tb.source.send_many(before)
        await tb.wait_until(lambda sent=sent: tb.source.sent > sent, cycles=100, what="the first word")
        await tb.reset_mid_transfer(rng, after=(0, 60), drivers=[tb.source, tb.sink])
        assert tb.source.sent - sent < len(before), (
            f"reset after the stream: all {len(before)} words were sent; {knobs.describe()}")
        words = random_words(rng, words_for, tb.input_width)
        expected = regroup(words, input_width=tb.input_width, output_width=tb.output_width,
                           element_width=tb.element_width())
        scoreboard.expect_many(expected)
        tb.source.send_many(words)
        await tb.expect_from(tb.sink, scoreboard, cycles=20 * (max(len(words), len(expected)) + 100))
