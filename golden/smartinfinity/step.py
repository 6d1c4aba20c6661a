"""Storage-offloaded training steps as task graphs, for the four configurations of Smart-Infinity.

One step (the seed's Fig. 1, §II-A and §IV): the **forward** pass fetches each block's FP16
parameters from host memory to the GPU and computes it; the **backward** pass fetches them
again, recomputes the forward (activation checkpointing) and computes the gradients, which go
to the host as FP16 and on to storage as FP32 (``2M`` bytes, M = FP16 model bytes); then the
**update**:

* ``BASE`` (DeepSpeed ZeRO-Infinity): per subgroup of the flat model, the host reads p, m, v
  and g (FP32) from the SSDs in RAID0 over the shared host link, the CPU updates them, and
  writes p, m, v back; read, update and write follow each other (DeepSpeed's
  ``pipeline_read``/``pipeline_write`` are off by default).
* ``SU`` (§IV-A, Fig. 5a): each SmartSSD owns an even flat shard; per subgroup that fits its
  DRAM it reads p, m, v, g from its SSD over the internal P2P path, updates on the FPGA, writes
  p, m, v back, then sends the updated p (FP32, ``2M`` in all) from the SSD to the host while
  the next subgroup starts. The next subgroup's buffers are allocated after the write-back.
* ``SU+O`` (§IV-B, Fig. 5b): one buffer per variable, allocated once; after the update p is
  written first and uploaded, and the next subgroup's p load follows at once, while m and v
  are written back lazily at a lower priority; the next forward pass waits only for p.
* ``SU+O+C`` (§IV-C): ``SU+O`` with the gradient Top-K compressed on the GPU (``c × 2M`` bytes
  to storage) and decompressed in the FPGA's fused updater.

The gradients must all be stored before any update (NaN/Inf check and global norm, §IV-C).
Steps follow each other: the next forward starts when the host has the new parameters (and,
for ``BASE`` and ``SU``, when the update's writes are done). Not modelled: activation
checkpoint traffic, the NaN check and norm themselves, buffer allocation cost, I/O latency.
"""

import numpy as np

from .events import Task

__all__ = ["build_steps", "owner_overlaps"]

F32 = 4
F16 = 2


def owner_overlaps(start, stop, parameters, devices):
    """``[(device, elements)]`` of the flat range ``[start, stop)`` under an even shard per device."""
    bounds = np.linspace(0.0, parameters, devices + 1)
    found = []
    for device in range(devices):
        elements = min(stop, bounds[device + 1]) - max(start, bounds[device])
        if elements > 0:
            found.append((device, elements))
    return found


class _Graph:
    def __init__(self, machine):
        self.m = machine
        self.tasks = []

    def add(self, name, amount, uses, after=(), priority=0, **tags):
        self.tasks.append(Task(name, float(amount), dict(uses), [a for a in after if a is not None],
                               priority, tags))
        return len(self.tasks) - 1

    def join(self, name, after, **tags):
        return self.add(name, 0.0, {}, after, **tags)

    # Paths. Every direction of every PCIe link is a resource; the SSD is one (reads and writes share it).
    def ssd_to_host(self, name, nbytes, device, after=(), priority=0, **tags):
        m = self.m
        uses = {f"ssd{device}": 1 / m.ssd_read, f"ssd_port_up{device}": 1 / m.device_link,
                f"ext_up{device}": 1 / m.device_link, "host_up": 1 / m.host_link}
        return self.add(name, nbytes, uses, after, priority, link="host_up", **tags)

    def host_to_ssd(self, name, nbytes, device, after=(), priority=0, **tags):
        m = self.m
        uses = {"host_down": 1 / m.host_link, f"ext_down{device}": 1 / m.device_link,
                f"ssd_port_down{device}": 1 / m.device_link, f"ssd{device}": 1 / m.ssd_write}
        return self.add(name, nbytes, uses, after, priority, link="host_down", **tags)

    def ssd_to_fpga(self, name, nbytes, device, after=(), priority=0, **tags):
        m = self.m
        uses = {f"ssd{device}": 1 / m.ssd_read, f"ssd_port_up{device}": 1 / m.device_link,
                f"fpga_port_down{device}": 1 / m.device_link}
        return self.add(name, nbytes, uses, after, priority, link="p2p_read", **tags)

    def fpga_to_ssd(self, name, nbytes, device, after=(), priority=0, **tags):
        m = self.m
        uses = {f"fpga_port_up{device}": 1 / m.device_link, f"ssd_port_down{device}": 1 / m.device_link,
                f"ssd{device}": 1 / m.ssd_write}
        return self.add(name, nbytes, uses, after, priority, link="p2p_write", **tags)


