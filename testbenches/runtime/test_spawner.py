"""The task spawner: Kernel_start streams Spawn_MEM entries out as tasks, unknown kernel ids rejected.

The testbench loads random packet images (with junk in the header fields the spawner replaces),
then issues starts over random windows with attached and unattached kernel ids, with
backpressure on the output. The tasks must be :func:`golden.runtime.protocol.spawn` of each
entry; a rejected start emits nothing and pulses ``error``; every start pulses ``done``.
"""

import cocotb

from golden.runtime import packet as gp
from golden.runtime.protocol import spawn
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.runtime.tb import RuntimeTB, drain, random_task

DEPTH = 64


class SpawnerTB(RuntimeTB):
    def __init__(self, dut, *, backpressure, salt):
        super().__init__(dut, sources=["load", "start"], sinks=["o"], backpressure=backpressure, salt=salt)
        self.configure(salt)
        self.pulses = self.count_pulses(dut.done, ["done"])
        self.errors = self.count_pulses(dut.error, ["error"])
        self.entries = {}

    async def load(self, rng):
        for address in range(DEPTH):
            packet = random_task(
                rng,
                self.config,
                task_id=int(rng.integers(0, 8)),
                dst=int(rng.integers(0, 16)),
                src=int(rng.integers(0, 16)),
            )
            word = gp.encode(packet) ^ int(rng.integers(0, 1 << 13))  # junk in type, id, dst, src, check
            self.entries[address] = word
            self.sources["load"].send_nowait(address | word << 6)
        await self.sources["load"].wait_idle()

    def start(self, rng, board, count):
        """Queue ``count`` starts; return the expected (done, error) pulse counts."""
        done = errors = 0
        for _ in range(count):
            task_id = int(rng.choice([2, 5, 6, 2, 5, 6, 0, 1, 7]))
            first = int(rng.integers(0, DEPTH))
            length = int(rng.integers(0, DEPTH - first + 1))
            done += 1
            if task_id not in self.config.kernels:
                errors += 1
            else:
                for address in range(first, first + length):
                    task = spawn(self.entries[address], self.node, self.config, task_id)
                    board.expect(gp.encode(task, sealed=False), {"address": address, "task_id": task_id})
            self.sources["start"].send_nowait(task_id | first << 3 | length << 9)
        return done, errors


@cocotb.test()
@cocotb.parametrize(backpressure=[False, True])
async def spawn_windows(dut, backpressure):
    tb = SpawnerTB(dut, backpressure=backpressure, salt=int(backpressure))
    await tb.reset()
    rng = knobs.rng(120 + int(backpressure))
    await tb.load(rng)
    board = Scoreboard("spawner o")
    done, errors = tb.start(rng, board, knobs.vectors(12, limit=200))  # each start spawns up to DEPTH tasks
    await drain(tb, {"o": board}, cycles_per_item=10)
    assert (tb.pulses.counts["done"], tb.errors.counts["error"]) == (done, errors), knobs.describe()


@cocotb.test()
async def reset_mid_packet(dut):
    """Reset while a start is streaming: nothing more comes out; Spawn_MEM keeps its entries."""
    tb = SpawnerTB(dut, backpressure=True, salt=5)
    await tb.reset()
    rng = knobs.rng(125)
    await tb.load(rng)
    tb.start(rng, Scoreboard("ignored"), 3)
    await tb.reset_mid_transfer(rng, after=(5, 40), drivers=tb.drivers)
    tb.clear_counts()
    board = Scoreboard("spawner o")
    done, errors = tb.start(rng, board, 4)
    await drain(tb, {"o": board}, cycles_per_item=10)
    assert (tb.pulses.counts["done"], tb.errors.counts["error"]) == (done, errors), knobs.describe()


def test_spawner():
    run_cocotb("runtime_spawner", __name__, params={"depth": DEPTH})
