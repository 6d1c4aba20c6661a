"""The AXI4-Lite decoder: each host access reaches the subordinate its high address bits name.

Each subordinate port is a cocotbext-axi ``AxiLiteRam`` (with random pauses on its channels);
the host (``AxiLiteMaster``) writes random words at random addresses of random ports, then reads
them all back. Every port's RAM must hold exactly the words written to its window.
"""

import logging

import cocotb
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiLiteRam

from scripts.sim import knobs
from scripts.sim.runner import params_from_env, run_cocotb
from scripts.sim.tb import ClockedTB


def _pauses(rng):
    while True:
        yield bool(rng.random() < 0.3)


@cocotb.test()
async def route_accesses(dut):
    tb = ClockedTB(dut)
    params = params_from_env()
    ports, width = params["ports"], params["address_width"]
    host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_"), dut.clk, dut.rst)
    rams = [
        AxiLiteRam(AxiLiteBus.from_prefix(dut, f"m{port}_axi_"), dut.clk, dut.rst, size=1 << width)
        for port in range(ports)
    ]
    for index, ram in enumerate(rams):
        for number, channel in enumerate(
            (
                ram.write_if.aw_channel,
                ram.write_if.w_channel,
                ram.write_if.b_channel,
                ram.read_if.ar_channel,
                ram.read_if.r_channel,
            )
        ):
            channel.set_pause_generator(_pauses(knobs.rng(600 + 10 * index + number)))
    for interface in [host.write_if, host.read_if] + [i for ram in rams for i in (ram.write_if, ram.read_if)]:
        interface.log.setLevel(logging.WARNING)
    await tb.reset()
    rng = knobs.rng(610)
    written = {}
    for _ in range(knobs.vectors(60)):
        port = int(rng.integers(0, ports))
        offset = int(rng.integers(0, 1 << (width - 2))) * 4
        value = int(rng.integers(0, 1 << 32))
        await host.write_dword(port << width | offset, value)
        written[port, offset] = value
    for (port, offset), value in written.items():
        assert await host.read_dword(port << width | offset) == value, f"port {port} offset {offset:#x}"
        assert int.from_bytes(rams[port].read(offset, 4), "little") == value
    for port, ram in enumerate(rams):  # nothing landed in another port's window
        for offset in range(0, 1 << width, 4):
            if (port, offset) not in written:
                assert int.from_bytes(ram.read(offset, 4), "little") == 0, f"stray write in port {port}"


def test_axi_lite_decoder():
    run_cocotb("runtime_axi_lite_decoder", __name__, params={"ports": 4, "address_width": 8})
