"""Tests of the Smart-Infinity system model (``golden.smartinfinity``): pure Python, no simulation of RTL.

* the event simulator against the textbook max-min fair allocation (Bertsekas and Gallager,
  *Data Networks*, §6.5.2), worked by hand;
* conservation: the bytes the model moves over the shared host link are Table I's formulas,
  at any device count; inside the SmartSSDs they are the 6M of state read and written plus the
  gradient read;
* every schedule against two bounds computed here with NumPy float64 from the task list alone:
  no resource works more than the step lasts (load bound), and no chain of dependent tasks runs
  faster than each task alone (path bound); each resource's busy time is its tasks' work;
* a hand-worked 1-CSD case (one block, one subgroup, one step: every task alone on its path)
  against its closed form, for BASE and SU;
* monotonicity: more SmartSSDs never slow SU+O down;
* the issue's Done-when line: BASE stops scaling at about 4 SSDs, SU+O+C at 10 SSDs is within
  10 % of the paper's 1.85-1.98x.
"""

import numpy as np
import pytest

from golden.smartinfinity import (
    Task,
    Workload,
    build_steps,
    owner_overlaps,
    simulate,
    smartssd_machine,
    step_time,
    traffic,
)
from golden.smartinfinity.paper import FIG9_SPEEDUPS, FIG11, TABLE_I

# The FPGA rate is an input, not an expectation: the DDR4 bound (64 B/cycle over Adam's 30 B per
# element); the RTL's 4.00 elements/cycle changes none of the checks below.
FPGA = 64 / 30


def _machine(devices, gpu="A5000"):
    return smartssd_machine(devices, gpu, fpga_elements_per_cycle=FPGA)


def test_max_min_fair_textbook_case():
    # Link A (capacity 1) carries f1, f2, f3; link B (capacity 2) carries f3 and f4. Max-min fair
    # rates: 1/3 each on A, and f4 takes B's remaining 5/3. With those amounts all end at t = 1.
    tasks = [Task("f1", 1 / 3, {"A": 1.0}), Task("f2", 1 / 3, {"A": 1.0}),
             Task("f3", 1 / 3, {"A": 1.0, "B": 0.5}), Task("f4", 5 / 3, {"B": 0.5})]
    schedule = simulate(tasks)
    np.testing.assert_allclose(schedule.end, [1.0, 1.0, 1.0, 1.0], rtol=1e-12)
    # Priorities: class 0 takes the link first, class 1 runs only in what is left.
    schedule = simulate([Task("high", 1.0, {"L": 1.0}), Task("low", 1.0, {"L": 1.0}, priority=1),
                         Task("after", 1.0, {}, after=[0])])
    np.testing.assert_allclose(schedule.end, [1.0, 2.0, 2.0], rtol=1e-12)


@pytest.mark.parametrize("devices", [1, 3, 7])
@pytest.mark.parametrize("config", ["BASE", "SU", "SU+O", "SU+O+C"])
def test_traffic_is_table_one(config, devices):
    work = Workload(1e9, blocks=5, compression=0.03)
    unit = 2 * work.parameters  # M: FP16 model bytes
    moved = traffic(config, _machine(devices), work)
    expected = TABLE_I["SU" if config == "SU+O" else config]
    for (what, direction), formula in expected.items():
        link = "host_up" if direction == "read" else "host_down"
        value = 2 * work.compression if formula == "2c" else formula
        assert moved.get((link, what), 0.0) == pytest.approx(value * unit, rel=1e-12), (what, direction)
    # GPU link: the FP16 parameters twice (forward, backward) down, the gradient (FP16 or compressed) up.
    assert moved[("gpu_down", None)] == pytest.approx(2 * unit, rel=1e-12)
    up = 2 * work.compression * unit if config == "SU+O+C" else unit
    assert moved[("gpu_up", None)] == pytest.approx(up, rel=1e-12)
    inside = {"BASE": (0, 0), "SU+O+C": (6 + 2 * work.compression, 6)}.get(config, (8, 6))
    read = moved.get(("p2p_read", "states"), 0) + moved.get(("p2p_read", "gradients"), 0)
    assert read == pytest.approx(inside[0] * unit, rel=1e-12)
    assert moved.get(("p2p_write", "states"), 0) == pytest.approx(inside[1] * unit, rel=1e-12)


