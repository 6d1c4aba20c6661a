"""Unsolicited and extra AXI responses to the DMA engines, in ``amaranth.sim`` with a hand-written
subordinate (cocotbext-axi's RAM never misbehaves on purpose).

* reader: R beats while no burst is open (before any command, and one beat more after a burst's
  last) are taken and dropped, counted in ``stray_beats``; they never reach ``data``, the next
  command reads right, and ``busy`` falls (nothing hangs). An ``rlast`` on the wrong beat sets
  ``protocol_error`` and the burst still ends on its counted length.
* writer: B responses while no burst awaits one are taken and dropped, counted in
  ``stray_responses``; the next command is written and answered, ``busy`` falls.
* both stray counters saturate at their limit (16 bits) rather than wrap.

The data a burst returns is the beat's byte address plus a constant, so every beat is checked.
"""

from amaranth.sim import Simulator

from rtl.bus.axi_burst_reader import AXIBurstReader
from rtl.bus.axi_burst_writer import AXIBurstWriter

PARAMS = dict(address_width=16, data_width=32, id_width=1, max_burst=4, max_outstanding=2, length_width=8)
SALT = 0x5A000000


def _word(address):
    return (SALT + address) & 0xFFFFFFFF


def _simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


async def _stray_r(ctx, axi, beats, *, last=1):
    """Offer ``beats`` R beats nobody asked for; return how many were taken."""
    taken = 0
    ctx.set(axi.rvalid, 1)
    ctx.set(axi.rlast, last)
    ctx.set(axi.rdata, 0xDEAD)
    for _ in range(beats):
        taken += ctx.get(axi.rready)
        await ctx.tick()
    ctx.set(axi.rvalid, 0)
    return taken


async def _read_command(ctx, dut, address, length, *, extra=0, early_last=False):
    """Run one read command with a subordinate that adds ``extra`` R beats after each burst's last
    (``early_last``: ``rlast`` one beat early on the first burst); return the delivered beats."""
    axi = dut.m_axi
    ctx.set(dut.cmd.payload.address, address)
    ctx.set(dut.cmd.payload.length, length)
    ctx.set(dut.cmd.valid, 1)
    ctx.set(dut.data.ready, 1)
    bursts, delivered, first = [], [], True
    for _ in range(400):
        command_taken = ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready)
        ctx.set(axi.arready, 1)
        if ctx.get(axi.arvalid):
            bursts.append((ctx.get(axi.araddr), ctx.get(axi.arlen) + 1))
        if ctx.get(dut.data.valid):
            delivered.append((ctx.get(dut.data.payload.data), ctx.get(dut.data.payload.last)))
        await ctx.tick()
        if command_taken:
            ctx.set(dut.cmd.valid, 0)
        if bursts:
            base, count = bursts.pop(0)
            for beat in range(count + extra):
                lastness = int(beat >= count - 1) if not (early_last and first) else int(beat == count - 2)
                ctx.set(axi.rvalid, 1)
                ctx.set(axi.rdata, _word(base + 4 * beat) if beat < count else 0xBAD0BAD0)
                ctx.set(axi.rlast, lastness)
                while True:
                    if ctx.get(dut.data.valid):
                        delivered.append((ctx.get(dut.data.payload.data), ctx.get(dut.data.payload.last)))
                    if ctx.get(axi.arvalid):
                        bursts.append((ctx.get(axi.araddr), ctx.get(axi.arlen) + 1))
                    ready = ctx.get(axi.rready)
                    await ctx.tick()
                    if ready:
                        break
            first = False
            ctx.set(axi.rvalid, 0)
        if not ctx.get(dut.busy) and not ctx.get(dut.cmd.valid) and not bursts:
            break
    return delivered


def _expected(address, length):
    return [(_word(address + 4 * beat), int(beat == length - 1)) for beat in range(length)]


