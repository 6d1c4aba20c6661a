"""The runtime at its limits (``amaranth.sim``, no Verilator build): counters stop at their largest
value, and a sender that ignores its credits raises the switch's overflow flag while one that keeps
to them never does.

* ``runtime_node`` built with 2-bit counters: flits on channel 3 (dropped and counted as
  ``overflow``) are sent more times than the counter can hold; the status register read over
  AXI4-Lite must stop at 3, not wrap. A few events fewer must read exactly.
* ``runtime_switch``: port 0 sends random flits to port 1, whose output is held stalled (no credit
  comes back), first keeping to its credits (the overflow flag stays low, however long it tries),
  then ignoring them (the flag rises, for port 0 only, and stays up).

* ``runtime_axi_lite_decoder`` with 3 ports: an address of the missing 4th is answered DECERR.
* ``runtime_node_memory``: a write past its lines is ignored and counted (``range_errors``).

``NEARTRAIN_SEED`` seeds the flits and the gaps.
"""

import pytest
from amaranth.sim import Simulator

from rtl.net.switch import Switch
from rtl.runtime.axi_lite_decoder import AXILiteDecoder
from rtl.runtime.node_memory import NodeMemory
from rtl.runtime.runtime_node import RuntimeNode
from scripts.sim import knobs


async def _axi_read(ctx, bus, address, with_resp=False):
    """One AXI4-Lite read: AR until taken, then R (a handshake is valid and ready before an edge)."""
    ctx.set(bus.araddr, address)
    ctx.set(bus.arvalid, 1)
    ctx.set(bus.rready, 1)
    for _ in range(20):
        taken = ctx.get(bus.arready)
        await ctx.tick()
        if taken:
            break
    ctx.set(bus.arvalid, 0)
    for _ in range(20):
        answered, value, resp = ctx.get(bus.rvalid), ctx.get(bus.rdata), ctx.get(bus.rresp)
        await ctx.tick()
        if answered:
            ctx.set(bus.rready, 0)
            return (value, resp) if with_resp else value
    raise AssertionError(f"no AXI4-Lite answer for 0x{address:x}")


@pytest.mark.parametrize("events,expected", [(2, 2), (3, 3), (9, 3)])
def test_node_counter_saturates(events, expected):
    node = RuntimeNode(ranges=2, spawn_depth=2, queue_depth=2, tx_credits=1, counter_bits=2)
    result = {}
    offsets = {entry["name"]: entry["offset"] for entry in node.register_map()}

    async def bench(ctx):
        ctx.set(node.net_in.payload.vc.as_value(), 3)  # channel 3: dropped, counted as `overflow`
        for _ in range(events):
            ctx.set(node.net_in.valid, 1)
            await ctx.tick()
            ctx.set(node.net_in.valid, 0)
            await ctx.tick()
        await ctx.tick().repeat(3)
        result["overflow"] = await _axi_read(ctx, node.s_axi_control, offsets["overflow"])
        result["rx_task"] = await _axi_read(ctx, node.s_axi_control, offsets["rx_task"])

    sim = Simulator(node)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert result == {"overflow": expected, "rx_task": 0}, f"{events} dropped flits; {knobs.describe()}"


def _switch_run(ignore_credits, cycles=60):
    """Port 0 sends flits to port 1 (output stalled); returns the overflow flags seen each cycle."""
    depth = 2
    switch = Switch(nodes=2, depth=depth, rx_credits=1)
    rng = knobs.rng(7 + int(ignore_credits))
    flags = []

    async def bench(ctx):
        credits = [depth] * 3
        for port in range(2):
            ctx.set(switch.port(port, "out").ready, 0)
        for _ in range(cycles):
            vc = int(rng.integers(0, 3))
            send = bool(rng.random() < 0.8) and (ignore_credits or credits[vc] > 0)
            flit = switch.port(0, "in")
            ctx.set(flit.valid, send)
            ctx.set(flit.payload.vc, vc)
            ctx.set(flit.payload.packet.header.dst, 1)
            ctx.set(flit.payload.packet.header.ptype, vc)
            if send:
                credits[vc] -= 1
            await ctx.tick()
            returned = ctx.get(switch.port(0, "in_credit"))
            for channel in range(3):
                credits[channel] += returned >> channel & 1
            flags.append(ctx.get(switch.overflow))

    sim = Simulator(switch)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return flags


def test_switch_no_overflow_within_credits():
    flags = _switch_run(ignore_credits=False)
    assert not any(flags), f"overflow raised by a sender keeping to its credits: {flags}; {knobs.describe()}"


def test_switch_overflow_when_credits_ignored():
    flags = _switch_run(ignore_credits=True)
    first = next((index for index, flag in enumerate(flags) if flag), None)
    assert first is not None, f"a sender ignoring its credits never raised overflow; {knobs.describe()}"
    assert all(flag == 0b01 for flag in flags[first:]), f"overflow flags {flags}: port 0's only, sticky"


def test_decoder_answers_decerr_past_the_last_port():
    """With 3 ports, addresses of a 4th belong to no one: DECERR for the read and the write."""
    decoder = AXILiteDecoder(ports=3, address_width=4)
    result = {}

    async def bench(ctx):
        bus = decoder.s_axi
        for port in range(3):  # the real ports stay silent: a read is never forwarded to them
            ctx.set(getattr(decoder, f"m{port}_axi").arready, 1)
        result["read"] = await _axi_read(ctx, bus, 3 << 4, with_resp=True)
        ctx.set(bus.awaddr, 3 << 4)
        ctx.set(bus.wdata, 0x1234)
        ctx.set(bus.awvalid, 1)
        ctx.set(bus.wvalid, 1)
        ctx.set(bus.bready, 1)
        await ctx.tick()
        ctx.set(bus.awvalid, 0)
        ctx.set(bus.wvalid, 0)
        for _ in range(10):
            answered, resp = ctx.get(bus.bvalid), ctx.get(bus.bresp)
            await ctx.tick()
            if answered:
                result["write"] = resp
                break
        result["forwarded"] = [ctx.get(getattr(decoder, f"m{port}_axi").awvalid) for port in range(3)]

    sim = Simulator(decoder)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert result == {"read": (0, 3), "write": 3, "forwarded": [0, 0, 0]}, result


def test_node_memory_counts_writes_past_its_lines():
    memory = NodeMemory(lines=4)
    pulses = []

    async def bench(ctx):
        writes = ((1, memory.wr), (5, memory.wr), (3, memory.load), (4, memory.load), (2, memory.wr))
        for line, port in writes:
            ctx.set(port.payload.line, line)
            ctx.set(port.valid, 1)
            await ctx.tick()
            ctx.set(port.valid, 0)
            pulses.append(ctx.get(memory.range_errors))
        await ctx.tick()
        pulses.append(ctx.get(memory.range_errors))

    sim = Simulator(memory)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert pulses == [0, 1, 1, 2, 2, 2], pulses
