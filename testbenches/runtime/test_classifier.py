"""The task classifier: good packets reach their handler in order, bad ones are dropped and counted.

Each run sends random task, RDMA and data packets on the three receive queues, a third of
them bad (a flipped bit, a wrong or invalid type, a wrong destination or source, a kernel id
that is not attached), with random gaps and backpressure, and compares the three outputs
and the accept/drop counters with :func:`golden.runtime.protocol.classify`.
"""

import cocotb
import pytest

from golden.runtime import packet as gp
from golden.runtime.protocol import classify
from golden.runtime.tables import CLASSIFIER_DROPS
from scripts.sim import knobs
from scripts.sim.runner import component_from_env, run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.runtime.tb import RuntimeTB, corrupt

TYPES = ("task", "rdma", "data")
DEFAULT_PACKETS = 300


def attached(mask):
    return frozenset(index for index in range(7) if mask >> index & 1)


def random_flit(rng, config, node):
    """A ``(vc, word)``: a good packet of a random type, or one broken in one random way."""
    vc = int(rng.integers(0, 3))
    good_ids = sorted(config.kernels)
    common = {"task_id": int(rng.choice(good_ids)) if vc == gp.TASK else int(rng.integers(0, 8)),
              "dst": node, "src": int(rng.integers(0, config.nodes)), "range": int(rng.integers(0, 1024))}
    kind = rng.choice(["good", "good", "check", "type", "node", "task_id"])
    ptype = vc
    if kind == "type":
        ptype = int(rng.choice([t for t in range(4) if t != vc]))
    elif kind == "node":
        if rng.random() < 0.5:
            common["dst"] = int(rng.choice([n for n in range(16) if n != node]))
        else:
            common["src"] = int(rng.integers(config.nodes, 16))
    elif kind == "task_id" and vc == gp.TASK:
        common["task_id"] = int(rng.choice([i for i in range(8) if i not in config.kernels]))
    slots = tuple(gp.Item(int(rng.integers(0, 1 << 24)), int(rng.integers(0, 1 << 24)),
                          int(rng.integers(0, 1 << 32))) if rng.random() < 0.6 else None
                  for _ in range(gp.ITEMS))
    packet = gp.Packet(ptype, slots=slots, first=int(rng.integers(0, 1 << 24)),
                       lines=int(rng.integers(0, 256)), line=int(rng.integers(0, 1 << 24)),
                       last=int(rng.integers(0, 2)),
                       data=int(rng.integers(0, 1 << 63)) << 300, **common)
    word = gp.encode(packet)
    if ptype == 3:  # encode leaves the payload empty for an invalid type: fill it, then seal
        word = gp.seal(word | int(rng.integers(0, 1 << 63)) << 100)
    if kind == "check":
        word = corrupt(rng, word)
    return vc, word


class ClassifierTB(RuntimeTB):
    def __init__(self, dut, *, idle=False, backpressure=False, salt=0):
        super().__init__(dut, sources=[f"rx_{name}" for name in TYPES], sinks=TYPES, idle=idle,
                         backpressure=backpressure, salt=salt)
        self.configure(salt, kernels=attached(component_from_env()._kernels))
        self.accepted = self.count_pulses(dut.accepted, TYPES)
        self.dropped = self.count_pulses(dut.dropped, CLASSIFIER_DROPS)

    def send(self, rng, count):
        """Queue ``count`` random flits; return the scoreboards and the expected counts."""
        boards = {name: Scoreboard(f"classifier {name}") for name in TYPES}
        expected = {"accepted": dict.fromkeys(TYPES, 0), "dropped": dict.fromkeys(CLASSIFIER_DROPS, 0)}
        for _ in range(count):
            vc, word = random_flit(rng, self.config, self.node)
            verdict = classify(word, vc, self.node, self.config)
            if verdict.startswith("drop_"):
                expected["dropped"][verdict[5:]] += 1
            else:
                assert verdict == TYPES[vc]
                boards[verdict].expect(word, {"vc": vc})
                expected["accepted"][verdict] += 1
            self.sources[f"rx_{TYPES[vc]}"].send_nowait(word)
        return boards, expected

    def check_counts(self, expected):
        assert self.accepted.counts == expected["accepted"], f"{self.accepted.counts}; {knobs.describe()}"
        assert self.dropped.counts == expected["dropped"], f"{self.dropped.counts}; {knobs.describe()}"


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def classify_under_stalls(dut, idle, backpressure):
    """Random good and bad packets on all three queues, with optional gaps and backpressure."""
    tb, salt = await ClassifierTB.under_stalls(dut, idle, backpressure)
    expected = await tb.send_and_check(knobs.rng(10 + salt), knobs.vectors(DEFAULT_PACKETS))
    assert any(expected["dropped"].values()) and all(expected["accepted"].values())


@cocotb.test()
async def reset_mid_packet(dut):
    """Reset while packets flow; afterwards a clean run is exact and nothing from before comes out."""
    await ClassifierTB.exact_after_reset(dut, salt=7, seed=17, before=200, after=(5, 60),
                                         count=knobs.vectors(DEFAULT_PACKETS) // 2)


@pytest.mark.parametrize("kernels", [0b1100100, 0b0000010])
def test_classifier(kernels):
    run_cocotb("runtime_classifier", __name__, params={"kernels": kernels})
