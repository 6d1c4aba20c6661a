"""Host device of the updater kernels (``adam_updater``, ``sgd_updater``, ``adagrad_updater``).

The kernel is simulated by Verilator under cocotb, with cocotbext-axi's ``AxiRam`` as device
memory on every AXI4 port (all ports see one address space) and ``AxiLiteMaster`` as the host.
:class:`UpdaterDevice` does a driver's work inside the simulation: copy the tensors into device
memory, write the registers (addresses, ``n``, the host scalars of
:func:`golden.optim.step_scalars`, formats), start the kernel, wait for its interrupt, and read
back the tensors and the status registers.

From Python (pytest, scripts) use :func:`run_jobs`, or :func:`update` and :func:`statistics` for
one step; each builds (or reuses) the simulation and returns a :class:`DeviceResult` each.
:func:`run_program` runs a coroutine of the caller's own on the device, for loops that alternate
host work and kernel runs (``neartrain demo train``)::

    from scripts.sim.devices import updater
    result = updater.update("adam", param, grad, {"exp_avg": m, "exp_avg_sq": v},
                            hyper=dict(step=1, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                       weight_decay=0.0), lanes=2, copy_format="bf16")
    result.outputs["param"], result.outputs["param16"], result.cycles, result.status

Arrays are raw bits: ``uint32`` for binary32 tensors, ``uint16`` for 16-bit gradients and the
parameter copy (``np.float32`` arrays may be passed and are viewed as bits).
"""

import dataclasses
import logging

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from cocotbext.axi import AxiLiteBus, AxiLiteMaster
from cocotbext.axi.sparse_memory import SparseMemory

from golden.optim.host import COPY_FORMAT_CODES, GRAD_FORMAT_CODES, STATE_NAMES, run_flags, scalar_bits
from rtl.bus.axi import PAGE_BYTES
from rtl.optim.gradient_statistics import BUCKETS
from scripts.sim import axi, knobs
from scripts.sim.axi import BurstMonitor, FaultyAxiRam, random_pauses_all
from scripts.sim.devices.ddr import DdrModel

__all__ = ["DeviceResult", "UpdaterDevice", "SESSIONS", "run_jobs", "run_program", "update", "statistics",
           "MEMORY_SIZE", "ADDRESS_BASE", "GUARD_BYTES", "GUARD_BYTE"]

MEMORY_SIZE = 1 << 32
# Buffers live at ADDRESS_BASE + offset so that the upper address bits are exercised (the
# RAM model wraps addresses modulo MEMORY_SIZE).
ADDRESS_BASE = 0x5A5A_0000_0000
# Bytes after each output tensor that must keep this value (the tail beat is strobed).
GUARD_BYTES = 256
GUARD_BYTE = 0xA5
_CTRL, _GIE, _IER, _ISR = 0x00, 0x04, 0x08, 0x0C


@dataclasses.dataclass
class DeviceResult:
    """What one kernel run returned.

    Attributes
    ----------
    outputs : dict of str to numpy.ndarray
        Update mode: ``"param"`` and each state (uint32 bits) and ``"param16"`` (uint16
        bits, or None without a copy). Statistics mode: empty.
    cycles, read_beats, write_beats : int
        The kernel's counters: clock cycles from start to done, AXI read and write data
        beats over all ports.
    status : int
        ``run_status`` (bit 0: a gradient element was NaN or Inf).
    error : int
        ``error`` (bit 0 read, bit 1 write error; bits 9:8 and 11:10 the responses).
    nan_count, inf_count, accumulator : int
        Statistics mode results (``accumulator`` in units of ``2**-298``).
    guards_intact : bool
        The bytes after every output tensor are unchanged.
    ddr : dict or None
        Under the DDR model (a job's ``"ddr"``): the bytes it granted by direction and its
        ``turnarounds`` during the job; None at ``AxiRam``'s full rate.
    """

    outputs: dict
    cycles: int
    read_beats: int
    write_beats: int
    status: int
    error: int
    nan_count: int = 0
    inf_count: int = 0
    accumulator: int = 0
    guards_intact: bool = True
    ddr: dict = None

    def assert_outputs_equal(self, expected, names, where):
        """Every word of each output tensor in ``names`` equals ``expected[name]`` (raw bits).

        The first five differing indices are shown in hex, with ``where`` (the case and the
        NEARTRAIN_SEED / NEARTRAIN_VECTORS that reproduce it).
        """
        for name in names:
            got, want = self.outputs[name], expected[name]
            wrong = np.flatnonzero(got != want)
            first = wrong[:5]
            assert not wrong.size, (f"{name} differs at {first.tolist()}: "
                                    f"got {[hex(v) for v in got[first]]}, "
                                    f"golden {[hex(v) for v in want[first]]}; {where}")