def _forward_backward(g, config, work, step, gate):
    """The forward and backward passes of one step; returns (forward done, gradients stored)."""
    m = g.m
    per_block = work.parameters / work.blocks
    flop = 1 / (m.gpu_flops * m.gpu_utilisation)
    fetch = {"gpu_down": 1 / m.gpu_link}
    compute = previous = None
    for block in range(work.blocks):
        previous = g.add(f"s{step} fw fetch {block}", F16 * per_block, fetch, [gate, previous],
                         phase="FW", step=step, link="gpu_down")
        compute = g.add(f"s{step} fw {block}", 2 * per_block * work.tokens, {"gpu": flop},
                        [previous, compute], phase="FW", step=step)
    forward_done = compute
    stored, fetched = [], forward_done
    compressed = config == "SU+O+C"
    for block in reversed(range(work.blocks)):
        fetched = g.add(f"s{step} bw fetch {block}", F16 * per_block, fetch, [fetched],
                        phase="BW", step=step, link="gpu_down")
        # 4 FLOPs per parameter and token for the gradients, 2 to recompute the forward.
        compute = g.add(f"s{step} bw {block}", 6 * per_block * work.tokens, {"gpu": flop},
                        [fetched, compute], phase="BW", step=step)
        ready, wire = compute, F16
        if compressed:
            ready = g.add(f"s{step} topk {block}", per_block, {"gpu": work.topk_passes * F32 / m.gpu_memory},
                          [compute], phase="BW", step=step)
            wire = work.compression * F32
        to_host = g.add(f"s{step} grad to host {block}", wire * per_block, {"gpu_up": 1 / m.gpu_link},
                        [ready], phase="BW", step=step, link="gpu_up")
        stored_bytes = (work.compression if compressed else 1.0) * F32
        start = block * per_block
        if config == "BASE":  # RAID0: every SSD takes an even stripe of every write
            targets = [(d, per_block / m.devices) for d in range(m.devices)]
        else:  # the owner SmartSSD of each flat element (§IV-D)
            targets = owner_overlaps(start, start + per_block, work.parameters, m.devices)
        for device, elements in targets:
            stored.append(g.host_to_ssd(f"s{step} grad store {block}>{device}", stored_bytes * elements,
                                        device, [to_host], phase="BW", step=step, what="gradients"))
    return forward_done, g.join(f"s{step} gradients stored", stored, phase="BW", step=step)


def _baseline_update(g, work, step, ready):
    m = g.m
    subgroups = max(1, int(np.ceil(work.parameters / work.baseline_subgroup)))
    size = work.parameters / subgroups
    written = ready
    for k in range(subgroups):
        reads = [g.ssd_to_host(f"s{step} read {k}>{d}", 3 * F32 * size / m.devices, d, [written],
                               phase="UP", step=step, what="states") for d in range(m.devices)]
        reads += [g.ssd_to_host(f"s{step} read grad {k}>{d}", F32 * size / m.devices, d, [written],
                                phase="UP", step=step, what="gradients") for d in range(m.devices)]
        update = g.add(f"s{step} cpu {k}", size, {"cpu": 1 / m.cpu_elements}, reads, phase="UP", step=step)
        writes = [g.host_to_ssd(f"s{step} write {k}>{d}", 3 * F32 * size / m.devices, d, [update],
                                phase="UP", step=step, what="states") for d in range(m.devices)]
        written = g.join(f"s{step} written {k}", writes, phase="UP", step=step)
    return written, [written]


