# amaranth: UnusedElaboratable=no
"""cocotb tests of :class:`rtl.bus.AXILiteControl` driven by cocotbext-axi's ``AxiLiteMaster``.

A small kernel model answers each ``start`` pulse: it drops ``idle``, records the
argument outputs, and after a few cycles pulses ``done`` and ``ready`` and raises ``idle``
again. The master's five channels get random pauses, so AW and W reach the slave in
either order. Offsets come from the component's own ``register_map()``.

The pytest runners and the register-map and parameter checks are at the bottom.
"""

import cocotb
import pytest
from cocotb.triggers import RisingEdge, with_timeout
from cocotbext.axi import AxiLiteBus, AxiLiteMaster
from cocotbext.axi.constants import AxiResp

from scripts.sim import knobs
from scripts.sim.runner import component_from_env, params_from_env, run_cocotb
from scripts.sim.tb import CLOCK_PERIOD_NS, ClockedTB

CTRL, GIE, IER, ISR = 0x00, 0x04, 0x08, 0x0C
AP_START, AP_DONE, AP_IDLE, AP_READY, AUTO_RESTART = 1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 7
RUN_CYCLES = 20
RESET_ROUNDS = 16


class ControlTB(ClockedTB):
    def __init__(self, dut, *, stall=0.3):
        super().__init__(dut)
        self.component = component_from_env()
        self.registers = {entry["name"]: entry for entry in self.component.register_map()}
        self.master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control_"), dut.clk, dut.rst)
        for interface in (self.master.write_if, self.master.read_if):
            interface.log.setLevel("WARNING")
        if stall:
            rng = knobs.rng(50)
            for channel in (self.master.write_if.aw_channel, self.master.write_if.w_channel,
                            self.master.write_if.b_channel, self.master.read_if.ar_channel,
                            self.master.read_if.r_channel):
                channel.set_pause_generator(_pauses(rng, stall))
        dut.idle.value = 1
        dut.done.value = 0
        dut.ready.value = 0
        for entry in self.entries("status"):
            getattr(dut, f"status__{entry['name']}").value = 0
        self.starts = []  # (cycle, argument values) per start pulse
        self.irq_high_cycles = 0
        cocotb.start_soon(self._kernel())

    def entries(self, kind):
        return [entry for entry in self.registers.values() if entry["kind"] == kind]

    async def _kernel(self):
        busy_for = 0
        while True:
            await RisingEdge(self.clock)
            self.dut.done.value = 0
            self.dut.ready.value = 0
            if self.dut.irq.value:
                self.irq_high_cycles += 1
            if self.dut.start.value:
                assert busy_for == 0, f"start pulse while the kernel runs, cycle {self.cycle}"
                values = {entry["name"]: int(getattr(self.dut, f"args__{entry['name']}").value)
                          for entry in self.entries("argument")}
                self.starts.append((self.cycle, values))
                self.dut.idle.value = 0
                busy_for = RUN_CYCLES
            elif busy_for:
                busy_for -= 1
                if busy_for == 0:
                    self.dut.done.value = 1
                    self.dut.ready.value = 1
                    self.dut.idle.value = 1

    async def read(self, offset):
        response = await self.master.read(offset, 4)
        assert response.resp == AxiResp.OKAY, f"read of {offset:#x} answered {response.resp}"
        return int.from_bytes(response.data, "little")

    async def write(self, offset, value, length=4):
        response = await self.master.write(offset, value.to_bytes(length, "little"))
        assert response.resp == AxiResp.OKAY, f"write of {offset:#x} answered {response.resp}"

    async def read_register(self, name):
        entry = self.registers[name]
        value = await self.read(entry["offset"])
        if entry["width"] > 32:
            value |= await self.read(entry["offset"] + 4) << 32
        return value

    async def wait_done(self, limit=2000):
        async def poll():
            while True:
                ctrl = await self.read(CTRL)
                if ctrl & AP_DONE:
                    return ctrl
        return await with_timeout(poll(), limit * CLOCK_PERIOD_NS, "ns")

    async def run_with_random_arguments(self, rng):
        """Write random values to every argument, set ap_start and wait for ap_done.

        Checks that CTRL then reads done, ready and idle; returns ``(values, ctrl)``.
        """
        values = {entry["name"]: _random_value(rng, entry["width"]) for entry in self.entries("argument")}
        for name, value in values.items():
            await self.write(self.registers[name]["offset"], value, self.registers[name]["width"] // 8)
        await self.write(CTRL, AP_START)
        ctrl = await self.wait_done()
        assert ctrl & (AP_DONE | AP_READY | AP_IDLE) == AP_DONE | AP_READY | AP_IDLE, f"CTRL {ctrl:#x}"
        return values, ctrl


def _pauses(rng, probability):
    while True:
        yield bool(rng.random() < probability)


def _random_value(rng, width):
    return int.from_bytes(rng.bytes(width // 8), "little")


@cocotb.test()
async def arguments_read_back(dut):
    """Every argument written (64-bit ones as two words, low first) reads back and drives its port."""
    tb = ControlTB(dut)
    await tb.reset()
    rng = knobs.rng(51)
    for _ in range(knobs.vectors(4, limit=100)):  # rounds that write and read every argument
        expected = {entry["name"]: _random_value(rng, entry["width"]) for entry in tb.entries("argument")}
        for name, value in expected.items():
            await tb.write(tb.registers[name]["offset"], value, tb.registers[name]["width"] // 8)
        for name, value in expected.items():
            got = await tb.read_register(name)
            assert got == value, f"{name}: read {got:#x}, wrote {value:#x}; {knobs.describe()}"
            port = int(getattr(dut, f"args__{name}").value)
            assert port == value, f"{name}: port {port:#x}, wrote {value:#x}; {knobs.describe()}"


@cocotb.test()
async def byte_strobes(dut):
    """A one-byte write changes only its byte (wstrb honoured)."""
    tb = ControlTB(dut)
    await tb.reset()
    entry = tb.entries("argument")[0]
    await tb.write(entry["offset"], 0x11223344)
    await tb.master.write(entry["offset"] + 2, b"\xab")
    assert await tb.read(entry["offset"]) == 0x11AB3344


@cocotb.test()
async def start_and_done_handshake(dut):
    """ap_start starts the kernel once with the arguments set; ap_done and ap_ready clear on read."""
    tb = ControlTB(dut)
    await tb.reset()
    ctrl = await tb.read(CTRL)
    assert ctrl == AP_IDLE, f"CTRL after reset {ctrl:#x}"
    rng = knobs.rng(52)
    for run in range(3):
        values, ctrl = await tb.run_with_random_arguments(rng)
        assert not ctrl & AP_START, f"ap_start still set after the run: {ctrl:#x}"
        assert len(tb.starts) == run + 1, f"{len(tb.starts)} start pulses after {run + 1} runs"
        assert tb.starts[-1][1] == values, "the kernel saw other argument values"
        again = await tb.read(CTRL)
        assert again & (AP_DONE | AP_READY) == 0, f"ap_done/ap_ready not cleared on read: {again:#x}"
    assert tb.irq_high_cycles == 0, "irq raised with GIE and IER clear"


@cocotb.test()
async def start_waits_for_idle(dut):
    """ap_start written while the kernel is busy is held until idle, then taken once."""
    tb = ControlTB(dut)
    await tb.reset()
    dut.idle.value = 0
    await tb.write(CTRL, AP_START)
    await tb.cycles(10)
    assert not tb.starts, "start pulse while the kernel is not idle"
    assert await tb.read(CTRL) & AP_START, "ap_start not held"
    dut.idle.value = 1
    await tb.wait_done()
    assert len(tb.starts) == 1


@cocotb.test()
async def interrupts(dut):
    """ISR bits follow IER, irq needs GIE, ISR bits toggle on write."""
    tb = ControlTB(dut)
    await tb.reset()
    await tb.write(IER, 0b01)
    await tb.write(CTRL, AP_START)
    await tb.wait_done()
    assert await tb.read(ISR) == 0b01, "done interrupt not latched"
    assert not dut.irq.value, "irq with GIE clear"
    await tb.write(GIE, 1)
    await tb.cycles(2)
    assert dut.irq.value, "irq low with GIE set and ISR bit 0 set"
    await tb.write(ISR, 0b01)
    assert await tb.read(ISR) == 0, "ISR bit 0 not toggled off"
    await tb.cycles(2)
    assert not dut.irq.value, "irq still high with ISR clear"
    await tb.write(ISR, 0b10)
    assert await tb.read(ISR) == 0b10, "ISR bit 1 not toggled on"
    await tb.write(ISR, 0b10)
    await tb.write(IER, 0b11)
    await tb.write(CTRL, AP_START)
    await tb.wait_done()
    assert await tb.read(ISR) == 0b11, "ready interrupt not latched with IER bit 1"
    assert await tb.read(GIE) == 1 and await tb.read(IER) == 0b11


@cocotb.test()
async def auto_restart(dut):
    """With auto_restart the kernel starts again after each done, until auto_restart is cleared."""
    tb = ControlTB(dut)
    await tb.reset()
    await tb.write(CTRL, AP_START | AUTO_RESTART)
    await with_timeout(_until(lambda: len(tb.starts) >= 3, tb), 200 * RUN_CYCLES * CLOCK_PERIOD_NS, "ns")
    assert await tb.read(CTRL) & AUTO_RESTART
    await tb.write(CTRL, 0)
    await tb.cycles(3 * RUN_CYCLES)
    count = len(tb.starts)
    await tb.cycles(3 * RUN_CYCLES)
    assert len(tb.starts) == count, "kernel restarted after auto_restart was cleared"


async def _until(condition, tb):
    while not condition():
        await tb.cycles(1)


@cocotb.test()
async def status_registers(dut):
    """Status inputs read back; a 64-bit counter read low-then-high never tears across a carry."""
    tb = ControlTB(dut)
    await tb.reset()
    rng = knobs.rng(53)
    statuses = tb.entries("status")
    for entry in statuses:
        value = _random_value(rng, 64) & ((1 << entry["width"]) - 1)
        getattr(dut, f"status__{entry['name']}").value = value
        assert await tb.read_register(entry["name"]) == value, entry["name"]
    wide = max(statuses, key=lambda entry: entry["width"], default=None)
    if wide is None or wide["width"] <= 32:
        return
    counter = getattr(dut, f"status__{wide['name']}")
    carries = (1 << (wide["width"] - 32)) - 1  # high-word values that can still carry

    async def count(start):
        value = start
        while True:
            counter.value = value
            await RisingEdge(tb.clock)
            value += 1
    for trial in range(8):
        start = ((trial % carries + 1) << 32) - 4 - int(rng.integers(0, 24))
        task = cocotb.start_soon(count(start))
        await tb.cycles(2)
        value = await tb.read_register(wide["name"])
        task.cancel()
        assert start <= value <= start + 200, (
            f"torn 64-bit read {value:#x} near {start:#x}; {knobs.describe()}")


@cocotb.test()
async def unmapped_addresses(dut):
    """Unmapped words read zero and ignore writes, with OKAY responses."""
    tb = ControlTB(dut)
    await tb.reset()
    used = set()
    for entry in tb.registers.values():
        used.update(range(entry["offset"], entry["offset"] + max(4, entry["width"] // 8), 4))
    end = max(used) + 4
    free = [offset for offset in range(0, end + 16, 4) if offset not in used]
    free.append((1 << params_from_env()["address_width"]) - 4)
    before = {name: await tb.read_register(name) for name in tb.registers}
    for offset in free:
        await tb.write(offset, 0xFFFFFFFF)
        assert await tb.read(offset) == 0, f"unmapped {offset:#x} reads non-zero"
    after = {name: await tb.read_register(name) for name in tb.registers}
    assert after == before, "a write to an unmapped address changed a register"
    assert not tb.starts



class _RandomAccesses:
    """Random register accesses from a task: argument, GIE, IER and ap_start writes, reads of any register.

    ``clear`` ends the task (for a reset, which cuts the master's transactions).
    """

    def __init__(self, tb, rng):
        self._tb = tb
        self._rng = rng
        self._task = cocotb.start_soon(self._run())

    def clear(self):
        self._task.cancel()

    async def _run(self):
        tb, rng = self._tb, self._rng
        arguments = tb.entries("argument")
        offsets = [entry["offset"] for entry in tb.registers.values()]
        while True:
            choice = int(rng.integers(5))
            if choice == 0:
                await tb.master.write(CTRL, AP_START.to_bytes(4, "little"))
            elif choice == 1:
                offset = (GIE, IER)[int(rng.integers(2))]
                await tb.master.write(offset, _random_value(rng, 32).to_bytes(4, "little"))
            elif choice == 2:
                await tb.master.read(offsets[int(rng.integers(len(offsets)))], 4)
            else:
                entry = arguments[int(rng.integers(len(arguments)))]
                value = _random_value(rng, entry["width"])
                await tb.master.write(entry["offset"], value.to_bytes(entry["width"] // 8, "little"))


async def _run_after_reset(tb, rng):
    """Every register reads its reset value; then new arguments, ap_start and done work as after power-up."""
    starts = len(tb.starts)
    for entry in tb.registers.values():
        value = await tb.read_register(entry["name"])
        want = AP_IDLE if entry["name"] == "CTRL" else 0  # the status inputs are held at 0
        assert value == want, (f"{entry['name']} reads {value:#x} after reset, not {want:#x}; "
                               f"{knobs.describe()}")
    values, _ = await tb.run_with_random_arguments(rng)
    assert len(tb.starts) == starts + 1, f"{len(tb.starts) - starts} start pulses for one ap_start"
    assert tb.starts[-1][1] == values, f"the kernel saw other argument values; {knobs.describe()}"
    for name, value in values.items():
        assert await tb.read_register(name) == value, f"{name} does not read back; {knobs.describe()}"


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset shared with the host's master in the middle of random accesses; the next run sees none of them.

    The AxiLiteMaster takes the DUT's ``rst``, so the reset cuts its transactions too. Each
    round: random argument, GIE/IER and ap_start writes and register reads, with pauses on
    all five channels and the kernel busy (``idle`` low, so ap_start waits); reset at a
    random cycle 0..60 after the first AW; then the bus must be idle (no ``bvalid`` or
    ``rvalid``; AW, W and AR ready), no start may follow (ap_start cleared), every register
    must read its reset value, and a run with new arguments must behave as after power-up,
    within a cycle bound.
    """
    tb = ControlTB(dut)
    rng = knobs.rng(54)
    await tb.reset()
    bus = "s_axi_control__"
    for _ in range(RESET_ROUNDS):
        dut.idle.value = 0
        traffic = _RandomAccesses(tb, rng)
        await tb.wait_until(lambda: dut.s_axi_control__awvalid.value and dut.s_axi_control__awready.value,
                            cycles=200, what="the first AW")
        await tb.reset_mid_transfer(rng, after=(0, 60), drivers=[traffic])
        held = [name for name in ("bvalid", "rvalid") if getattr(dut, bus + name).value]
        held += [f"not {name}" for name in ("awready", "wready", "arready")
                 if not getattr(dut, bus + name).value]
        assert not held, f"bus not idle after reset: {', '.join(held)}; {knobs.describe()}"
        starts = len(tb.starts)
        dut.idle.value = 1
        await tb.cycles(10)
        assert len(tb.starts) == starts, f"a start pulse from an ap_start written before the reset; " \
            f"{knobs.describe()}"
        await tb.bounded(_run_after_reset(tb, rng), cycles=20000, what="the run after reset")


# ---------------------------------------------------------------- pytest runners and checks

MODULE = __name__


@pytest.mark.parametrize("params", [
    {},
    {"arguments": "a:32,b:64,c:32,d:64", "status": "flag:1,wide:33,count:64,word:32", "address_width": 7},
], ids=["default", "mixed"])
def test_axi_lite_control(params):
    run_cocotb("axi_lite_control", MODULE, params=params)


def test_register_map_layout():
    from rtl.bus.axi_lite_control import AXILiteControl

    control = AXILiteControl(arguments=[("src", 64, "source address"), ("n", 32)], status="cycles:64,err:2")
    rows = [(e["name"], e["offset"], e["width"], e["access"], e["kind"]) for e in control.register_map()]
    assert rows == [
        ("CTRL", 0x00, 32, "RW", "control"), ("GIE", 0x04, 32, "RW", "control"),
        ("IER", 0x08, 32, "RW", "control"), ("ISR", 0x0C, 32, "RW", "control"),
        ("src", 0x10, 64, "RW", "argument"), ("n", 0x18, 32, "RW", "argument"),
        ("cycles", 0x20, 64, "RO", "status"), ("err", 0x28, 2, "RO", "status"),
    ]
    assert control.register_map()[4]["description"] == "source address"


@pytest.mark.parametrize("kwargs,message", [
    ({"arguments": "a:16"}, "width of 'a' must be 32 or 64"),
    ({"arguments": "a:32,a:64"}, "repeated: a"),
    ({"arguments": "a:32", "status": "a:8"}, "repeated: a"),
    ({"status": "x:65"}, "width of 'x' must be 1..64"),
    ({"arguments": "start:32"}, "not a usable register name"),
    ({"arguments": "ctrl:32"}, "not a usable register name"),
    ({"arguments": "a"}, "is not name:width"),
    ({"arguments": "a:32,b:32,c:32", "status": "", "address_width": 5}, "needs 40 bytes"),
])
def test_control_parameters_are_validated(kwargs, message):
    from rtl.bus.axi_lite_control import AXILiteControl

    with pytest.raises(ValueError, match=message):
        AXILiteControl(**kwargs)
