"""``topk_chunk_decompressor`` (:class:`rtl.compress.chunk_decompressor.ChunkDecompressor`): cocotb
tests (collected by cocotb) and their pytest runners (at the bottom).

Each transfer is a chunked wire stream (:func:`golden.compress.encode_stream`), well formed or
corrupted in one of the ways :func:`golden.compress.scatter_checked` defines, cut into beats of
random fill and sent with random valid gaps and backpressure. The dense output, the five error
counters and the sticky status bits must equal :func:`golden.compress.scatter_stream` bit for bit,
and every transfer must finish within a cycle budget (nothing hangs on bad input).
"""

import cocotb
import pytest

from golden.compress import chunk_count
from scripts.sim import knobs
from scripts.sim.devices.compress import EngineTB
from scripts.sim.runner import run_cocotb
from scripts.sim.tb import Scoreboard
from testbenches.compress.tb import (
    RATIOS,
    check_cleared,
    check_rejected,
    check_report,
    collect_reports,
    corrupted_transfers,
    engine_id,
    engine_params,
    expect_dense_stream,
    random_size,
    top_k_stream,
    wait_report,
)

MODULE = __name__
DEFAULT_TRANSFERS = 6


class DecompressorTB(EngineTB):
    def __init__(self, dut, **kwargs):
        super().__init__(dut, **kwargs)
        self.reports = []
        self.scoreboard = Scoreboard("topk_chunk_decompressor o")
        cocotb.start_soon(collect_reports(self))

    def beats(self, rng, words, oversized_counts=False):
        """Cut ``words`` into wire beats of random fill (mostly full), ``last`` on the final one.

        With ``oversized_counts`` some full beats carry a ``count`` field above ``lanes`` (read as
        ``lanes``).
        """
        count_limit = 1 << self.lanes.bit_length()  # the field's range, as the layout sizes it
        beats, position = [], 0
        while position < len(words) or not beats:
            fill = self.lanes if rng.random() < 0.7 else int(rng.integers(0, self.lanes + 1))
            chunk = [int(word) for word in words[position:position + fill]]
            position += len(chunk)
            count = len(chunk)
            if oversized_counts and count == self.lanes and rng.random() < 0.3:
                count = int(rng.integers(self.lanes, count_limit))
            beats.append({"words": chunk + [0] * (self.lanes - len(chunk)), "count": count, "last": 0})
        beats[-1]["last"] = 1
        return beats

    def expect(self, words, size, promised_sorted, label):
        """Queue the golden dense beats of one transfer; return the golden errors."""
        return expect_dense_stream(self.scoreboard, words, size, promised_sorted, label,
                                   value_format=self.value_format, chunk_size=self.chunk_size,
                                   out_lanes=self.out_lanes)

    async def transfer(self, rng, words, size, promised_sorted, label):
        """Send one transfer, wait for its done pulse, and check the counters and status."""
        expected = self.expect(words, size, promised_sorted, label)
        self.dut.size.value = size
        self.dut.sorted.value = int(promised_sorted)
        reports = len(self.reports)
        self.source.send_many(self.beats(rng, words, oversized_counts=label.get("kind") is not None))
        budget = 8 * (len(words) + chunk_count(size, self.chunk_size) + 50) + 4 * size // self.out_lanes
        await wait_report(self, reports, budget)
        check_report(self.reports[reports], expected, label)

    async def drain(self, size_total):
        await self.expect_from(self.sink, self.scoreboard, cycles=4 * size_total // self.out_lanes + 2000,
                               settle=50)
        assert not self.dut.busy.value, "busy stays high after the last transfer"


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def ratios_bit_exact(dut, idle, backpressure):
    """Well-formed Top-K streams at 0.1%, 1% and 10% density, sorted and unsorted chunks."""
    tb, rng = await DecompressorTB.started(dut, idle, backpressure, salt=0)
    total = 0
    for n in range(knobs.vectors(DEFAULT_TRANSFERS, limit=60)):
        ratio = RATIOS[n % len(RATIOS)]
        # Large enough for a few pairs even at 0.1%.
        chunks = -(-max(4 * tb.chunk_size, int(3 / ratio)) // tb.chunk_size) + int(rng.integers(0, 2))
        size = random_size(rng, tb.chunk_size, chunks)
        promised_sorted = bool(n % 2)
        words, *_ = top_k_stream(rng, size, tb.chunk_size, ratio, tb.value_format, promised_sorted)
        await tb.transfer(rng, words, size, promised_sorted,
                          {"transfer": n, "ratio": ratio, "size": size, "sorted": promised_sorted})
        total += size
    await tb.drain(total)


@cocotb.test()
@cocotb.parametrize(idle=[False, True], backpressure=[False, True])
async def bad_input_bit_exact(dut, idle, backpressure):
    """Every malformation: dropped pairs, counters and status bits as golden; never hangs."""
    tb, rng = await DecompressorTB.started(dut, idle, backpressure, salt=10)
    total = 0
    rounds = max(1, knobs.vectors(DEFAULT_TRANSFERS, limit=60) // 2)
    for n, kind, size, words, promised_sorted in corrupted_transfers(rng, tb.chunk_size, tb.value_format,
                                                                      rounds):
        await tb.transfer(rng, words, size, promised_sorted,
                          {"transfer": n, "kind": kind, "size": size, "sorted": promised_sorted})
        total += size
    await tb.drain(total)


@cocotb.test()
async def reset_mid_transfer(dut):
    """Reset in the middle of a transfer, under stalls; the next transfer equals golden, alone.

    Each round sends a multi-chunk Top-K transfer with random valid gaps and backpressure and
    raises reset at a random cycle at which wire beats have been taken and the transfer has not
    ended (its sums sit in the chunk buffers, its counters are running). Right after the reset
    the counters and status bits must read 0; then a new transfer must give exactly the golden
    dense chunks, counters and status bits (nothing of the cut transfer, no extra beat, one
    ``done``), within a cycle bound, and ``busy`` must fall.
    """
    tb = DecompressorTB(dut, idle=True, backpressure=True, salt=7)
    rng = knobs.rng(70)
    await tb.reset()
    for round_ in range(3):
        size = random_size(rng, tb.chunk_size, 8)
        words, *_ = top_k_stream(rng, size, tb.chunk_size, 0.5, tb.value_format, False)
        dut.size.value = size
        dut.sorted.value = 0
        beats = tb.beats(rng, words)
        sent, reports = tb.source.sent, len(tb.reports)
        tb.source.send_many(beats)

        def transfer_open(sent=sent, reports=reports):
            return tb.source.sent > sent and len(tb.reports) == reports

        # From its first beat the transfer stays open for at least one cycle per beat.
        await tb.wait_until(transfer_open, cycles=8 * len(beats) + tb.chunk_size,
                            what="the transfer's first beat")
        await tb.reset_mid_transfer(rng, after=(1, len(beats) // 2), drivers=[tb.source, tb.sink],
                                    until=transfer_open)
        check_cleared(dut, f"round {round_}")
        reports = len(tb.reports)
        size = random_size(rng, tb.chunk_size, int(rng.integers(1, 4)))
        promised_sorted = bool(round_ % 2)
        words, *_ = top_k_stream(rng, size, tb.chunk_size, 0.1, tb.value_format, promised_sorted)
        await tb.transfer(rng, words, size, promised_sorted, {"round": round_, "after": "reset",
                                                               "size": size})
        await tb.drain(size)
        assert len(tb.reports) == reports + 1, f"round {round_}: {len(tb.reports) - reports} done pulses"


# ---- pytest runners ----


@pytest.mark.parametrize("params", [
    engine_params(4, 4, 32, 4, "f16"),
    pytest.param(engine_params(1, 2, 16, 2, bank_writes=1), marks=pytest.mark.slow),
    pytest.param(engine_params(8, 16, 128, 16), marks=pytest.mark.slow),
    pytest.param(engine_params(16, 32, 256, 16, "f16"), marks=pytest.mark.slow),
], ids=engine_id)
def test_chunk_decompressor(params):
    run_cocotb("topk_chunk_decompressor", MODULE, params=params)


@pytest.mark.filterwarnings("ignore::amaranth.hdl._ir.UnusedElaboratable")
def test_parameters_are_validated():
    from rtl.compress.chunk_decompressor import ChunkDecompressor

    check_rejected(ChunkDecompressor, [
        ({"value_format": "bf16"}, "value_format"),
    ])
