"""Pieces the runtime testbenches share: configuration, packet generators, pulse counters, drain loops.

(A node on a switch port, :class:`SwitchPort`, is the host device's: :mod:`scripts.sim.devices.runtime`;
the stream testbench of :mod:`scripts.sim.devices.runtime_sessions` is the base of the node's there,
and of :class:`RuntimeTB` here, which adds the checked run the units' tests share.)
"""

import cocotb
from cocotb.triggers import RisingEdge, SimTimeoutError, with_timeout

from golden.runtime import packet as gp
from golden.runtime.protocol import Config
from scripts.sim import knobs
from scripts.sim.devices import runtime_sessions
from scripts.sim.tb import CLOCK_PERIOD_NS

__all__ = ["RuntimeTB", "PulseCounter", "MergeBoard", "set_config", "random_config",
           "random_task", "corrupt", "drain", "reset_then_exact", "read_entry", "CONFIG_FIELDS",
           "CLUSTER_PARAMS"]

CONFIG_FIELDS = ("node", "node_mask", "home_shift", "range_shift", "rows", "ranges")
# The runtime_cluster build of test_cluster.py (beside nodes, queue and switch depths), which
# bench_runtime's flood shares with test_deadlock_flood.
CLUSTER_PARAMS = {"lines": 240, "features": 4, "spawn_depth": 512, "ranges": 16, "block": 20}


def set_config(dut, config, node, prefix="config__"):
    """Drive a unit's configuration port from a :class:`golden.runtime.protocol.Config`."""
    values = {"node": node, "node_mask": config.nodes - 1, "home_shift": config.home_shift,
              "range_shift": config.range_shift, "rows": config.rows, "ranges": config.ranges}
    for name in CONFIG_FIELDS:
        getattr(dut, f"{prefix}{name}").value = values[name]


def read_entry(packet):
    """A data-read-queue entry (the RDMA responder's output, the data packager's input) as an int:
    dst 4, range 10, line 24, last 1, task_id 3 (LSB first)."""
    return packet.dst | packet.range << 4 | packet.line << 14 | packet.last << 38 | packet.task_id << 39


def random_config(rng, *, nodes=4, rows=None, block=20, kernels=frozenset({2, 5, 6})):
    """A small random configuration (rows a few ranges per node, random ownership shifts)."""
    rows = rows or int(rng.integers(2 * nodes * block, 6 * nodes * block))
    return Config(nodes=nodes, rows=rows, block=block, home_shift=int(rng.integers(0, 4)),
                  range_shift=int(rng.integers(0, 2)), kernels=kernels)


def random_task(rng, config, *, range_index=None, homes=None, task_id=2, dst=0, src=0, fill=0.75):
    """A task packet (golden) with random items in one data range; ``homes`` limits the item rows' owners."""
    range_index = int(rng.integers(0, config.ranges)) if range_index is None else range_index
    first, lines = config.range_lines(range_index)
    slots = []
    for _ in range(gp.ITEMS):
        if rng.random() >= fill:
            slots.append(None)
            continue
        while True:
            row = int(rng.integers(0, config.rows))
            if homes is None or config.home(row) in homes:
                break
        slots.append(gp.Item(row, int(rng.integers(first, first + lines)), int(rng.integers(0, 1 << 32))))
    if all(item is None for item in slots):
        slot = int(rng.integers(0, gp.ITEMS))
        row = int(rng.integers(0, config.rows))
        while homes is not None and config.home(row) not in homes:
            row = int(rng.integers(0, config.rows))
        slots[slot] = gp.Item(row, int(rng.integers(first, first + lines)), int(rng.integers(0, 1 << 32)))
    return gp.Packet(gp.TASK, task_id=task_id, dst=dst, src=src, range=range_index,
                     remote=int(config.range_owner(range_index) != dst), slots=tuple(slots))


def corrupt(rng, word):
    """``word`` with one random bit flipped (its check byte no longer holds)."""
    return word ^ (1 << int(rng.integers(0, gp.PACKET_BITS)))


class PulseCounter:
    """Adds up, per bit, the one-cycle pulses of an output bus (sampled at each rising edge)."""

    def __init__(self, signal, clock, names):
        self.signal, self.clock, self.names = signal, clock, tuple(names)
        self.counts = dict.fromkeys(self.names, 0)
        cocotb.start_soon(self._run())

    def clear(self):
        self.counts = dict.fromkeys(self.names, 0)

    async def _run(self):
        while True:
            await RisingEdge(self.clock)
            value = int(self.signal.value)
            if value:
                for bit, name in enumerate(self.names):
                    if value >> bit & 1:
                        self.counts[name] += 1


