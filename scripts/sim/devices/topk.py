"""Device API of the fused Top-K updater kernel (``topk_updater``) under cocotb.

:class:`TopKUpdaterDevice` extends :class:`scripts.sim.devices.updater.UpdaterDevice` (device memory
on every AXI4 port, ``AxiLiteMaster`` host) with the pair port ``m_axi_pairs`` and one operation,
:meth:`TopKUpdaterDevice.step`: place the parameter, states and the chunked Top-K wire stream in
device memory, write the registers, run the kernel, and return the outputs, the status registers
(the five error counters included) and the AXI traffic of the run *measured per buffer* from the
bus monitors: every read and write burst is attributed to the buffer it lies in, and a burst
outside all of them (say, a dense gradient's) is reported as ``stray``.
"""

import dataclasses
import logging

import numpy as np

from golden.optim.host import STATE_NAMES
from rtl.compress.chunk_parser import ERROR_NAMES
from scripts.sim.axi import BurstMonitor, FaultyAxiRam
from scripts.sim.devices.updater import MEMORY_SIZE, DeviceResult, UpdaterDevice, _bits, _open

__all__ = ["TopKResult", "TopKUpdaterDevice", "SESSIONS", "run_steps"]


@dataclasses.dataclass
class TopKResult(DeviceResult):
    """A :class:`~scripts.sim.devices.updater.DeviceResult` plus the pair stream's results.

    Attributes
    ----------
    errors : dict of str to int
        The five error counters (``rtl.compress.chunk_parser.ERROR_NAMES``).
    pairs_status : int
        Their sticky bits.
    traffic : dict
        ``{"read": {buffer: beats}, "write": {buffer: beats}}`` from the bus monitors, buffers
        ``param``, the states, ``param16``, ``pairs`` and ``stray`` (bursts in no buffer).
    """

    errors: dict = dataclasses.field(default_factory=dict)
    pairs_status: int = 0
    traffic: dict = dataclasses.field(default_factory=dict)


class TopKUpdaterDevice(UpdaterDevice):
    """The ``topk_updater`` kernel with its memory (all ports, ``m_axi_pairs`` too) and host port."""

    def __init__(self, dut, component, clock, *, stall=0.0, rng=None):
        super().__init__(dut, component, clock, stall=stall, rng=rng)
        params = component.parameters
        ram = FaultyAxiRam(dut, "m_axi_pairs_", clock, dut.rst, size=MEMORY_SIZE,
                           in_flight=params["max_outstanding"] + 2)
        ram.mem = ram.read_if.mem = ram.write_if.mem = self.memory
        for interface in (ram.read_if, ram.write_if):
            interface.log.setLevel(logging.WARNING)
        self.rams["pairs"] = ram
        for direction in ("read", "write"):
            self.monitors.append(BurstMonitor(
                dut, "m_axi_pairs", clock, direction=direction, data_width=params["data_width"],
                max_burst=params["max_burst"], max_outstanding=params["max_outstanding"]))
        self.set_stall(stall)

    def _traffic(self, marks, buffers):
        """Beats of the bursts since ``marks``, by the buffer ``[start, end)`` each lies in."""
        traffic = {"read": {}, "write": {}}
        for monitor, mark in zip(self.monitors, marks, strict=True):
            for _, address, beats in monitor.bursts[mark:]:
                end = address + beats * self.beat_bytes
                owner = next((name for name, (start, stop) in buffers.items()
                              if start <= address and end <= stop), "stray")
                counts = traffic[monitor.direction]
                counts[owner] = counts.get(owner, 0) + beats
        return traffic

    async def step(self, param, words, states, hyper, *, promised_sorted, copy_format="none", mode=0,
                   faults=None, timeout_cycles=None):
        """One run of the kernel on a Top-K gradient; returns a :class:`TopKResult`.

        Parameters
        ----------
        param : array of uint32 bits (n elements)
        words : array of uint64
            The chunked wire stream (``golden.compress.encode_stream``), chunk = ``chunk_elements``.
        states : dict of str to array of uint32 bits
        hyper : dict
            The golden model's keywords with ``step``.
        promised_sorted : bool
        copy_format : {"none", "f16", "bf16"}
        mode : int
            0 update, 1 gradient statistics.
        faults : dict, optional
            Buffer name (``"param"``, a state, ``"param16"``, ``"pairs"``) to ``(resp, first_beat,
            beats)``: those beats answer ``resp`` during this run.
        """
        optimizer = self.component.optimizer
        param = _bits(param, np.uint32)
        n = len(param)
        tensors = {"param": param}
        tensors.update({name: _bits(states[name], np.uint32) for name in STATE_NAMES[optimizer]})
        tensors["pairs"] = np.ascontiguousarray(np.asarray(words, np.uint64).reshape(-1))
        addresses = self._place_tensors(tensors, n)
        sizes = {name: array.nbytes for name, array in tensors.items()}
        sizes["param16"] = 2 * n
        # A buffer spans whole beats: the tail beat of a tensor may be read (never written past n).
        beat = self.beat_bytes
        buffers = {name: (addresses[name], addresses[name] + -(-sizes[name] // beat) * beat)
                   for name in sizes}

        self._set_buffer_faults(addresses, faults)
        for name in ("param",) + STATE_NAMES[optimizer] + ("param16", "pairs"):
            await self.write_register(f"{name}_address", addresses[name])
        await self.write_register("pairs_words", len(tensors["pairs"]))
        await self.write_register("sorted", int(promised_sorted))
        await self._write_step_registers(hyper, n, mode=mode, copy_format=copy_format)
        marks = [len(monitor.bursts) for monitor in self.monitors]
        await self._start_and_wait(timeout_cycles or 40 * n + 40 * len(tensors["pairs"]) + 20000)
        self.set_faults(())

        outputs, intact = self._read_outputs(addresses, n, copy_format)
        values = await self._results()
        errors = {name: await self.read_register(name) for name in ERROR_NAMES}
        return TopKResult(outputs=outputs, cycles=values["cycles"], read_beats=values["read_beats"],
                          write_beats=values["write_beats"], status=values["run_status"],
                          error=values["error"],
                          nan_count=values["nan_count"], inf_count=values["inf_count"],
                          accumulator=values["accumulator"], guards_intact=intact, errors=errors,
                          pairs_status=await self.read_register("pairs_status"),
                          traffic=self._traffic(marks, buffers))


async def steps_session(dut, jobs):
    """Run every step of ``jobs`` (see :func:`run_steps`) in order; a :class:`TopKResult` each."""
    device = await _open(dut, TopKUpdaterDevice)
    results = []
    for job in jobs:
        device.set_stall(job.get("stall", 0.0))
        device.set_memory(job.get("ddr"))
        result = await device.step(job["param"], job["words"], job["states"], job["hyper"],
                                   promised_sorted=job.get("sorted", True),
                                   copy_format=job.get("copy_format", "none"))
        result.ddr = device.ddr_counts()
        results.append(result)
    assert not device.violations, device.violations[:5]
    return results


SESSIONS = {"steps": steps_session}


def run_steps(jobs, **kernel_params):
    """Run ``jobs`` on ``topk_updater`` in one simulation; a :class:`TopKResult` each.

    Each job is ``{"param", "words", "states", "hyper", "copy_format", "sorted", "stall", "ddr"}``
    (the arguments of :meth:`TopKUpdaterDevice.step`; ``stall`` and ``ddr`` as for
    :func:`scripts.sim.devices.updater.run_jobs`). ``kernel_params`` are the kernel's parameters.
    """
    from scripts.sim.devices import run_session

    return run_session("topk_updater", "topk.steps", jobs, params=kernel_params)
