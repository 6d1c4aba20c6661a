"""Tests of ``axi_burst_planner`` (:class:`rtl.bus.axi_burst_planner.AXIBurstPlanner`).

The cocotb tests feed ``(address, length)`` commands on ``cmd`` and collect the bursts on
``burst``. Every burst sequence is checked twice: against the golden cutter
:func:`golden.bus.bursts.cut_commands`, and directly for the three rules, without the golden
(no burst longer than ``max_burst``, none crossing a 4 KB boundary, and the bursts of a
command cover it exactly once, in order, with ``final`` on the last one only).

* ``every_start_alignment``: every beat-aligned start address of a small address space,
  each with a spread of lengths around ``max_burst`` and the page size;
* ``random_commands``: random commands (page ends, the top of the address space, long ones)
  with random valid gaps on ``cmd`` and backpressure on ``burst``;
* ``reset_mid_transfer``: reset while bursts flow, then a clean run with nothing left over;
* ``one_burst_commands_rate``: commands of one burst each, sent without gaps, leave one per
  cycle with ``back_to_back`` and one per two cycles without it.

Each model runs with ``back_to_back`` set or not (the ``-B`` in a test id marks it set).

The pytest runners are at the bottom of this file.
"""

import cocotb
import numpy as np
import pytest
from cocotb.triggers import with_timeout

from golden.bus.bursts import PAGE_BYTES, cut_command, cut_commands
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.stream import StreamSink, StreamSource, never, random_pauses, stream_layout
from scripts.sim.tb import CLOCK_PERIOD_NS, ClockedTB, Scoreboard

PAUSE = 0.35
DEFAULT_COMMANDS = 400
ROUND = 500


class TB(ClockedTB):
    def __init__(self, dut, *, idle=False, backpressure=False, salt=0):
        super().__init__(dut)
        component = component_from_env()
        params = params_from_env()
        self.address_width = params.get("address_width", 64)
        self.data_width = params.get("data_width", 512)
        self.max_burst = params.get("max_burst", 64)
        self.length_width = params.get("length_width", 32)
        self.back_to_back = params.get("back_to_back", False)
        self.beat_bytes = self.data_width // 8
        self.geometry = {"data_width": self.data_width, "max_burst": self.max_burst,
                         "address_width": self.address_width}
        self.cmd = StreamSource(dut, "cmd", self.clock, stream_layout(component, "cmd"),
                                pause=random_pauses(knobs.rng(100 + salt), PAUSE) if idle else never())
        self.sink = StreamSink(dut, "burst", self.clock, stream_layout(component, "burst"),
                               backpressure=random_pauses(knobs.rng(200 + salt), PAUSE)
                               if backpressure else never())

    def send(self, commands):
        self.cmd.send_many([{"address": address, "length": length} for address, length in commands])

    async def run(self, commands, label):
        """Send ``commands``, receive their bursts within a cycle bound, check golden and rules."""
        expected = cut_commands(commands, **self.geometry)
        scoreboard = Scoreboard(f"axi_burst_planner burst ({label})")
        scoreboard.expect_many([{"address": a, "beats": b, "final": int(f)} for a, b, f in expected])
        self.send(commands)
        received = []

        async def drain():
            for _ in range(len(expected)):
                burst = await self.sink.recv()
                received.append(burst)
                scoreboard.check(burst)
            await self.cmd.wait_idle()

        bound = 8 * (len(expected) + len(commands)) + 200
        await with_timeout(drain(), bound * CLOCK_PERIOD_NS, "ns")
        await self.cycles(10)
        while not self.sink.empty():  # a burst beyond the golden ones is a duplicate
            scoreboard.check(self.sink.queue.popleft())
        scoreboard.check_complete()
        assert not self.dut.busy.value, f"{label}: busy stays high after the last burst; {knobs.describe()}"
        check_rules(commands, received, **self.geometry)