def test_owner_overlaps_cover_each_block_once():
    found = [owner_overlaps(b * 10.0, (b + 1) * 10.0, 70.0, 3) for b in range(7)]
    per_device = np.zeros(3)
    for block in found:
        assert sum(elements for _, elements in block) == pytest.approx(10.0)
        for device, elements in block:
            per_device[device] += elements
    np.testing.assert_allclose(per_device, [70 / 3] * 3)


def _longest_path(tasks, solo):
    finish = np.zeros(len(tasks))
    order = sorted(range(len(tasks)), key=lambda t: max(tasks[t].after, default=-1))
    done = set()
    while len(done) < len(tasks):  # the builder's lists are topological, but do not rely on it
        for t in order:
            if t not in done and all(a in done for a in tasks[t].after):
                finish[t] = max((finish[a] for a in tasks[t].after), default=0.0) + solo[t]
                done.add(t)
    return finish.max()


@pytest.mark.parametrize("config", ["BASE", "SU", "SU+O", "SU+O+C"])
def test_schedule_within_load_and_path_bounds(config):
    tasks, _ = build_steps(config, _machine(3), Workload(2e9, blocks=4), steps=2)
    schedule = simulate(tasks)
    work = {}
    for task in tasks:
        for resource, seconds in task.uses.items():
            work[resource] = work.get(resource, 0.0) + task.amount * seconds
    for resource, seconds in work.items():
        assert schedule.busy[resource] == pytest.approx(seconds, rel=1e-9), resource
    solo = np.array([task.amount * max(task.uses.values()) if task.uses else task.amount for task in tasks])
    makespan = schedule.makespan
    assert makespan >= max(work.values()) * (1 - 1e-9)
    assert makespan >= _longest_path(tasks, solo) * (1 - 1e-9)
    assert np.all(schedule.end - schedule.start >= solo * (1 - 1e-9))


def test_one_csd_closed_form():
    m = _machine(1)
    p, work = 1e8, Workload(1e8, blocks=1)
    flop = 1 / (m.gpu_flops * m.gpu_utilisation)
    host, link = m.host_link, m.device_link
    forward = 2 * p / m.gpu_link + 2 * p * work.tokens * flop
    backward = (2 * p / m.gpu_link + 6 * p * work.tokens * flop + 2 * p / m.gpu_link
                + 4 * p / min(host, link, m.ssd_write))
    # BASE: one subgroup: read p, m, v, g (16 B) up the host link, CPU Adam, write p, m, v (12 B).
    base = (16 * p / min(m.ssd_read, link, host) + p / m.cpu_elements + 12 * p / min(m.ssd_write, link, host))
    # SU: read 16 B over the P2P path, FPGA, write 12 B back, then p (4 B) from the SSD to the host.
    su = (16 * p / min(m.ssd_read, link) + p / m.fpga_elements + 12 * p / min(m.ssd_write, link)
          + 4 * p / min(m.ssd_read, link, host))
    for config, update in (("BASE", base), ("SU", su)):
        result = step_time(config, m, work, steps=1)
        assert result.forward == pytest.approx(forward, rel=1e-12)
        assert result.backward == pytest.approx(backward, rel=1e-12)
        assert result.update == pytest.approx(update, rel=1e-12)


def test_more_devices_never_slow_su_o():
    work = Workload(4e9, blocks=4)
    times = [step_time("SU+O", _machine(devices), work).total for devices in range(1, 13)]
    pairs = zip(times[:-1], times[1:], strict=True)
    assert all(later <= earlier * (1 + 1e-9) for earlier, later in pairs), times
    assert times[-1] < times[0] / 4  # and it scales: 12 devices at least 4x one


def test_done_when_saturation_and_speedup():
    work = Workload(4e9)
    base = {n: step_time("BASE", _machine(n), work).total for n in (2, 4, 6, 10)}
    saturation = FIG11["baseline saturates at"]
    assert base[2] / base[saturation] > 1.5  # still scaling below 4 SSDs
    assert base[saturation] / base[10] < 1.1  # at most 10 % left to gain from 4 to 10
    assert base[6] == pytest.approx(base[10], rel=1e-9)  # the host link: flat past 4
    low, high = FIG9_SPEEDUPS[(10, "SU+O+C")]
    speedup = base[10] / step_time("SU+O+C", _machine(10), work).total
    assert 0.9 * low <= speedup <= 1.1 * high
