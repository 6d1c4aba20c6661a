"""``topk_axi_decompressor`` (``rtl.compress.axi_decompressor.AXIChunkDecompressor``): cocotb
tests (collected by cocotb) and their pytest runners (at the bottom).

Chunked wire streams (well formed at 0.1 %, 1 % and 10 % density, and corrupted as in
``test_chunk_decompressor``) are written into cocotbext-axi's ``AxiRam`` and decompressed from
there, with random stalls on every AXI channel, on the command stream and on the output. The dense
output and the error counters must equal :func:`golden.compress.scatter_stream` bit for bit. A
monitor counts every AXI beat: the DRAM bytes of fused-mode decompression are *measured* as the
read beats times the beat width, and the test asserts that every beat read lies inside the pair
stream and that nothing is written, i.e. that no dense gradient goes through DRAM. ``traffic``
awaits the session of the host device :mod:`scripts.sim.devices.compress` whose counts
``testbenches/compress/bench_compress.py`` tabulates; the testbench :class:`AxiDecompressorTB` is
the device's too.
"""

import cocotb
import pytest
from cocotbext.axi.constants import AxiResp

from scripts.sim import knobs
from scripts.sim.devices.compress import AxiDecompressorTB, decompressor_traffic
from scripts.sim.runner import params_from_env, run_cocotb
from testbenches.compress.tb import (
    AXI_PARAMS,
    RATIOS,
    CutBursts,
    check_cleared,
    corrupted_stream,
    idle_after_reset,
    random_size,
    stall_salt,
    top_k_stream,
)

MODULE = __name__
DEFAULT_TRANSFERS = 6
CORRUPTIONS = ("out_of_range", "truncated", "excess", "unsorted", "empty_transfer")


@cocotb.test()
@cocotb.parametrize(stall=[False, True])
async def streams_from_memory(dut, stall):
    """Well-formed and corrupted streams read over AXI: bit-exact output and counters, reads only."""
    salt = stall_salt(stall, stall)
    tb = AxiDecompressorTB(dut, stall=stall, salt=salt)
    rng = knobs.rng(20 + salt)
    await tb.reset()
    total = 0
    for n in range(knobs.vectors(DEFAULT_TRANSFERS, limit=60)):
        ratio = RATIOS[n % len(RATIOS)]
        size = random_size(rng, tb.chunk_size, int(rng.integers(1, 4)))
        promised_sorted = bool(n % 2)
        words, *_ = top_k_stream(rng, size, tb.chunk_size, ratio, tb.value_format, promised_sorted)
        await tb.transfer(words, size, promised_sorted, {"transfer": n, "ratio": ratio, "size": size})
        total += size
    for n, kind in enumerate(CORRUPTIONS):
        size = random_size(rng, tb.chunk_size, int(rng.integers(1, 4)))
        words, promised_sorted = corrupted_stream(rng, kind, size, tb.chunk_size, tb.value_format)
        await tb.transfer(words, size, promised_sorted, {"corruption": n, "kind": kind, "size": size})
        total += size
    await tb.drain(total)
    assert dut.read_error.value == 0


@cocotb.test()
async def read_fault(dut):
    """A SLVERR in the pair stream: flagged, the rest reads as zero words, nothing hangs."""
    rng = knobs.rng(31)
    params = params_from_env()
    chunk_size, lanes = params["chunk_size"], params["lanes"]
    size = random_size(rng, chunk_size, 3)
    words, *_ = top_k_stream(rng, size, chunk_size, 0.1, params["value_format"], False)
    beat_bytes = 8 * lanes
    beats = -(-len(words) // lanes)
    first_bad = int(rng.integers(0, beats))
    # The stream is placed at offset 0 (the first transfer of this test).
    faults = [(first_bad * beat_bytes, (first_bad + 1) * beat_bytes, AxiResp.SLVERR)]
    tb = AxiDecompressorTB(dut, faults=faults)
    await tb.reset()
    seen = words.copy()
    seen[first_bad * lanes:] = 0  # the reader delivers zeros from the first failing beat on
    await tb.transfer(words, size, False, {"fault_beat": first_bad, "size": size}, golden_words=seen)
    await tb.drain(size)
    assert dut.read_error.value == 1 and dut.read_error_resp.value == int(AxiResp.SLVERR), \
        f"read_error={dut.read_error.value} resp={dut.read_error_resp.value}; {knobs.describe()}"


@cocotb.test()
async def traffic(dut):
    """Measured DRAM bytes per parameter of fused-mode decompression at 0.1 %, 1 % and 10 %.

    The session :func:`scripts.sim.devices.compress.decompressor_traffic` that ``bench_compress``
    runs: one shard of ``NEARTRAIN_VECTORS`` chunks (default 16) per ratio, sorted Top-K pairs,
    every output beat and AXI burst checked.
    """
    await decompressor_traffic(dut, {"chunks": knobs.vectors(16)})


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset while read bursts are open, under stalls; the next transfer equals golden, alone.

    The reset is the block's and its ``AxiRam``'s (``dut.rst``), as AXI requires. Each round
    starts a multi-chunk transfer with pauses on every AXI channel, on the command and on the
    output, and raises reset at a random cycle at which a read burst is open (it is cut).
    Then no AXI valid may rise until the next command; ``read_error``, the counters and the
    status bits read 0; and a new transfer must give exactly its golden dense chunks and
    counters, reading exactly its stream's beats (no burst of the cut transfer comes back)
    and writing nothing, within a cycle bound, with ``busy`` falling.
    """
    tb = AxiDecompressorTB(dut, stall=True, salt=9)
    rng = knobs.rng(50)
    cut = CutBursts(tb.monitor)
    await tb.reset()
    for round_ in range(3):
        size = random_size(rng, tb.chunk_size, 4)
        words, *_ = top_k_stream(rng, size, tb.chunk_size, 0.1, tb.value_format, True)
        offset, _ = tb.place(words)
        tb.cmd.send_nowait({"address": offset, "words": len(words), "size": size, "sorted": 1})
        cut.cut = 0
        await tb.reset_mid_transfer(rng, after=(1, 40), drivers=[tb.cmd, tb.sink, cut], until=cut.burst_open)
        assert cut.cut, f"round {round_}: no read burst open at the reset; {knobs.describe()}"
        await idle_after_reset(tb, ["m_axi"])
        check_cleared(dut, f"round {round_}", "read_error")
        size = random_size(rng, tb.chunk_size, int(rng.integers(1, 4)))
        words, *_ = top_k_stream(rng, size, tb.chunk_size, RATIOS[round_], tb.value_format, False)
        await tb.transfer(words, size, False, {"round": round_, "after": "reset", "size": size})
        await tb.drain(size)


# ---- pytest runners ----

@pytest.mark.parametrize("testcase", ["streams_from_memory", "read_fault"])
def test_axi_decompressor(testcase):
    run_cocotb("topk_axi_decompressor", MODULE, params=AXI_PARAMS, testcase=testcase)


def test_axi_decompressor_reset():
    """Reset in the middle of transfers, with read bursts open (``reset_mid_transfer``)."""
    run_cocotb("topk_axi_decompressor", MODULE, params=AXI_PARAMS, testcase="reset_mid_transfer")
