"""One steady training step of a configuration: its time, its breakdown and the bytes on each link.

:func:`step_time` simulates three consecutive steps (:func:`golden.smartinfinity.step.build_steps`)
and reports the middle one, from its forward pass's start to the next one's: that is the period
of training once it runs, and it counts what ``SU+O`` defers (m and v written back while the
next step computes) where it costs, in the next step's contention for the SSDs. The first step
has nothing before it and the last nothing after, so neither is a steady step.
"""

from dataclasses import dataclass

import numpy as np

from .events import simulate
from .step import build_steps

__all__ = ["StepResult", "step_time", "single_step_end", "traffic", "speedups"]


@dataclass(frozen=True)
class StepResult:
    """Seconds of one steady step and of its three phases (they add up to ``total``)."""

    config: str
    forward: float
    backward: float
    update: float
    busy: dict

    @property
    def total(self):
        return self.forward + self.backward + self.update


def step_time(config, machine, work, steps=3):
    """The steady step of ``config`` on ``machine`` for ``work`` (a :class:`StepResult`)."""
    tasks, marks = build_steps(config, machine, work, steps=steps)
    schedule = simulate(tasks)
    middle = steps // 2 if steps > 1 else 0
    start = 0.0 if middle == 0 else schedule.end[marks[middle - 1]["next"]]
    forward = schedule.end[marks[middle]["forward"]]
    stored = schedule.end[marks[middle]["gradients"]]
    following = schedule.end[marks[middle]["next"]]  # the gate the next forward waits on
    return StepResult(config, float(forward - start), float(stored - forward), float(following - stored),
                      schedule.busy)


def single_step_end(config, machine, work):
    """Seconds to the end of the simulation of one step alone, deferred writes included."""
    tasks, _ = build_steps(config, machine, work, steps=1)
    return simulate(tasks).makespan


def traffic(config, machine, work):
    """Bytes of one step per ``(link, what)``: ``link`` is ``host_up`` (storage to host, the seed's
    "read"), ``host_down`` (host to storage, "write"), ``p2p_read``/``p2p_write`` (inside the
    SmartSSDs) or ``gpu_up``/``gpu_down``; ``what`` is ``states``, ``gradients`` or ``None``."""
    tasks, _ = build_steps(config, machine, work, steps=1)
    moved = {}
    for task in tasks:
        link = task.tags.get("link")
        if link is not None:
            key = (link, task.tags.get("what"))
            moved[key] = moved.get(key, 0.0) + task.amount
    return moved


def speedups(configs, machine, work):
    """``{config: (StepResult, speed-up over BASE)}`` on one machine."""
    results = {config: step_time(config, machine, work) for config in configs}
    base = results["BASE"].total if "BASE" in results else np.nan
    return {config: (result, base / result.total) for config, result in results.items()}
