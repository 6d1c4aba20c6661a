"""AXI errors on the embedding cache's HBM port, in ``amaranth.sim`` with a hand-written HBM model
that answers chosen lines with SLVERR or DECERR (cocotbext-axi's ``AxiRam`` has no such knob).

What the cache documents: ``hbm_error`` is sticky, a failed read fills zeros (the beats before the
failing one are memory contents). What must not happen: anything else corrupted. So after a read
error the next miss reads real data, the failed row is not kept in the cache (a later lookup of it
misses and reads HBM again), and after a write error the next updates are still written through.
The counters ``hits``, ``misses``, ``bad_index`` and ``updates`` count as without the errors.
Last, with 3-bit counters (``counter_width``), each of them stops at its limit instead of wrapping.
Each test runs on the blocking cache and on a non-blocking one (``mshrs=4``); with several reads
in flight, a failed one spoils no later read once the reader has drained.
"""

import pytest
from amaranth.sim import Simulator

from rtl.dlrm.embedding_cache import EmbeddingCache

SETS, WAYS, DIM = 4, 2, 32
LINES = DIM // 16
LINE_BYTES = 64
ROWS = 64
SLVERR, DECERR = 2, 3


def line_value(address):
    """The HBM model's contents: sixteen words derived from the line's byte address."""
    return sum(((address * 16 + k) * 0x9E3779B1 & 0xFFFFFFFF) << (32 * k) for k in range(16))


def row_address(row, line=0):
    return row * DIM * 4 + line * LINE_BYTES


class HBM:
    """An AXI4 subordinate: AR/R bursts (INCR) and single-beat AW/W/B; ``faults`` maps a line's byte
    address to the response code its read or write gets."""

    def __init__(self, axi):
        self.axi, self.faults, self.written = axi, {}, {}
        self.stray_responses = 0  # B responses to send that no write asked for

    async def serve(self, ctx):
        axi = self.axi
        reads, writes, responses, w_data = [], [], [], []
        ctx.set(axi.arready, 1)
        ctx.set(axi.awready, 1)
        ctx.set(axi.wready, 1)
        while True:
            if self.stray_responses and not responses:
                self.stray_responses -= 1
                responses.append(0)
            beat = reads[0] if reads else None
            ctx.set(axi.rvalid, beat is not None)
            if beat is not None:
                address, left = beat
                ctx.set(axi.rdata, line_value(address))
                ctx.set(axi.rresp, self.faults.get(address, 0))
                ctx.set(axi.rlast, left == 1)
            ctx.set(axi.bvalid, bool(responses))
            ctx.set(axi.bresp, responses[0] if responses else 0)
            ar = (ctx.get(axi.araddr), ctx.get(axi.arlen) + 1) if ctx.get(axi.arvalid) else None
            aw = ctx.get(axi.awaddr) if ctx.get(axi.awvalid) else None
            w = ctx.get(axi.wdata) if ctx.get(axi.wvalid) else None
            r_fire = beat is not None and ctx.get(axi.rready)
            b_fire = responses and ctx.get(axi.bready)
            await ctx.tick()
            if r_fire:
                reads[0] = (address + LINE_BYTES, left - 1)
                if left == 1:
                    reads.pop(0)
            if b_fire:
                responses.pop(0)
            if ar is not None:
                reads.append(ar)
            if aw is not None:
                writes.append(aw)
            if w is not None:
                w_data.append(w)
            while writes and w_data:
                address, value = writes.pop(0), w_data.pop(0)
                code = self.faults.get(address, 0)
                if not code:
                    self.written[address] = value
                responses.append(code)


MSHRS = pytest.mark.parametrize("mshrs", [1, 4])