def _smart_update(g, config, work, step, ready, previous):
    """SmartUpdate on every device; ``previous[d]`` is device d's last task of the step before."""
    m = g.m
    shard = work.parameters / m.devices
    subgroups = max(1, int(np.ceil(shard * 4 * F32 / m.device_memory)))
    size = shard / subgroups
    grad_bytes = (work.compression if config == "SU+O+C" else 1.0) * F32
    fpga = 1 / m.fpga_elements
    uploads, ends = [], []
    for d in range(m.devices):
        start = g.join(f"s{step} d{d} start", [ready, previous[d]], phase="UP", step=step)
        tags = {"phase": "UP", "step": step}
        state = {"what": "states", **tags}
        if config == "SU":
            done, tails = start, []
            for j in range(subgroups):
                reads = [g.ssd_to_fpga(f"s{step} d{d} read {j}", 3 * F32 * size, d, [done], **state),
                         g.ssd_to_fpga(f"s{step} d{d} read grad {j}", grad_bytes * size, d, [done],
                                       what="gradients", **tags)]
                update = g.add(f"s{step} d{d} fpga {j}", size, {f"fpga{d}": fpga}, reads, **tags)
                done = g.fpga_to_ssd(f"s{step} d{d} write {j}", 3 * F32 * size, d, [update], **state)
                tails.append(g.ssd_to_host(f"s{step} d{d} upload {j}", F32 * size, d, [done], **state))
            uploads += tails
            ends.append(g.join(f"s{step} d{d} end", tails + [done], **tags))
            continue
        wp = wm = wv = update = None
        tails = []
        for j in range(subgroups):
            rp = g.ssd_to_fpga(f"s{step} d{d} read p {j}", F32 * size, d, [start, wp], **state)
            rg = g.ssd_to_fpga(f"s{step} d{d} read g {j}", grad_bytes * size, d, [start, update],
                               what="gradients", **tags)
            rm = g.ssd_to_fpga(f"s{step} d{d} read m {j}", F32 * size, d, [start, wm], 1, **state)
            rv = g.ssd_to_fpga(f"s{step} d{d} read v {j}", F32 * size, d, [start, wv], 1, **state)
            update = g.add(f"s{step} d{d} fpga {j}", size, {f"fpga{d}": fpga}, [rp, rg, rm, rv, update],
                           **tags)
            wp = g.fpga_to_ssd(f"s{step} d{d} write p {j}", F32 * size, d, [update], **state)
            uploads.append(g.ssd_to_host(f"s{step} d{d} upload {j}", F32 * size, d, [wp], **state))
            wm = g.fpga_to_ssd(f"s{step} d{d} write m {j}", F32 * size, d, [update], 1, **state)
            wv = g.fpga_to_ssd(f"s{step} d{d} write v {j}", F32 * size, d, [update], 1, **state)
            tails += [wm, wv]
        ends.append(g.join(f"s{step} d{d} end", tails + [uploads[-1]], **tags))
    gate = g.join(f"s{step} parameters at host", uploads if config != "SU" else ends, phase="UP", step=step)
    return gate, ends


def build_steps(config, machine, work, steps=1):
    """The task list of ``steps`` consecutive training steps of ``config`` (one of ``CONFIGS``).

    Returns ``(tasks, marks)``: ``marks[s]`` holds the task indices ``"forward"``, ``"gradients"``
    and ``"next"`` of step ``s`` (forward done, every gradient stored, next forward may start).
    """
    if config not in ("BASE", "SU", "SU+O", "SU+O+C"):
        raise ValueError(f"unknown configuration {config!r}")
    g = _Graph(machine)
    gate = None
    previous = [None] * machine.devices
    marks = []
    for step in range(steps):
        forward, stored = _forward_backward(g, config, work, step, gate)
        if config == "BASE":
            gate, ends = _baseline_update(g, work, step, stored)
            previous = ends * machine.devices
        else:
            gate, previous = _smart_update(g, config, work, step, stored, previous)
        marks.append({"forward": forward, "gradients": stored, "next": gate})
    return g.tasks, marks