def test_reader_drops_and_counts_stray_beats():
    dut = AXIBurstReader(**PARAMS)
    result = {}

    async def bench(ctx):
        taken = await _stray_r(ctx, dut.m_axi, 3)
        result["idle"] = (taken, ctx.get(dut.stray_beats), ctx.get(dut.data.valid), ctx.get(dut.busy))
        # One burst of 4 beats, and one extra beat after its last.
        result["extra"] = await _read_command(ctx, dut, 0x100, 4, extra=1)
        result["after_extra"] = ctx.get(dut.stray_beats), ctx.get(dut.busy), ctx.get(dut.protocol_error)
        result["clean"] = await _read_command(ctx, dut, 0x200, 5)
        result["early"] = await _read_command(ctx, dut, 0x300, 4, early_last=True)
        result["after_early"] = ctx.get(dut.protocol_error), ctx.get(dut.busy)
        # Bursts of 4 and 2 in flight, each answered with one beat too many: the extra beat of the
        # first cannot be told from the second's first beat but by its rlast; the command still
        # yields its 6 beats and ends.
        ctx.set(dut.clear, 1)
        await ctx.tick()
        ctx.set(dut.clear, 0)
        result["overlap"] = await _read_command(ctx, dut, 0x400, 6, extra=1)
        result["after_overlap"] = ctx.get(dut.protocol_error), ctx.get(dut.busy)

    _simulate(dut, bench)
    assert result["idle"] == (3, 3, 0, 0), "unsolicited R beats must be taken, dropped and counted"
    assert result["extra"] == _expected(0x100, 4), "an extra R beat reached data"
    assert result["after_extra"] == (4, 0, 0)
    assert result["clean"] == _expected(0x200, 5), "a command after stray beats read wrong"
    assert result["early"] == _expected(0x300, 4), "an early rlast cut the burst short"
    assert result["after_early"] == (1, 0), "an rlast on the wrong beat must set protocol_error"
    assert len(result["overlap"]) == 6 and result["overlap"][-1][1] == 1, "a command must yield its beats"
    assert result["after_overlap"] == (1, 0), "an extra beat among bursts in flight must be flagged"


def test_writer_drops_and_counts_stray_responses():
    dut = AXIBurstWriter(**PARAMS)
    result = {}

    async def bench(ctx):
        axi = dut.m_axi
        ctx.set(axi.bvalid, 1)
        ctx.set(axi.bresp, 2)  # a stray SLVERR must not latch the error either
        for _ in range(2):
            await ctx.tick()
        ctx.set(axi.bvalid, 0)
        ctx.set(axi.bresp, 0)
        await ctx.tick()
        result["idle"] = ctx.get(dut.stray_responses), ctx.get(dut.busy), ctx.get(dut.error)
        # One command of 3 beats: AW, 3 W beats, one B.
        ctx.set(dut.cmd.payload.address, 0x40)
        ctx.set(dut.cmd.payload.length, 3)
        ctx.set(dut.cmd.valid, 1)
        ctx.set(axi.awready, 1)
        ctx.set(axi.wready, 1)
        words, responded, sent = [], False, 0
        for _ in range(60):
            command_taken = ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready)
            ctx.set(dut.data.valid, int(sent < 3))
            ctx.set(dut.data.payload, _word(sent))
            sent += ctx.get(dut.data.valid) and ctx.get(dut.data.ready)
            wlast = ctx.get(axi.wvalid) and ctx.get(axi.wlast)
            if ctx.get(axi.wvalid):
                words.append(ctx.get(axi.wdata))
            await ctx.tick()
            if command_taken:
                ctx.set(dut.cmd.valid, 0)
            ctx.set(axi.bvalid, 0)
            if wlast and not responded:
                ctx.set(axi.bvalid, 1)
                responded = True
            if responded and not ctx.get(dut.busy):
                break
        ctx.set(dut.data.valid, 0)
        result["write"] = words, ctx.get(dut.busy), ctx.get(dut.stray_responses), ctx.get(dut.error)

    _simulate(dut, bench)
    assert result["idle"] == (2, 0, 0), "unsolicited B responses: dropped and counted, no burst retired"
    words, busy, stray, error = result["write"]
    assert words == [_word(n) for n in range(3)] and busy == 0 and stray == 2 and error == 0


def test_stray_counters_saturate():
    reader, writer = AXIBurstReader(**PARAMS), AXIBurstWriter(**PARAMS)
    result = {}

    async def read_bench(ctx):
        await _stray_r(ctx, reader.m_axi, (1 << 16) + 5)
        result["reader"] = ctx.get(reader.stray_beats)

    async def write_bench(ctx):
        ctx.set(writer.m_axi.bvalid, 1)
        await ctx.tick().repeat((1 << 16) + 5)
        result["writer"] = ctx.get(writer.stray_responses)

    _simulate(reader, read_bench)
    _simulate(writer, write_bench)
    assert result == {"reader": 0xFFFF, "writer": 0xFFFF}