def simulate(script, mshrs, counter_width=32):
    dut = EmbeddingCache(sets=SETS, ways=WAYS, dim=DIM, index_bits=8, tag_width=4, address_width=32,
                         mshrs=mshrs, counter_width=counter_width)
    hbm = HBM(dut.m_axi)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    out = {}

    async def lookup(ctx, row):
        """One lookup; returns its lines as (data, hit)."""
        ctx.set(dut.i.payload.index, row)
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.o.ready, 1)
        lines = []
        if row >= ROWS:  # dropped and counted: no line comes back
            while not ctx.get(dut.i.ready):
                await ctx.tick()
            await ctx.tick()
            ctx.set(dut.i.valid, 0)
            return lines
        for _ in range(200):
            taken = ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid):
                lines.append((ctx.get(dut.o.payload.data), ctx.get(dut.o.payload.hit)))
            await ctx.tick()
            if taken:
                ctx.set(dut.i.valid, 0)
            if len(lines) == LINES:
                return lines
        raise AssertionError(f"lookup of row {row} never answered")

    async def burst(ctx, rows):
        """Lookups of ``rows`` back to back (tag = position); returns each one's lines, by position."""
        lines = {position: [] for position in range(len(rows))}
        ctx.set(dut.o.ready, 1)
        sent = 0
        for _ in range(400):
            if sent < len(rows):
                ctx.set(dut.i.payload.index, rows[sent])
                ctx.set(dut.i.payload.tag, sent)
            ctx.set(dut.i.valid, sent < len(rows))
            taken = sent < len(rows) and ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid):
                line = ctx.get(dut.o.payload.data), ctx.get(dut.o.payload.hit)
                lines[ctx.get(dut.o.payload.tag)].append(line)
            await ctx.tick()
            sent += taken
            if sent == len(rows) and all(len(got) == LINES for got in lines.values()):
                ctx.set(dut.i.valid, 0)
                return [lines[position] for position in range(len(rows))]
        raise AssertionError(f"lookups of rows {rows} never all answered: {lines}")

    async def update(ctx, row, line, value):
        ctx.set(dut.u.payload.index, row)
        ctx.set(dut.u.payload.line, line)
        ctx.set(dut.u.payload.data, value)
        ctx.set(dut.u.valid, 1)
        for _ in range(100):
            taken = ctx.get(dut.u.ready)
            await ctx.tick()
            if taken:
                ctx.set(dut.u.valid, 0)
                break
        await ctx.tick().repeat(12)

    async def bench(ctx):
        ctx.set(dut.rows, ROWS)
        ctx.set(dut.base, 0)
        await ctx.tick().repeat(SETS + 2)
        out["result"] = await script(ctx, dut, hbm, lookup, update, burst)

    sim.add_testbench(bench)
    sim.add_testbench(hbm.serve, background=True)
    sim.run()
    return out["result"]


def counters(ctx, dut):
    names = ("hits", "misses", "bad_index", "updates", "hbm_error")
    return {name: ctx.get(getattr(dut, name)) for name in names}


def real_row(row):
    return [(line_value(row_address(row, line)), 0) for line in range(LINES)]


@MSHRS
def test_read_error_fills_zeros_and_corrupts_nothing_else(mshrs):
    async def script(ctx, dut, hbm, lookup, update, burst):
        hbm.faults[row_address(5, 1)] = SLVERR
        failed = await lookup(ctx, 5)
        after_error = counters(ctx, dut)
        del hbm.faults[row_address(5, 1)]
        other = await lookup(ctx, 6)              # another set: the next miss reads HBM again
        again = await lookup(ctx, 5)              # the failed row was not kept: a miss, real data
        hit = await lookup(ctx, 5)                # now it is cached
        return failed, after_error, other, again, hit, counters(ctx, dut)

    failed, after_error, other, again, hit, final = simulate(script, mshrs)
    assert failed == [(line_value(row_address(5, 0)), 0), (0, 0)], "beats before the failing one are real"
    assert after_error == {"hits": 0, "misses": 1, "bad_index": 0, "updates": 0, "hbm_error": 1}
    assert other == real_row(6), "a miss after a read error must read HBM, not zeros"
    assert again == real_row(5), "the row whose read failed must not stay cached (as zeros)"
    assert hit == [(value, 1) for value, _ in real_row(5)]
    assert final == {"hits": 1, "misses": 3, "bad_index": 0, "updates": 0, "hbm_error": 1}


@MSHRS
def test_decerr_on_the_first_line_fills_the_whole_row_with_zeros(mshrs):
    async def script(ctx, dut, hbm, lookup, update, burst):
        hbm.faults[row_address(9, 0)] = DECERR
        return await lookup(ctx, 9), counters(ctx, dut)

    lines, final = simulate(script, mshrs)
    assert lines == [(0, 0)] * LINES and final["hbm_error"] == 1 and final["misses"] == 1