def _bits(array, dtype):
    array = np.asarray(array)
    if array.dtype in (np.float32, np.float16):
        array = array.view(np.uint32 if array.dtype == np.float32 else np.uint16)
    return np.ascontiguousarray(array.reshape(-1), dtype=dtype)


class UpdaterDevice:
    """The kernel under simulation with its memory and host port (use inside a cocotb test).

    Parameters
    ----------
    dut : cocotb handle of the kernel's top level
    component : UpdaterKernel
        The Python object of the simulated kernel (``scripts.sim.runner.component_from_env``).
    clock : cocotb handle
    stall : float
        Probability of a pause on every AXI channel of the memory model (0: full rate).
    rng : numpy.random.Generator
        Pause patterns and buffer placement.
    """

    def __init__(self, dut, component, clock, *, stall=0.0, rng=None):
        self.dut = dut
        self.component = component
        self.clock = clock
        self.rng = rng if rng is not None else np.random.default_rng(0)
        params = component.parameters
        self.beat_bytes = params["data_width"] // 8
        self.memory = SparseMemory(MEMORY_SIZE)
        self.rams, self.monitors = {}, []
        for name in component.port_tensors:
            ram = FaultyAxiRam(dut, f"m_axi_{name}_", clock, dut.rst, size=MEMORY_SIZE,
                               in_flight=params["max_outstanding"] + 2)
            # Every port sees the one device memory.
            ram.mem = ram.read_if.mem = ram.write_if.mem = self.memory
            for interface in (ram.read_if, ram.write_if):
                interface.log.setLevel(logging.WARNING)
            self.rams[name] = ram
            for direction in ("read", "write"):
                self.monitors.append(BurstMonitor(
                    dut, f"m_axi_{name}", clock, direction=direction, data_width=params["data_width"],
                    max_burst=params["max_burst"], max_outstanding=params["max_outstanding"]))
        self.set_stall(stall)
        self.host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control_"), clock, dut.rst)
        self.registers = {entry["name"]: entry for entry in component.register_map()}
        self._next_free = 0
        self.cut_bursts = 0
        self.ddr = None

    def set_stall(self, stall):
        """Pause every AXI channel of the memory with probability ``stall`` (0: never)."""
        for ram in self.rams.values():
            ram.set_pause_generators(random_pauses_all(self.rng, stall) if stall else lambda _name: _never())

    def set_memory(self, ddr):
        """``ddr`` None: every port at ``AxiRam``'s own rate (a beat per cycle on R and on W);
        else one DDR channel behind all ports, :class:`scripts.sim.devices.ddr.DdrModel` with the
        :class:`~scripts.sim.devices.ddr.DdrArbiter` settings of the dict (``{}``: the defaults).
        Each call starts the model's counts afresh (:meth:`ddr_counts`)."""
        if ddr is None and self.ddr is None:
            return
        if self.ddr is None:
            self.ddr = DdrModel(self.clock, self.dut.rst)
            for ram in self.rams.values():
                self.ddr.attach(ram)
        self.ddr.configure(ddr)

    def ddr_counts(self):
        """Bytes granted by direction and turnarounds since :meth:`set_memory`; None without the model."""
        if self.ddr is None or not self.ddr.enabled:
            return None
        arbiter = self.ddr.arbiter
        return {**arbiter.granted, "turnarounds": arbiter.turnarounds}

    def set_faults(self, faults):
        """Error ranges ``[(start, end, resp)]`` of memory offsets, for every port."""
        for ram in self.rams.values():
            ram.faults = list(faults)

    @property
    def violations(self):
        return [v for monitor in self.monitors for v in monitor.violations]

    # ---------------------------------------------------------------- reset
    # The kernel's reset is the reset of its memory and host models too (``dut.rst``), as AXI
    # requires: both ends of a bus leave reset together, with every burst in flight dropped.
    def clear(self):
        """Forget what a reset cut (a ``driver`` of ``ClockedTB.reset_mid_transfer``).

        Called when reset rises and when it falls: the bursts in flight, which the reset
        dropped at both ends of every bus, and any fault range. ``cut_bursts`` keeps how many
        bursts were open when reset rose.
        """
        open_ = sum(monitor.outstanding for monitor in self.monitors)  # 0 when reset falls
        self.cut_bursts = max(self.cut_bursts, open_)
        for monitor in self.monitors:
            monitor.outstanding = 0
        self.set_faults(())

    def read_burst_open(self):
        """A read burst is open (AR taken, its last R beat not): a reset now cuts its R beats."""
        return any(monitor.outstanding for monitor in self.monitors if monitor.direction == "read")

    def write_burst_open(self):
        """A write burst is open while W beats, not the last, are on its port: a reset now cuts its data."""
        for monitor in self.monitors:
            if monitor.direction != "write" or not monitor.outstanding:
                continue
            wvalid, wlast = (getattr(self.dut, f"{monitor._prefix}__{name}") for name in ("wvalid", "wlast"))
            if int(wvalid.value) and not int(wlast.value):
                return True
        return False

    def bus_valids(self):
        """The names of the AXI valid signals, both ends of every memory port, that are high now."""
        names = [f"m_axi_{port}__{channel}valid" for port in self.rams
                 for channel in ("ar", "r", "aw", "w", "b")]
        return [name for name in names if int(getattr(self.dut, name).value)]

    async def reset_during_run(self, tb, rng, run, *, after, until):
        """Start ``run`` (a coroutine of this device) and reset while its bursts are open.

        Once the run's first burst starts, reset (of the kernel, its memory and its host)
        rises at the first cycle, from a random one in ``after`` (counted from that burst)
        on, at which ``until()`` holds (:meth:`read_burst_open`, :meth:`write_burst_open`),
        so a burst is cut. Then the bus must be idle: no AXI valid on any port nor the
        interrupt for a while, CTRL without ap_start or ap_done, and ap_idle within a cycle
        bound (the kernel first zeroes its statistics buckets). Returns the cycle at which
        reset rose.
        """
        self.cut_bursts = 0
        marks = [len(monitor.bursts) for monitor in self.monitors]
        task = cocotb.start_soon(run)

        await tb.wait_until(lambda: [len(monitor.bursts) for monitor in self.monitors] != marks, cycles=4000,
                            what="the run's first burst")
        cycle = await tb.reset_mid_transfer(rng, after=after, drivers=[self], until=until)
        task.cancel()
        where = f"after the reset at cycle {cycle}; {knobs.describe()}"
        assert self.cut_bursts, f"no burst was open when reset rose; {where}"
        for _ in range(32):
            high = self.bus_valids() + (["irq"] if int(self.dut.irq.value) else [])
            assert not high, f"{', '.join(high)} high {where}"
            await RisingEdge(self.clock)

        async def idle():
            while True:
                ctrl = await self.host.read_dword(_CTRL)
                assert not ctrl & 0b1011, f"CTRL {ctrl:#x} (start, done or ready) {where}"
                if ctrl & 0b100:
                    return

        await tb.bounded(idle(), cycles=4 * BUCKETS, what=f"ap_idle {where}")
        assert not self.bus_valids() and not self.violations, (self.bus_valids(), self.violations[:3], where)
        return cycle

    def beats_since(self, marks):
        """Data beats of the bursts the monitors saw since ``marks`` (their burst counts), by direction."""
        beats = {"read": 0, "write": 0}
        for monitor, mark in zip(self.monitors, marks, strict=True):
            beats[monitor.direction] += sum(length for _, _, length in monitor.bursts[mark:])
        return beats

    # ---------------------------------------------------------------- memory
    def allocate(self, size):
        """A fresh buffer of ``size`` bytes: returns its bus address (beat aligned, page offset random)."""
        pages = -(-(size + GUARD_BYTES + PAGE_BYTES) // PAGE_BYTES)
        offset = self._next_free + int(self.rng.integers(0, PAGE_BYTES // self.beat_bytes)) * self.beat_bytes
        self._next_free += (pages + 1) * PAGE_BYTES
        assert self._next_free < MEMORY_SIZE, "device memory exhausted"
        return ADDRESS_BASE + offset

    def write_buffer(self, address, array):
        data = np.ascontiguousarray(array).tobytes()
        self.memory.write(address % MEMORY_SIZE, data + bytes([GUARD_BYTE]) * GUARD_BYTES)

    def read_buffer(self, address, count, dtype):
        data = self.memory.read(address % MEMORY_SIZE, count * np.dtype(dtype).itemsize)
        return np.frombuffer(bytes(data), dtype=dtype).copy()

    def guard_intact(self, address, count, dtype):
        start = (address % MEMORY_SIZE) + count * np.dtype(dtype).itemsize
        return bytes(self.memory.read(start, GUARD_BYTES)) == bytes([GUARD_BYTE]) * GUARD_BYTES

    # ---------------------------------------------------------------- registers
    async def write_register(self, name, value):
        await axi.write_register(self.host, self.registers[name], value)

    async def read_register(self, name):
        return await axi.read_register(self.host, self.registers[name])

    async def _start_and_wait(self, timeout_cycles):
        await self.host.write_dword(_GIE, 1)
        await self.host.write_dword(_IER, 1)
        await self.host.write_dword(_CTRL, 1)
        await with_timeout(RisingEdge(self.dut.irq), 10 * timeout_cycles, "ns")
        ctrl = await self.host.read_dword(_CTRL)
        assert ctrl & 0b10, f"interrupt without ap_done (CTRL={ctrl:#x})"
        await self.host.write_dword(_ISR, 1)  # toggle the done bit back to 0
        await ClockCycles(self.clock, 2)
        assert not int(self.dut.irq.value), "interrupt still high after clearing ISR"

    async def _results(self):
        names = ("run_status", "error", "cycles", "read_beats", "write_beats", "nan_count", "inf_count")
        values = {name: await self.read_register(name) for name in names}
        words = [await self.read_register(f"sum_of_squares_{k}")
                 for k in range(len([r for r in self.registers if r.startswith("sum_of_squares_")]))]
        values["accumulator"] = sum(word << (64 * k) for k, word in enumerate(words))
        return values

    # ---------------------------------------------------------------- operations
    async def update(self, param, grad, states, hyper, *, grad_format="f32", copy_format="none",
                     timeout_cycles=None, faults=None):
        """One update step (arguments as :func:`update`); a :class:`DeviceResult`.

        ``faults`` maps a tensor name (``"param"``, ``"grad"``, a state, ``"param16"``) to
        ``(resp, first_beat, beats)``: those beats of its buffer answer ``resp`` (SLVERR or
        DECERR) to reads and writes during this run.
        """
        optimizer = self.component.optimizer
        param = _bits(param, np.uint32)
        n = len(param)
        grad = _bits(grad, np.uint32 if grad_format == "f32" else np.uint16)
        tensors = {"param": param, "grad": grad}
        tensors.update({name: _bits(states[name], np.uint32) for name in STATE_NAMES[optimizer]})
        addresses = self._place_tensors(tensors, n)
        self._set_buffer_faults(addresses, faults)
        for name, address in addresses.items():
            await self.write_register(f"{name}_address", address)
        await self.write_register("grad_format", GRAD_FORMAT_CODES.index(grad_format))
        await self._write_step_registers(hyper, n, mode=0, copy_format=copy_format)
        await self._start_and_wait(timeout_cycles or 40 * n + 20000)
        self.set_faults(())

        outputs, intact = self._read_outputs(addresses, n, copy_format)
        values = await self._results()
        return DeviceResult(outputs=outputs, cycles=values["cycles"], read_beats=values["read_beats"],
                            write_beats=values["write_beats"], status=values["run_status"],
                            error=values["error"], guards_intact=intact)

    # ------------------------------------------------- pieces of a step, shared with devices.topk
    def _place_tensors(self, tensors, n):
        """Copy each of ``tensors`` into a fresh buffer, and add a zeroed 16-bit ``param16`` buffer
        of ``n`` elements; returns ``{name: address}``."""
        addresses = {}
        for name, array in tensors.items():
            addresses[name] = self.allocate(array.nbytes)
            self.write_buffer(addresses[name], array)
        addresses["param16"] = self.allocate(2 * n)
        self.write_buffer(addresses["param16"], np.zeros(n, np.uint16))
        return addresses

    def _set_buffer_faults(self, addresses, faults):
        """``faults``: buffer name to ``(resp, first_beat, beats)``; those beats answer ``resp``."""
        ranges = []
        for name, (resp, first, beats) in (faults or {}).items():
            start = addresses[name] % MEMORY_SIZE + first * self.beat_bytes
            ranges.append((start, start + beats * self.beat_bytes, resp))
        self.set_faults(ranges)

    async def _write_step_registers(self, hyper, n, *, mode, copy_format):
        """``n``, the host scalars and run flags of ``hyper``, the mode and the copy format."""
        optimizer = self.component.optimizer
        await self.write_register("n", n)
        for name, bits in scalar_bits(optimizer, hyper).items():
            await self.write_register(name, bits)
        for name, value in run_flags(optimizer, hyper).items():
            await self.write_register(name, value)
        await self.write_register("mode", mode)
        await self.write_register("copy_format", COPY_FORMAT_CODES.index(copy_format))

    def _read_outputs(self, addresses, n, copy_format):
        """The updated tensors (``param16`` None without a copy) and whether every guard is intact."""
        names = ("param",) + STATE_NAMES[self.component.optimizer]
        outputs = {name: self.read_buffer(addresses[name], n, np.uint32) for name in names}
        outputs["param16"] = (None if copy_format == "none"
                              else self.read_buffer(addresses["param16"], n, np.uint16))
        intact = all(self.guard_intact(addresses[name], n, np.uint32) for name in names)
        intact &= self.guard_intact(addresses["param16"], n, np.uint16)
        return outputs, intact

    async def statistics(self, grad, *, grad_format="f32", timeout_cycles=None):
        """Statistics mode on a gradient; returns a :class:`DeviceResult` with the counts and sum."""
        grad = _bits(grad, np.uint32 if grad_format == "f32" else np.uint16)
        address = self.allocate(grad.nbytes)
        self.write_buffer(address, grad)
        await self.write_register("grad_address", address)
        await self.write_register("n", len(grad))
        await self.write_register("mode", 1)
        await self.write_register("grad_format", GRAD_FORMAT_CODES.index(grad_format))
        await self._start_and_wait(timeout_cycles or 40 * len(grad) + 20000)
        values = await self._results()
        return DeviceResult(outputs={}, cycles=values["cycles"], read_beats=values["read_beats"],
                            write_beats=values["write_beats"], status=values["run_status"],
                            error=values["error"], nan_count=values["nan_count"],
                            inf_count=values["inf_count"], accumulator=values["accumulator"])

    async def run_job(self, job):
        """Run one job dict (see :func:`run_jobs`); a :class:`DeviceResult`."""
        self.set_stall(job.get("stall", 0.0))
        self.set_memory(job.get("ddr"))
        if job["kind"] == "statistics":
            result = await self.statistics(job["grad"], grad_format=job.get("grad_format", "f32"))
        else:
            result = await self.update(job["param"], job["grad"], job.get("states", {}), job["hyper"],
                                       grad_format=job.get("grad_format", "f32"),
                                       copy_format=job.get("copy_format", "none"))
        result.ddr = self.ddr_counts()
        return result


def _never():
    while True:
        yield False


async def _open(dut, cls=UpdaterDevice):
    """A ``cls`` device after reset (inside the simulation)."""
    from scripts.sim.runner import component_from_env
    from scripts.sim.tb import ClockedTB

    tb = ClockedTB(dut)
    device = cls(dut, component_from_env(), tb.clock, rng=knobs.rng(5))
    await tb.reset()
    return device


async def jobs_session(dut, jobs):
    """Run every job of ``jobs`` in order; a :class:`DeviceResult` each."""
    device = await _open(dut)
    results = [await device.run_job(job) for job in jobs]
    assert not device.violations, device.violations[:5]
    return results


async def program_session(dut, job):
    """``await job["program"](device, job["payload"])``, then check the bus monitors."""
    device = await _open(dut)
    result = await job["program"](device, job["payload"])
    assert not device.violations, device.violations[:5]
    return result


SESSIONS = {"jobs": jobs_session, "program": program_session}


# -------------------------------------------------------------------- synchronous API
def run_jobs(optimizer, jobs, **kernel_params):
    """Run ``jobs`` on the ``<optimizer>_updater`` kernel in one simulation; returns their results.

    Parameters
    ----------
    optimizer : {"adam", "sgd", "adagrad"}
    jobs : list of dict
        ``{"kind": "update", "param", "grad", "states": {name: array}, "hyper": {...},
        "grad_format", "copy_format", "stall", "ddr"}`` or ``{"kind": "statistics", "grad",
        "grad_format", "stall", "ddr"}``; ``hyper`` holds the golden model's keywords with
        ``step``; ``stall`` is the pause probability on every AXI channel; ``ddr`` (optional)
        puts one DDR channel behind all ports (:meth:`UpdaterDevice.set_memory`).
    **kernel_params
        Kernel parameters (``lanes``, ``data_width``, ``ports``, ``chunk_elements``, ...).

    Returns
    -------
    list of DeviceResult
    """
    from scripts.sim.devices import run_session

    return run_session(f"{optimizer}_updater", "updater.jobs", jobs, params=kernel_params)


def run_program(optimizer, program, payload, **kernel_params):
    """Run ``await program(device, payload)`` on the ``<optimizer>_updater`` kernel; its result.

    For work that must alternate host computation and kernel runs (a training loop: the next
    gradient depends on the parameters the kernel just wrote), which :func:`run_jobs` cannot
    express because its jobs are fixed in advance. It shares :func:`run_jobs`'s Verilator build.

    Parameters
    ----------
    optimizer : {"adam", "sgd", "adagrad"}
    program : async function
        A module-level coroutine function ``program(device, payload)`` (it is pickled by
        reference into the simulation), with ``device`` an :class:`UpdaterDevice` after reset.
    payload : object
        Any picklable argument.
    **kernel_params
        Kernel parameters, as for :func:`run_jobs`.

    Raises
    ------
    scripts.sim.runner.SimulationError
        If the program raises, or the AXI burst monitors saw a protocol violation.
    """
    from scripts.sim.devices import run_session

    return run_session(f"{optimizer}_updater", "updater.program", {"program": program, "payload": payload},
                       params=kernel_params)


def update(optimizer, param, grad, states, hyper, *, grad_format="f32", copy_format="none", stall=0.0,
           **kernel_params):
    """One update step on the simulated kernel; returns a :class:`DeviceResult`."""
    job = {"kind": "update", "param": param, "grad": grad, "states": states, "hyper": hyper,
           "grad_format": grad_format, "copy_format": copy_format, "stall": stall}
    return run_jobs(optimizer, [job], **kernel_params)[0]


def statistics(optimizer, grad, *, grad_format="f32", stall=0.0, **kernel_params):
    """Statistics mode on the simulated kernel; returns a :class:`DeviceResult`."""
    job = {"kind": "statistics", "grad": grad, "grad_format": grad_format, "stall": stall}
    return run_jobs(optimizer, [job], **kernel_params)[0]
