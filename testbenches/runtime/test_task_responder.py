"""The task responder: integrity and range checks, local slot mask, owners, misrouted network tasks.

Random tasks arrive from the spawner (rows anywhere) and from the network (mostly wholly local),
a third of them bad in one way (empty mask, range, row or column out of range, or a network task
that is not wholly local). Each lane's output must carry its input's good tasks in order, with
the local mask and owners of :func:`golden.runtime.protocol.respond`; the drop counters must
equal the golden's reasons.
"""

import cocotb

from golden.runtime import packet as gp
from golden.runtime.protocol import respond
from golden.runtime.tables import RESPONDER_DROPS
from scripts.sim import knobs
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.runtime.tb import RuntimeTB, random_task

DEFAULT_TASKS = 300
INPUTS = ("spawned", "network")
OUTPUTS = ("o", "o_network")


def random_input(rng, config, node, from_network):
    """A task for the responder: good, or broken in one way."""
    homes = {node} if from_network and rng.random() < 0.8 else None
    packet = random_task(rng, config, homes=homes)
    kind = rng.choice(["good", "good", "good", "mask", "range", "row", "col"])
    if kind == "mask":
        packet = gp.Packet(gp.TASK, range=packet.range, slots=packet.slots, mask=0)
    elif kind == "range":
        packet = gp.Packet(gp.TASK, range=int(rng.integers(config.ranges, 1024)), slots=packet.slots)
    elif kind in ("row", "col"):
        slot = next(slot for slot, item in enumerate(packet.slots) if item is not None)
        item = packet.slots[slot]
        first, lines = config.range_lines(packet.range)
        if kind == "row":
            item = gp.Item(int(rng.integers(config.rows, 1 << 24)), item.col, item.value)
        else:
            outside = [col for col in (first - 1, first + lines) if 0 <= col < 1 << 24]
            item = gp.Item(item.row, int(rng.choice(outside)), item.value)
        slots = packet.slots[:slot] + (item,) + packet.slots[slot + 1:]
        packet = gp.Packet(gp.TASK, range=packet.range, slots=slots)
    return gp.encode(packet, sealed=False)


def expected_output(word, verdict):
    local, owners = verdict
    owner_bits = sum((owner or 0) << (4 * slot) for slot, owner in enumerate(owners))
    return word | local << 512 | owner_bits << 516


class ResponderTB(RuntimeTB):
    def __init__(self, dut, *, idle, backpressure, salt):
        super().__init__(dut, sources=INPUTS, sinks=OUTPUTS, idle=idle, backpressure=backpressure, salt=salt)
        self.configure(salt, nodes=8)
        self.dropped = self.count_pulses(dut.dropped, RESPONDER_DROPS)
        self.dropped_network = self.count_pulses(dut.dropped_network, RESPONDER_DROPS)

    def send(self, rng, count):
        """``count`` random tasks on both inputs; returns the outputs' scoreboards and the drops."""
        boards = {"o": Scoreboard("responder o"), "o_network": Scoreboard("responder o_network")}
        drops = dict.fromkeys(RESPONDER_DROPS, 0)
        for _ in range(count):
            index = int(rng.integers(0, 2))
            word = random_input(rng, self.config, self.node, index == 1)
            verdict = respond(gp.decode(word), self.node, self.config, from_network=index == 1)
            if isinstance(verdict, str):
                drops[verdict[5:]] += 1
            else:
                boards[OUTPUTS[index]].expect(expected_output(word, verdict))
            self.sources[INPUTS[index]].send_nowait(word)
        return boards, drops

    def check_counts(self, drops):
        got = {name: self.dropped.counts[name] + self.dropped_network.counts[name]
               for name in RESPONDER_DROPS}
        assert got == drops, f"{got} != {drops}; {knobs.describe()}"
        assert self.dropped.counts["misrouted"] == 0  # only network tasks can be misrouted


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def respond_under_stalls(dut, idle, backpressure):
    """Good and bad tasks from both inputs, with optional gaps and backpressure."""
    tb, salt = await ResponderTB.under_stalls(dut, idle, backpressure)
    drops = await tb.send_and_check(knobs.rng(20 + salt), knobs.vectors(DEFAULT_TASKS))
    assert all(drops.values())


@cocotb.test()
async def reset_mid_packet(dut):
    """Reset while tasks flow; a clean run afterwards is exact and nothing from before comes out."""
    await ResponderTB.exact_after_reset(dut, salt=9, seed=29, before=100, after=(5, 40),
                                        count=knobs.vectors(DEFAULT_TASKS) // 2)


def test_task_responder():
    run_cocotb("runtime_task_responder", __name__, params={"block": 20})