@MSHRS
def test_write_error_does_not_stop_later_updates(mshrs):
    async def script(ctx, dut, hbm, lookup, update, burst):
        hbm.faults[row_address(6, 0)] = SLVERR
        await update(ctx, 6, 0, 0x1111)
        after_error = counters(ctx, dut)
        await update(ctx, 7, 1, 0x2222)
        await update(ctx, 3, 0, 0x3333)
        return after_error, dict(hbm.written), counters(ctx, dut)

    after_error, written, final = simulate(script, mshrs)
    assert after_error["hbm_error"] == 1 and after_error["updates"] == 1
    assert written == {row_address(7, 1): 0x2222, row_address(3, 0): 0x3333}, \
        "updates after a write error must still be written through"
    assert final == {"hits": 0, "misses": 0, "bad_index": 0, "updates": 3, "hbm_error": 1}


@MSHRS
def test_counters_stop_at_their_limit(mshrs):
    """3-bit counters (``counter_width``): 10 bad lookups, 9 misses and 10 hits read 7 each, not 2, 1, 2."""
    async def script(ctx, dut, hbm, lookup, update, burst):
        for k in range(10):
            await lookup(ctx, ROWS + k)
        for row in range(9):                      # nine rows, each new: all misses
            await lookup(ctx, row)
        for _ in range(10):
            await lookup(ctx, 8)                  # the last one fetched: hits
        return counters(ctx, dut)

    assert simulate(script, mshrs, counter_width=3) == {"hits": 7, "misses": 7, "bad_index": 7, "updates": 0,
                                                 "hbm_error": 0}


@MSHRS
def test_unsolicited_write_response_is_an_hbm_error_and_nothing_else(mshrs):
    async def script(ctx, dut, hbm, lookup, update, burst):
        hbm.stray_responses = 2
        await ctx.tick().repeat(10)
        flagged = counters(ctx, dut)
        await update(ctx, 7, 1, 0x4444)           # the writer still counts its own burst right
        return flagged, await lookup(ctx, 7), dict(hbm.written), counters(ctx, dut)

    flagged, row, written, final = simulate(script, mshrs)
    assert flagged == {"hits": 0, "misses": 0, "bad_index": 0, "updates": 0, "hbm_error": 1}
    assert written == {row_address(7, 1): 0x4444}
    assert row == real_row(7)  # (the model serves reads from line_value, not from what was written)
    assert final == {"hits": 0, "misses": 1, "bad_index": 0, "updates": 1, "hbm_error": 1}


@MSHRS
def test_read_error_among_reads_in_flight_spoils_no_later_read(mshrs):
    """Rows 4 to 7 looked up back to back (distinct sets), row 5's second line failing: rows read
    before it are real (and kept, but for one completing as the error rises); row 5 leaves as
    zeros past its first line and is not kept; the reads in flight behind it may come back as
    zeros (the reader zero-fills until it drains), never kept; once the reader has drained,
    every row reads real data again."""
    async def script(ctx, dut, hbm, lookup, update, burst):
        hbm.faults[row_address(5, 1)] = SLVERR
        first = await burst(ctx, [4, 5, 6, 7])
        del hbm.faults[row_address(5, 1)]
        return first, await burst(ctx, [4, 5, 6, 7]), counters(ctx, dut)

    first, again, final = simulate(script, mshrs)
    assert first[0] == real_row(4)
    assert first[1] == [(line_value(row_address(5, 0)), 0), (0, 0)]
    for row, lines in zip((6, 7), first[2:], strict=True):
        assert lines in (real_row(row), [(0, 0)] * LINES), f"row {row}: {lines}"
    # The reader's error rises a few cycles before its failing beat leaves: with reads in flight a
    # good row completing then is dropped too (documented); a blocking cache has only the failing one.
    assert again[0] in ([(value, 1) for value, _ in real_row(4)],) + ((real_row(4),) if mshrs > 1 else ())
    assert again[1] == real_row(5), "the failed row must not stay cached (as zeros)"
    for row, lines, before in zip((6, 7), again[2:], first[2:], strict=True):
        assert [value for value, _ in lines] == [value for value, _ in real_row(row)], f"row {row}: {lines}"
        if before != real_row(row):  # read as zeros: never kept (a real row may be dropped too)
            assert not any(hit for _, hit in lines), f"row {row} was kept as zeros"
    assert final["hbm_error"] == 1 and final["hits"] + final["misses"] == 8
