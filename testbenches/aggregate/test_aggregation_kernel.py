"""aggregation_kernel: cocotb tests (collected by cocotb) and their pytest runners (at the bottom).

The kernel runs against cocotbext-axi's ``AxiRam`` (through ``scripts.sim.axi.FaultyAxiRam``,
every channel randomly paused in the stalled variants) and an ``AxiLiteMaster`` host. Each run:
B and the packets are written to memory, the arguments to the registers, ``ap_start``; at the
interrupt OUT is read back from memory and must equal :func:`golden.aggregate.execute` bit for
bit, the counters the golden's, and the AXI bursts obey the protocol (``BurstMonitor``).
"""

import logging

import cocotb
import numpy as np
import pytest
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from golden.aggregate import PacketFormat, execute, gcn_normalise, spawn, with_self_loops
from scripts.sim import axi, knobs
from scripts.sim.axi import BurstMonitor, FaultyAxiRam, random_pauses_all
from scripts.sim.devices.aggregate import special_features
from scripts.sim.runner import component_from_env, resolved_params_from_env, run_cocotb
from scripts.sim.tb import ClockedTB
from testbenches.aggregate.tb import small_graph

MODULE = "testbenches.aggregate.test_aggregation_kernel"
NS_PER_CYCLE = 10
_CTRL, _GIE, _IER, _ISR = 0x00, 0x04, 0x08, 0x0C
B_ADDRESS, PACKETS_ADDRESS, OUT_ADDRESS = 0x10000, 0x40000, 0x80000
COUNTERS = {"packet_count": "packets", "nonzero_count": "nonzeros", "header_errors": "header_errors",
            "range_errors": "range_errors", "bank_errors": "bank_errors"}