class RuntimeTB(runtime_sessions.RuntimeTB):
    """Clock, reset and stream drivers with shared stall generators, and the units' checked run.

    :meth:`configure` sets up a unit with a configuration port. A subclass that scores counts as
    well as items provides ``send(rng, count)`` returning ``(scoreboards, expected counts)`` and
    ``check_counts(expected)`` (for :meth:`send_and_check`; with ``clear_counts()``,
    :meth:`ClockedTB.reset_mid_traffic` serves it too).
    """

    def __init__(self, dut, **options):
        super().__init__(dut, **options)
        self.pulse_counters = []

    def count_pulses(self, signal, names):
        """A :class:`PulseCounter` of ``signal``'s bits ``names``, which :meth:`clear_counts` clears."""
        counter = PulseCounter(signal, self.clock, names)
        self.pulse_counters.append(counter)
        return counter

    def clear_counts(self):
        """Forget what was counted before a reset: every counter of :meth:`count_pulses`."""
        for counter in self.pulse_counters:
            counter.clear()

    @classmethod
    async def exact_after_reset(cls, dut, *, salt, seed, before, after, count):
        """A testbench with gaps and backpressure (seeded by ``salt``), reset in the middle of
        ``before`` items (:meth:`ClockedTB.reset_mid_traffic`), then a checked run of ``count`` items
        (:meth:`send_and_check`): nothing from before the reset may come out or count. Items from
        ``knobs.rng(seed)``."""
        tb = cls(dut, idle=True, backpressure=True, salt=salt)
        rng = knobs.rng(seed)
        await tb.reset_mid_traffic(rng, before=before, after=after)
        await tb.send_and_check(rng, count)

    def configure(self, salt, *, nodes=4, **options):
        """Drive the configuration port with a random configuration of ``nodes`` nodes
        (:func:`random_config` with ``options``) as ``self.config``, for a random node ``self.node``,
        both seeded by ``salt``."""
        self.config = random_config(knobs.rng(salt), nodes=nodes, **options)
        self.node = int(knobs.rng(salt + 1).integers(0, nodes))
        set_config(self.dut, self.config, self.node)

    async def send_and_check(self, rng, count, **drain_args):
        """Send ``count`` random items, drain every sink against its scoreboard, check the counts;
        return the expected counts (for a test's coverage check)."""
        boards, expected = self.send(rng, count)
        await drain(self, boards, **drain_args)
        self.check_counts(expected)
        return expected


async def drain(tb, scoreboards, cycles_per_item=40, slack=200):
    """Check every sink's items against its scoreboard until all expected items arrived (bounded).

    ``scoreboards`` maps a sink name to a :class:`Scoreboard`; items are ints. Fails with a
    timeout naming the missing counts if the bound (``cycles_per_item`` per item + ``slack``
    cycles) passes, then waits 20 cycles and fails on any extra item.
    """
    total = sum(board.pending for board in scoreboards.values())

    async def everything():
        # Sinks queue their items independently, so checking them one after the other is enough.
        for name, board in scoreboards.items():
            while board.pending:
                board.check(await tb.sinks[name].recv())

    try:
        await with_timeout(everything(), (cycles_per_item * total + slack) * CLOCK_PERIOD_NS, "ns")
    except SimTimeoutError:
        missing = {name: board.pending for name, board in scoreboards.items() if board.pending}
        raise AssertionError(f"timeout: items still missing {missing}; {knobs.describe()}") from None
    await tb.cycles(20)
    for name, board in scoreboards.items():
        while not tb.sinks[name].empty():
            board.check(tb.sinks[name].queue.popleft())
        board.check_complete()


async def reset_then_exact(tb, rng, send, *, before, after, count):
    """Reset ``tb``; send ``before`` items, reset again somewhere ``after`` cycles in, and send ``count``
    more: exactly those must come out (:func:`drain`). ``send(tb, rng, n)`` queues ``n`` random items
    and returns the sinks' scoreboards."""
    await tb.reset()
    send(tb, rng, before)
    await tb.reset_mid_transfer(rng, after=after, drivers=tb.drivers)
    await drain(tb, send(tb, rng, count))


class MergeBoard:
    """Checks an output that interleaves several ordered inputs (an arbiter's): each item must be
    the oldest unseen item of one of them, so nothing is lost, duplicated or reordered within an input.
    """

    def __init__(self, name, count):
        self.name = name
        self.queues = [[] for _ in range(count)]
        self.checked = 0

    def expect(self, index, item):
        self.queues[index].append(item)

    @property
    def pending(self):
        return sum(len(queue) for queue in self.queues)

    def check(self, actual):
        for queue in self.queues:
            if queue and queue[0] == actual:
                queue.pop(0)
                self.checked += 1
                return
        heads = [hex(queue[0]) if queue else None for queue in self.queues]
        raise AssertionError(f"{self.name}: item #{self.checked} {actual:#x} is not the next item of any "
                             f"input (heads {heads}); {knobs.describe()}")

    def check_complete(self):
        if self.pending:
            raise AssertionError(f"{self.name}: {self.pending} items never arrived; {knobs.describe()}")
