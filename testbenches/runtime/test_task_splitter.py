"""The task splitter: kernel-bound local slots, and one packet per remote owner, as the golden splits.

Random checked tasks (rows on every node, so 0 to 3 remote groups each) go in with random gaps
and backpressure on both outputs; the local and remote outputs must equal
:func:`golden.runtime.protocol.split` in order (the remote packets before sealing: check 0).
"""

import cocotb

from golden.runtime import packet as gp
from golden.runtime.protocol import respond, split
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.runtime.tb import RuntimeTB, drain, random_task

DEFAULT_TASKS = 300


def unsealed(word):
    return gp.set_field(word, 24, 8, 0)


class SplitterTB(RuntimeTB):
    def __init__(self, dut, *, idle, backpressure, salt):
        super().__init__(dut, sources=["i"], sinks=["local", "remote"], idle=idle, backpressure=backpressure,
                         salt=salt)
        self.configure(salt)

    def send(self, rng, count):
        """``count`` random tasks; returns the outputs' scoreboards and the number of remote groups."""
        boards = {"local": Scoreboard("splitter local"), "remote": Scoreboard("splitter remote")}
        groups = 0
        for _ in range(count):
            packet = random_task(rng, self.config, fill=float(rng.choice([0.3, 0.75, 1.0])),
                                 task_id=int(rng.choice([2, 5, 6])),
                                 src=int(rng.integers(0, self.config.nodes)))
            word = gp.encode(packet, sealed=False)
            local, owners = respond(gp.decode(word), self.node, self.config, from_network=False)
            kernel_task, remote = split(gp.decode(word), self.node, self.config, local, owners)
            if kernel_task is not None:
                boards["local"].expect(gp.encode(kernel_task, sealed=False), {"input": word})
            for item in remote:
                boards["remote"].expect(unsealed(item), {"input": word})
            groups += len(remote)
            owner_bits = sum((owner or 0) << (4 * slot) for slot, owner in enumerate(owners))
            self.sources["i"].send_nowait(word | local << 512 | owner_bits << 516)
        return boards, groups


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def split_under_stalls(dut, idle, backpressure):
    """Tasks with 0..3 remote owners, with optional gaps and backpressure."""
    tb, salt = await SplitterTB.under_stalls(dut, idle, backpressure)
    boards, groups = tb.send(knobs.rng(30 + salt), knobs.vectors(DEFAULT_TASKS))
    assert groups > knobs.vectors(DEFAULT_TASKS) // 2  # several groups per task on average
    await drain(tb, boards)


@cocotb.test()
async def reset_mid_packet(dut):
    """Reset while a multi-group task is being split; a clean run afterwards is exact."""
    tb = SplitterTB(dut, idle=True, backpressure=True, salt=5)
    rng = knobs.rng(35)
    await tb.reset_mid_traffic(rng, before=60, after=(5, 40))
    boards, _ = tb.send(rng, knobs.vectors(DEFAULT_TASKS) // 2)
    await drain(tb, boards)


def test_task_splitter():
    run_cocotb("runtime_task_splitter", __name__)