class KernelTB(ClockedTB):
    """Memory, host and burst monitors around one ``aggregation_kernel`` build."""

    def __init__(self, dut):
        super().__init__(dut)
        self.component = component_from_env()
        self.params = resolved_params_from_env()
        self.lanes, self.features = self.params["lanes"], self.params["features"]
        self.weighted = self.params["weighted"]
        self.format = PacketFormat(self.lanes, self.params["row_bits"], self.params["col_bits"],
                                   self.weighted)
        self.ram = FaultyAxiRam(dut, "m_axi_gmem_", self.clock, dut.rst,
                                in_flight=self.params["max_outstanding"] + 2)
        for interface in (self.ram.read_if, self.ram.write_if):
            interface.log.setLevel(logging.WARNING)
        self.monitors = [BurstMonitor(dut, "m_axi_gmem", self.clock, direction=direction,
                                      data_width=self.component.data_width,
                                      max_burst=self.params["max_burst"],
                                      max_outstanding=self.params["max_outstanding"])
                         for direction in ("read", "write")]
        self.host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control_"), self.clock, dut.rst)
        self.registers = {entry["name"]: entry for entry in self.component.register_map()}

    def stall(self, probability, salt):
        self.ram.set_pause_generators(random_pauses_all(knobs.rng(salt), probability) if probability
                                      else (lambda _name: iter(lambda: False, True)))

    def clear(self):
        """For ``reset_mid_transfer``: the reset dropped every burst in flight at both ends."""
        for monitor in self.monitors:
            monitor.clear()

    async def write_register(self, name, value):
        await axi.write_register(self.host, self.registers[name], value)

    async def read_register(self, name):
        return await axi.read_register(self.host, self.registers[name])

    async def start(self, packets, features, out_rows, *, relu=False):
        """Write B, the packets and the arguments, and set ap_start (without waiting)."""
        self.ram.write(B_ADDRESS, features.astype(np.float32).tobytes())
        words = self.format.encode(packets)
        self.ram.write(PACKETS_ADDRESS, b"".join(word.to_bytes(self.format.packet_bits // 8, "little")
                                                 for word in words))
        self.ram.write(OUT_ADDRESS, b"\xa5" * (out_rows + 1) * self.features * 4)
        for name, value in (("b_address", B_ADDRESS), ("b_rows", len(features)),
                            ("packets_address", PACKETS_ADDRESS), ("packet_total", len(packets)),
                            ("out_address", OUT_ADDRESS), ("out_rows", out_rows), ("flags", int(relu))):
            await self.write_register(name, value)
        await self.host.write_dword(_GIE, 1)
        await self.host.write_dword(_IER, 1)
        await self.host.write_dword(_CTRL, 1)

    async def wait_done(self, timeout_cycles):
        await with_timeout(RisingEdge(self.dut.irq), timeout_cycles * NS_PER_CYCLE, "ns")
        ctrl = await self.host.read_dword(_CTRL)
        assert ctrl & 0b10, f"interrupt without ap_done (CTRL={ctrl:#x})"
        await self.host.write_dword(_ISR, 1)
        await ClockCycles(self.clock, 2)

    async def run(self, packets, features, out_rows, *, relu=False, what="run", faults=()):
        """One run, checked against the golden; returns the status registers."""
        self.ram.faults = list(faults)
        await self.start(packets, features, out_rows, relu=relu)
        await self.wait_done(400 * (len(packets) * self.format.packet_bits // self.component.data_width
                                    + len(features) + out_rows) + 20000)
        names = (*COUNTERS, "stall_cycles", "error", "cycles")
        status = {name: await self.read_register(name) for name in names}
        out = np.frombuffer(self.ram.read(OUT_ADDRESS, (out_rows + 1) * self.features * 4), np.uint32)
        assert np.all(out[out_rows * self.features:] == 0xA5A5A5A5), (
            f"{what}: written past OUT; {knobs.describe()}")
        assert not [v for monitor in self.monitors for v in monitor.violations], (
            f"{what}: AXI violations {[v for monitor in self.monitors for v in monitor.violations][:3]}")
        if faults:
            return status
        expected, counters = execute(packets, features, n_rows=out_rows, weighted=self.weighted)
        if relu:
            expected = np.where(np.signbit(expected), np.float32(0), expected)
        got = out[:out_rows * self.features].reshape(out_rows, self.features)
        mismatch = np.argwhere(got != expected.view(np.uint32))
        if mismatch.size:
            where = tuple(mismatch[0])
            raise AssertionError(f"{what}: OUT{where} = {got[where]:#x}, expected "
                                 f"{expected.view(np.uint32)[where]:#x} ({len(mismatch)} mismatches); "
                                 f"{knobs.describe()}")
        for register, field in COUNTERS.items():
            assert status[register] == getattr(counters, field), (
                f"{what}: {register} {status[register]}, golden {getattr(counters, field)}; "
                f"{knobs.describe()}")
        assert status["error"] == 0 and status["cycles"] > len(packets)
        return status


def _job(tb, rng, seed, *, bad=False):
    nodes = min(tb.params["rows"], tb.params["cols"]) // tb.lanes * tb.lanes
    adjacency = small_graph(nodes, 2 * nodes, seed=seed)
    operator = gcn_normalise(adjacency) if tb.weighted else with_self_loops(adjacency)
    spawned = spawn(operator, lanes=tb.lanes, weighted=tb.weighted)
    packets = spawned.packets
    if bad:
        count = len(packets)
        pick = rng.random(count)
        packets.task[pick < 0.1] = 2
        packets.rows[(pick >= 0.1) & (pick < 0.2), 0] = spawned.n_rows + tb.lanes * 4
    return packets, special_features(rng, nodes, tb.features), spawned.n_rows


async def _first_job(dut, stall, salt, seed):
    """A reset testbench, every AXI channel paused with probability ``stall`` (seeded by ``salt``),
    ``knobs.rng(seed)`` and a first job drawn from it."""
    tb = KernelTB(dut)
    tb.stall(stall, salt)
    await tb.reset()
    rng = knobs.rng(seed)
    return tb, rng, _job(tb, rng, knobs.seed())


@cocotb.test()
@cocotb.parametrize(stall=[0.0, 0.3])
async def kernel_runs(dut, stall):
    """Two runs back to back (the second with ReLU and bad packets), every AXI channel paused at random."""
    tb, rng, (packets, features, rows) = await _first_job(dut, stall, 1, 2)
    status = await tb.run(packets, features, rows, what="run 1")
    dut._log.info("run 1: %s", status)
    packets, features, rows = _job(tb, rng, knobs.seed() + 1, bad=True)
    status = await tb.run(packets, features, rows, relu=True, what="run 2 (bad packets, relu)")
    assert status["header_errors"] and status["range_errors"], status


@cocotb.test()
async def bus_error_finishes(dut):
    """An SLVERR on the packets: the error register says so, the run still finishes; the next run is exact."""
    tb, rng, (packets, features, rows) = await _first_job(dut, 0.0, 3, 3)
    status = await tb.run(packets, features, rows, what="faulty run",
                          faults=[(PACKETS_ADDRESS + 64, PACKETS_ADDRESS + 128, AxiResp.SLVERR)])
    assert status["error"] & 1 and (status["error"] >> 8) & 3 == int(AxiResp.SLVERR), status
    status = await tb.run(packets, features, rows, what="run after the error")


@cocotb.test()
async def reset_mid_run(dut):
    """Reset (kernel and memory together) at a random cycle of a run; the next run is exact."""
    tb, rng, (packets, features, rows) = await _first_job(dut, 0.2, 4, 4)
    await tb.start(packets, features, rows)
    await tb.reset_mid_transfer(rng, after=(5, 400), drivers=[tb])
    packets, features, rows = _job(tb, rng, knobs.seed() + 2)
    await tb.run(packets, features, rows, what="run after reset")


# ---- pytest runners ----

CASES = [{"lanes": 4, "features": 4, "rows": 64, "cols": 64, "row_bits": 8, "col_bits": 8, "max_burst": 8}]
SLOW_CASES = [{"lanes": 4, "features": 16, "weighted": True, "rows": 128, "cols": 128, "row_bits": 12,
               "col_bits": 12}]


@pytest.mark.parametrize("params", CASES + [pytest.param(p, marks=pytest.mark.slow) for p in SLOW_CASES],
                         ids=lambda params: "-".join(f"{k}={v}" for k, v in params.items()))
def test_aggregation_kernel(params):
    run_cocotb("aggregation_kernel", MODULE, params=params)


def test_kernel_is_vitis_shaped(tmp_path):
    from rtl.registry import get_block
    from scripts.vitis import describe_kernel

    description = describe_kernel(get_block("aggregation_kernel").build({}), "aggregation")
    assert list(description["masters"]) == ["m_axi_gmem"] and description["interrupt"]
    pointers = [argument["name"] for argument in description["arguments"] if argument["pointer"]]
    assert pointers == ["b_address", "packets_address", "out_address"]