def check_rules(commands, bursts, *, data_width, max_burst, address_width):
    """The planner's three rules on its own output, without the golden cutter."""
    beat_bytes = data_width // 8
    space = 1 << address_width
    position = 0
    for number, (address, length) in enumerate(commands):
        if not length:
            continue
        where = f"command {number} ({address:#x}, {length} beats)"
        next_address = (address % space) & ~(beat_bytes - 1)
        covered = 0
        while True:
            assert position < len(bursts), \
                f"{where}: its bursts end after {covered} beats; {knobs.describe()}"
            burst = bursts[position]
            position += 1
            start, beats = burst["address"], burst["beats"]
            assert 1 <= beats <= max_burst, \
                f"{where}: burst {burst} outside 1..{max_burst}; {knobs.describe()}"
            assert start % PAGE_BYTES + beats * beat_bytes <= PAGE_BYTES, \
                f"{where}: burst {burst} crosses a 4 KB boundary; {knobs.describe()}"
            assert start == next_address, \
                f"{where}: burst {burst} starts at {start:#x}, not {next_address:#x}; {knobs.describe()}"
            covered += beats
            next_address = (start + beats * beat_bytes) % space
            assert covered <= length, f"{where}: bursts cover {covered} beats; {knobs.describe()}"
            assert burst["final"] == (covered == length), \
                f"{where}: final={burst['final']} after {covered} beats; {knobs.describe()}"
            if covered == length:
                break
    assert position == len(bursts), \
        f"{len(bursts) - position} bursts belong to no command; {knobs.describe()}"


def lengths_to_try(max_burst, page_beats, length_limit):
    """Lengths around 1, ``max_burst`` and the page, each at most ``length_limit``."""
    lengths = {0, 1, 2, 3, page_beats - 1, page_beats, page_beats + 1, 2 * page_beats + 3, length_limit}
    for k in (1, 2, 3):
        lengths |= {k * max_burst - 1, k * max_burst, k * max_burst + 1}
    return sorted(length for length in lengths if 0 <= length <= length_limit)


