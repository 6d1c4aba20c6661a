"""Host device of the stream blocks (``skid_buffer``, ``stream_fifo``, ``width_converter``): the smoke check.

A stream goes in on ``i`` and the regrouped stream comes out on ``o``; the golden model is
:func:`golden.bus.regroup` (the identity for the skid buffer and the FIFO). :class:`StreamTB`
drives both ends, and :func:`stream_order` pushes random payloads through with random idle
cycles on ``valid`` and random backpressure on ``ready`` and checks that nothing is lost,
duplicated or reordered, and :func:`stream_throughput` measures the rate without stalls. The
bus tests run both; :func:`run_stream_check` runs all four stall patterns in one simulation
(session ``stream.order``), the smoke check of ``neartrain run``, and :func:`run_throughput`
the rate (session ``stream.throughput``), the bus bench's.
"""

from amaranth.hdl import Shape
from amaranth.lib import data
from cocotb.triggers import with_timeout

from golden.bus import random_words, regroup
from scripts.sim import channel, knobs
from scripts.sim.runner import component_from_env
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import ClockedTB, Scoreboard

__all__ = ["STREAM_TRANSFERS", "PATTERNS", "StreamTB", "stream_order", "stream_throughput", "SESSIONS",
           "run_stream_check", "run_throughput"]

STREAM_TRANSFERS = 30000
# (idle gaps on valid, backpressure on ready)
PATTERNS = ((False, False), (False, True), (True, False), (True, True))


class StreamTB(ClockedTB):
    """Clock, reset, the source on ``i`` and the sink on ``o`` of a stream block."""

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


async def stream_order(tb, *, idle, backpressure, salt, count):
    """Reset, then ``count`` narrow-side transfers of random words under the stall pattern; the
    output must be their regrouped stream, nothing missing, duplicated or reordered."""
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


async def stream_throughput(tb, count):
    """Reset, then ``count`` narrow-side transfers with neither side stalling; returns the
    ``transfers``, the ``cycles`` from the first output transfer to the last and the
    ``transfers_per_cycle`` over the intervals between output transfers.

    What came out must be the regrouped input, in order, nothing missing and nothing extra, as
    in :func:`stream_order`: a rate measured on wrong data would be no rate at all.
    """
    await tb.reset()
    words = random_words(knobs.rng(7), max(1, count * min(tb.input_width, tb.output_width) // tb.input_width),
                         tb.input_width)
    expected = regroup(words, input_width=tb.input_width, output_width=tb.output_width,
                       element_width=tb.element_width())
    scoreboard = Scoreboard(f"{channel.block()} o (throughput)")
    scoreboard.expect_many(expected)
    tb.source.send_many(words)

    async def drain():
        scoreboard.check(await tb.sink.recv())
        first = tb.cycle
        for _ in range(len(expected) - 1):
            scoreboard.check(await tb.sink.recv())
        return first

    first = await with_timeout(drain(), 20 * (max(len(words), len(expected)) + 100) * 10, "ns")
    cycles = tb.cycle - first + 1
    await tb.cycles(20)
    while not tb.sink.empty():  # anything beyond the expected stream would be a duplicate
        scoreboard.check(tb.sink.queue.popleft())
    scoreboard.check_complete()
    # Rate over the intervals between output transfers, counted in narrow-side transfers.
    narrow_per_output = max(1, tb.output_width // tb.input_width)
    narrow = len(expected) * narrow_per_output
    rate = (len(expected) - 1) * narrow_per_output / max(1, cycles - 1)
    return {"transfers": narrow, "cycles": cycles, "transfers_per_cycle": rate}


async def order_session(dut, job):
    """Every stall pattern of :data:`PATTERNS` in turn, ``job["transfers"]`` transfers each."""
    tb = StreamTB(dut)
    for idle, backpressure in PATTERNS:
        await stream_order(tb, idle=idle, backpressure=backpressure, salt=2 * idle + backpressure,
                           count=job["transfers"])
    return {"transfers": job["transfers"], "patterns": len(PATTERNS)}


async def throughput_session(dut, job):
    """:func:`stream_throughput` of ``job["transfers"]`` transfers."""
    return await stream_throughput(StreamTB(dut), job["transfers"])


SESSIONS = {"order": order_session, "throughput": throughput_session}


def run_stream_check(block, transfers, params=None):
    """Run :func:`order_session` on ``block``; raises ``SimulationError`` unless the output
    equals :func:`golden.bus.regroup` of the input under every stall pattern."""
    from scripts.sim.devices import run_session

    return run_session(block, "stream.order", {"transfers": transfers}, params=params)


def run_throughput(block, transfers, params=None):
    """:func:`stream_throughput` of ``block`` in a simulation: its result dict."""
    from scripts.sim.devices import run_session

    return run_session(block, "stream.throughput", {"transfers": transfers}, params=params)
