"""A fluid discrete-event simulator: tasks with dependencies share resources by max-min fairness.

Every resource has a capacity of one (the whole of its time). A task has an ``amount`` of work
(bytes, elements, FLOPs) and, for each resource it needs, the seconds that one unit of work
costs that resource alone (``uses``): a transfer of ``b`` bytes over a link of ``B`` bytes/s
uses the link at ``1 / B`` per byte, and an SSD that reads at ``R`` and writes at ``W`` is one
resource charged ``1 / R`` per byte read and ``1 / W`` per byte written (reads and writes share
its flash). A task runs at one rate through all its resources at once (a transfer is as fast as
the slowest link on its path, and it loads every link on the path).

Between two events the rates are constant: they are the max-min fair allocation (progressive
filling) of the running tasks over the resources, served in priority classes (class 0 first;
a later class gets what the earlier ones leave). An event is a task finishing; then its
successors whose predecessors have all finished start, and the rates are worked out again.
A task without ``uses`` is a fixed delay of ``amount`` seconds (a zero amount is a join).

This is the bandwidth-sharing model of flow-level network simulators (SimGrid's, for one);
it knows no packets, latencies or queue depths, only who shares which bandwidth when.
"""

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Task", "Schedule", "simulate"]

_EPS = 1e-12


@dataclass
class Task:
    """One unit of work.

    Parameters
    ----------
    name : str
    amount : float
        Units of work (or seconds, for a task without ``uses``).
    uses : dict
        Resource name to seconds of that resource per unit of work.
    after : list of int
        Indices (into the task list) of the tasks that must finish before this one starts.
    priority : int
        Service class: 0 before 1 before 2 on every shared resource.
    tags : dict
        Free labels for the caller's accounting (phase, link, variable, step); unused here.
    """

    name: str
    amount: float
    uses: dict = field(default_factory=dict)
    after: list = field(default_factory=list)
    priority: int = 0
    tags: dict = field(default_factory=dict)


@dataclass
class Schedule:
    """Start and end time of every task, and each resource's busy seconds."""

    start: np.ndarray
    end: np.ndarray
    busy: dict

    @property
    def makespan(self):
        return float(self.end.max()) if len(self.end) else 0.0


def _rates(active, tasks, index, count):
    """Max-min fair rates (units/s) of the ``active`` tasks, priority class by class."""
    rates = np.zeros(len(active))
    if not active:
        return rates
    cost = np.zeros((len(active), count))
    for row, task_id in enumerate(active):
        for resource, seconds in tasks[task_id].uses.items():
            cost[row, index[resource]] = seconds
    residual = np.ones(count)
    priorities = np.array([tasks[task_id].priority for task_id in active])
    for level in sorted(set(priorities.tolist())):
        free = priorities == level
        while free.any():
            load = cost[free].sum(axis=0)
            loaded = load > 0
            step = np.min(np.maximum(residual[loaded], 0.0) / load[loaded])
            rates[free] += step
            residual -= step * load
            full = loaded & (residual <= _EPS)
            frozen = free & (cost[:, full] > 0).any(axis=1)
            free &= ~frozen
    return rates


def simulate(tasks):
    """Run ``tasks`` (a list of :class:`Task`) to the end; returns a :class:`Schedule`.

    Raises ``ValueError`` on a dependency cycle or a task that could never start.
    """
    names = sorted({resource for task in tasks for resource in task.uses})
    index = {name: position for position, name in enumerate(names)}
    waiting = np.array([len(set(task.after)) for task in tasks])
    successors = [[] for _ in tasks]
    for task_id, task in enumerate(tasks):
        for before in set(task.after):
            successors[before].append(task_id)
    start = np.full(len(tasks), np.nan)
    end = np.full(len(tasks), np.nan)
    remaining = np.array([float(task.amount) for task in tasks])
    busy = dict.fromkeys(names, 0.0)
    now = 0.0
    active = []

    def begin(task_id):
        start[task_id] = now
        active.append(task_id)

    for task_id in np.flatnonzero(waiting == 0):
        begin(int(task_id))
    while active:
        flows = [task_id for task_id in active if tasks[task_id].uses]
        rates = dict(zip(flows, _rates(flows, tasks, index, len(names)), strict=True))
        times = []
        for task_id in active:
            rate = rates.get(task_id, 1.0)  # a delay runs at one second per second
            times.append(remaining[task_id] / rate if rate > 0 else np.inf)
        step = min(times)
        if not np.isfinite(step):
            raise ValueError("tasks that can never progress: " + ", ".join(tasks[t].name for t in active))
        now += step
        finished = []
        for task_id, time in zip(list(active), times, strict=True):
            rate = rates.get(task_id, 1.0)
            remaining[task_id] -= rate * step
            for resource, seconds in tasks[task_id].uses.items():
                busy[resource] += rate * step * seconds
            if time <= step * (1 + 1e-9) or remaining[task_id] <= _EPS * max(1.0, tasks[task_id].amount):
                finished.append(task_id)
        for task_id in finished:
            remaining[task_id] = 0.0
            end[task_id] = now
            active.remove(task_id)
        for task_id in finished:
            for successor in successors[task_id]:
                waiting[successor] -= 1
                if waiting[successor] == 0:
                    begin(successor)
    if np.isnan(end).any():
        stuck = [tasks[t].name for t in np.flatnonzero(np.isnan(end))[:5]]
        raise ValueError(f"tasks never started (a dependency cycle?): {stuck}")
    return Schedule(start=start, end=end, busy=busy)