def random_commands(rng, count, tb):
    """Random commands: random, page-end and top-of-space addresses, short to long lengths, some 0."""
    space = 1 << tb.address_width
    length_limit = (1 << tb.length_width) - 1
    page_beats = PAGE_BYTES // tb.beat_bytes
    commands = []
    for _ in range(count):
        kind = rng.random()
        if kind < 0.3:  # a few beats before a page end
            page = int(rng.integers(0, space // PAGE_BYTES))
            address = page * PAGE_BYTES - int(rng.integers(1, min(8, page_beats) + 1)) * tb.beat_bytes
        elif kind < 0.4:  # just below the top of the address space: the planner's address wraps
            address = space - int(rng.integers(1, page_beats + 1)) * tb.beat_bytes
        else:
            address = int(rng.integers(0, space, dtype=np.uint64))
        address = (address % space) | int(rng.integers(0, tb.beat_bytes))  # low bits are ignored
        scale = (tb.max_burst + 2, 4 * tb.max_burst, 3 * page_beats)[int(rng.integers(3))]
        length = int(rng.integers(0, min(scale, length_limit) + 1))
        if rng.random() < 0.02:
            length = length_limit if length_limit <= 4 * page_beats else 0
        commands.append((address, length))
    return commands


@cocotb.test()
async def every_start_alignment(dut):
    """Every beat-aligned start address of the address space with lengths around max_burst and a page."""
    tb = TB(dut)
    await tb.reset()
    page_beats = PAGE_BYTES // tb.beat_bytes
    lengths = lengths_to_try(tb.max_burst, page_beats, (1 << tb.length_width) - 1)
    rng = knobs.rng(1)
    commands = [((beat * tb.beat_bytes) | int(rng.integers(0, tb.beat_bytes)), length)
                for beat in range((1 << tb.address_width) // tb.beat_bytes) for length in lengths]
    await tb.run(commands, f"{len(commands)} commands, lengths {lengths}")


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def random_commands_under_stalls(dut, idle, backpressure):
    """Random commands with random valid gaps on cmd and backpressure on burst."""
    salt = 10 + 2 * idle + backpressure
    tb = TB(dut, idle=idle, backpressure=backpressure, salt=salt)
    await tb.reset()
    rng = knobs.rng(salt)
    total = knobs.vectors(DEFAULT_COMMANDS)
    for first in range(0, total, ROUND):  # in rounds, so that a long run keeps little in memory
        commands = random_commands(rng, min(ROUND, total - first), tb)
        await tb.run(commands, f"idle={idle} backpressure={backpressure}, commands {first}..")


@cocotb.test()
async def one_burst_commands_rate(dut):
    """Commands of one burst each, waiting on cmd, with no backpressure: their bursts leave one per
    cycle with back_to_back, one per two cycles without (and they equal the golden cutter's)."""
    tb = TB(dut)
    await tb.reset()
    rng = knobs.rng(40)
    page_beats = PAGE_BYTES // tb.beat_bytes
    longest = min(tb.max_burst, page_beats, (1 << tb.length_width) - 1)
    commands = []
    for _ in range(64):  # a random length that fits in one burst, from a beat that leaves it room
        length = int(rng.integers(1, longest + 1))
        page = int(rng.integers(0, (1 << tb.address_width) // PAGE_BYTES, dtype=np.uint64))
        beat = int(rng.integers(0, page_beats - length + 1))
        commands.append((page * PAGE_BYTES + beat * tb.beat_bytes, length))
    expected = cut_commands(commands, **tb.geometry)
    assert len(expected) == len(commands), "the commands must be of one burst each"
    scoreboard = Scoreboard("axi_burst_planner burst (one-burst commands)")
    scoreboard.expect_many([{"address": a, "beats": b, "final": int(f)} for a, b, f in expected])
    tb.send(commands)
    arrived = []
    for _ in expected:
        burst = await tb.bounded(tb.sink.recv(), cycles=4 * len(commands) + 20, what="one-burst bursts")
        scoreboard.check(burst)
        arrived.append(tb.cycle)
    scoreboard.check_complete()
    cycles = arrived[-1] - arrived[0] + 1
    want = len(commands) if tb.back_to_back else 2 * len(commands) - 1
    assert cycles == want, (f"{len(commands)} one-burst commands took {cycles} cycles, not {want} "
                            f"(back_to_back={tb.back_to_back}); {knobs.describe()}")


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset at a random cycle while bursts flow under stalls; then a clean run equals the golden."""
    tb = TB(dut, idle=True, backpressure=True, salt=30)
    rng = knobs.rng(31)
    await tb.reset()
    for round_ in range(max(1, knobs.vectors(DEFAULT_COMMANDS) // 40)):
        doomed = random_commands(rng, 40, tb)
        tb.send(doomed)
        busy_at = sum(len(cut_command(a, n, **tb.geometry)) for a, n in doomed[:3])
        cycle = await tb.reset_mid_transfer(rng, after=(1, 2 * busy_at + 4), drivers=[tb.cmd, tb.sink])
        assert not tb.dut.busy.value, f"round {round_}: busy after reset at cycle {cycle}; {knobs.describe()}"
        await tb.run(random_commands(rng, 40, tb), f"round {round_}, after a reset at cycle {cycle}")


# ---------------------------------------------------------------- pytest runners and golden checks

MODULE = __name__


def planner(address_width, data_width, max_burst, length_width, back_to_back=False):
    return {"address_width": address_width, "data_width": data_width, "max_burst": max_burst,
            "length_width": length_width, "back_to_back": back_to_back}


def _id(params):
    return "A{address_width}-D{data_width}-M{max_burst}-L{length_width}".format(**params) + (
        "-B" if params["back_to_back"] else "")


# Small address spaces: every start alignment, exhaustively. The second has a max_burst that is
# not a power of two and a page of only 32 beats; the slow one a page of 4096 one-byte beats.
# back_to_back is set on one fast model and left off on the other (no more models in the fast
# suite); the slow ones add the other setting of each.
EXHAUSTIVE = [
    planner(13, 256, 16, 9),
    planner(12, 1024, 5, 7, back_to_back=True),
    pytest.param(planner(12, 8, 256, 13), marks=pytest.mark.slow),
    pytest.param(planner(13, 256, 16, 9, back_to_back=True), marks=pytest.mark.slow),
    pytest.param(planner(12, 1024, 5, 7), marks=pytest.mark.slow),
    pytest.param(planner(12, 8, 256, 13, back_to_back=True), marks=pytest.mark.slow),
]


@pytest.mark.parametrize("params", EXHAUSTIVE, ids=_id)
def test_axi_burst_planner_every_alignment(params):
    run_cocotb("axi_burst_planner", MODULE, params=params,
               testcase=["every_start_alignment", "random_commands_under_stalls", "reset_mid_transfer",
                         "one_burst_commands_rate"])


@pytest.mark.parametrize("back_to_back", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_axi_burst_planner_full_width(back_to_back):
    run_cocotb("axi_burst_planner", MODULE, params=planner(64, 512, 64, 32, back_to_back),
               testcase=["random_commands_under_stalls", "reset_mid_transfer", "one_burst_commands_rate"])


@pytest.mark.slow
@pytest.mark.parametrize("params,commands", [
    pytest.param(planner(64, 512, 64, 32), 20000, id="A64-D512-M64-L32"),
    pytest.param(planner(64, 64, 256, 32), 8000, id="A64-D64-M256-L32"),
    pytest.param(planner(32, 1024, 1, 16), 4000, id="A32-D1024-M1-L16"),
    pytest.param(planner(64, 512, 64, 32, True), 20000, id="A64-D512-M64-L32-B"),
    pytest.param(planner(32, 1024, 1, 16, True), 4000, id="A32-D1024-M1-L16-B"),
])
def test_axi_burst_planner_long_random(params, commands):
    run_cocotb("axi_burst_planner", MODULE, params=params,
               testcase=["random_commands_under_stalls", "reset_mid_transfer"],
               extra_env={"NEARTRAIN_VECTORS": str(knobs.vectors(commands))})


def _brute_force_cut(address, length, *, data_width, max_burst, address_width):
    """An independent cutter: walk beat by beat and close a burst at a page end or at max_burst beats."""
    beat_bytes = data_width // 8
    space = 1 << address_width
    bursts, start, beats = [], None, 0
    address = (address % space) & ~(beat_bytes - 1)
    for beat in range(length):
        if start is None:
            start, beats = address, 0
        beats += 1
        address = (address + beat_bytes) % space
        if beat == length - 1 or beats == max_burst or address % PAGE_BYTES == 0:
            bursts.append((start, beats, beat == length - 1))
            start = None
    return bursts


@pytest.mark.parametrize("data_width,max_burst,address_width", [
    (8, 256, 12), (64, 16, 13), (512, 64, 64), (1024, 5, 12), (32, 1, 32), (128, 7, 64)])
def test_golden_cutter_matches_brute_force_and_rules(data_width, max_burst, address_width):
    rng = knobs.rng(50)
    geometry = {"data_width": data_width, "max_burst": max_burst, "address_width": address_width}
    beat_bytes = data_width // 8
    space = 1 << address_width
    page_beats = PAGE_BYTES // beat_bytes
    commands = [(int(rng.integers(0, space // beat_bytes, dtype=np.uint64)) * beat_bytes
                 + int(rng.integers(0, beat_bytes)), int(rng.integers(0, 3 * page_beats + 2)))
                for _ in range(knobs.vectors(300))]
    commands += [(space - beat_bytes, 3), (PAGE_BYTES - beat_bytes, 2), (0, 0), (0, page_beats + 1)]
    for address, length in commands:
        assert cut_command(address, length, **geometry) == _brute_force_cut(address, length, **geometry), \
            f"({address:#x}, {length}); {knobs.describe()}"
    bursts = cut_commands(commands, **geometry)
    check_rules(commands, [{"address": a, "beats": b, "final": int(f)} for a, b, f in bursts], **geometry)


def test_rule_check_catches_broken_bursts():
    """The rule check itself fails on each kind of wrong burst list (it is not vacuous)."""
    geometry = {"data_width": 64, "max_burst": 4, "address_width": 16}
    commands = [(PAGE_BYTES - 16, 7)]  # bursts of 2 (to the page end), 4 and 1 beats
    good = [{"address": a, "beats": b, "final": int(f)} for a, b, f in cut_commands(commands, **geometry)]
    check_rules(commands, good, **geometry)
    broken = [
        # crosses 4 KB
        [{**good[0], "beats": 3}, {**good[1], "address": PAGE_BYTES + 8, "beats": 3}, good[2]],
        [good[0], {**good[1], "final": 1}],                                           # too few beats
        [good[0], {**good[1], "beats": 5, "final": 1}],                               # too long
        good + [good[-1]],                                                            # duplicate
        [good[1], good[0], good[2]],                                                  # reordered
        [good[0], {**good[2], "address": good[1]["address"]}, good[1]],              # early final
        [good[0], {**good[1], "address": good[1]["address"] + 8}, good[2]],           # a gap
    ]
    for bursts in broken:
        with pytest.raises(AssertionError):
            check_rules(commands, bursts, **geometry)
