"""cocotb tests of :class:`rtl.bus.AXIBurstWriter` against cocotbext-axi's RAM model, and their runner.

Random command sequences (4 KB-unaligned addresses, 1..1000 beats) with random data are
written with random pauses on every AXI channel, command and data gaps. Afterwards the
whole RAM must equal its initial image with the commands applied in order (commands may
overlap; the later one wins). Every AW burst is checked by :class:`BurstMonitor`, the
model itself asserts ``wlast`` on the last beat of each burst. Error injection makes a
range answer SLVERR or DECERR and checks the sticky error, that all data is consumed and
done pulses (no hang), that exactly the bursts issued reached memory (the issued ones
with their real data, except the beats the model refused) and that no AW was issued
after the error beyond the one already registered. Reset (shared with the RAM) and
``cancel`` (the RAM running on) cut random transfers with a burst open; the next commands
must write right.

The pytest runner (at the bottom) runs every test at the parameters of
:data:`testbenches.bus.tb.DMA_CONFIGS`; the testbench pieces shared with the other
engine are in :mod:`testbenches.bus.tb`.
"""


import cocotb
import pytest

from golden.bus import random_words
from scripts.sim import knobs
from scripts.sim.devices.bus import WriterTB, writer_throughput
from scripts.sim.runner import params_from_env, run_cocotb

from .tb import (
    DMA_CONFIGS,
    RAM_SIZE,
    RESET_ROUNDS,
    beat_addresses,
    dma_config_id,
    dma_tests,
    random_run,
)


async def run_writes(dut, *, stall, faulty=False, salt=0):
    """Random commands and data, the RAM checked afterwards; with ``faulty``, all data consumed, the
    issued bursts written (but the refused beats), and no AW after the error beyond the one registered."""
    rng = knobs.rng(20 + salt)
    commands, faults = random_run(rng, faulty=faulty)
    tb = WriterTB(dut, faults=faults, stall=stall)
    await tb.reset()
    beat_bytes = tb.beat_bytes

    offsets = beat_addresses(commands, beat_bytes)
    words = random_words(rng, len(offsets), tb.params["data_width"])
    tb.send_commands(commands)
    tb.source.send_many(words)
    await tb.finish(tb.cmd, tb.source, beats=len(words))
    tb.check_bus()

    # The issued bursts, in order, cover a prefix of the beats; their addresses must match.
    issued = [address % RAM_SIZE + beat * beat_bytes
              for _, address, beats in tb.monitor.bursts for beat in range(beats)]
    assert issued == offsets[:len(issued)], f"burst addresses do not follow the commands; {knobs.describe()}"
    assert len(tb.w_beats) == len(issued), (
        f"{len(tb.w_beats)} W beats for {len(issued)} issued; {knobs.describe()}")
    first_fault = next((i for i, offset in enumerate(offsets)
                        if tb.ram.fault_at(offset, beat_bytes) is not None), None)
    if first_fault is None:
        assert len(issued) == len(offsets), f"only {len(issued)} of {len(offsets)} beats written"
        tb.check_error(None)
    else:
        assert first_fault < len(issued), f"the failing beat {first_fault} was never issued"
        tb.check_error(tb.ram.fault_at(offsets[first_fault], beat_bytes))
        late = tb.bursts_after_first_error()
        assert len(late) <= 1, f"AW bursts after the error: {late}; {knobs.describe()}"
    tb.check_memory(tb.expected_image(offsets, words, len(issued)))
    dut._log.info("writes: %d commands, %d beats, %d issued in %d bursts, peak %d in flight, %d cycles",
                  len(commands), len(words), len(issued), len(tb.monitor.bursts), tb.monitor.peak_outstanding,
                  tb.cycle)


@cocotb.test()
async def throughput_without_stalls(dut):
    """W beats per cycle with producer and memory never stalling.

    The session :func:`scripts.sim.devices.bus.writer_throughput` that ``bench_axi`` runs, on the default
    NEARTRAIN_VECTORS beats (4096 by default): every beat checked as in the stalled tests.
    """
    await writer_throughput(dut, {"beats": knobs.vectors(4096)})


def written_image(image, offsets, words, count, beat_bytes):
    """``image`` with the first ``count`` of ``words`` written at their ``offsets``, in order."""
    image = bytearray(image)
    for offset, word in zip(offsets[:count], words[:count], strict=True):
        image[offset:offset + beat_bytes] = word.to_bytes(beat_bytes, "little")
    return image


def beats_that_landed(before, after, offsets, words, handshakes, beat_bytes):
    """How many leading beats of ``words`` a write cut by reset left in memory, or None if no prefix fits.

    ``before`` and ``after`` are RAM images. Outside the first ``handshakes`` beats' offsets
    nothing may change; inside, ``after`` must hold ``before`` with the first ``k`` beats
    written, for some ``k <= handshakes`` (a beat handed over on W just before the reset may
    never reach memory: the memory is reset too). Returns the largest such ``k``.
    """
    touched = sorted(set(offsets[:handshakes]))
    outside = bytearray(before)
    for offset in touched:
        outside[offset:offset + beat_bytes] = after[offset:offset + beat_bytes]
    if outside != after:
        return None
    for count in range(handshakes, -1, -1):
        last = {}
        for offset, word in zip(offsets[:count], words[:count], strict=True):
            last[offset] = word.to_bytes(beat_bytes, "little")
        if all(after[offset:offset + beat_bytes] == last.get(offset, before[offset:offset + beat_bytes])
               for offset in touched):
            return count
    return None



async def cut_then_clean(dut, *, cancel):
    """Rounds of: commands and data under stalls, a cut (reset or ``cancel``) with a burst open, clean ones.

    What the cut transfer wrote must be a prefix of its beats, with their data, and nothing
    else may change. After a reset the memory may have dropped the last beats handed over
    on W (it is reset too); after a cancel it keeps running, so exactly the beats sent with
    their strobes on are written, and the beats the drain owes the open bursts follow with
    their strobes off. Then the bus must be idle (no valid high, no burst open, ``busy``
    low): at once after a reset, within a cycle bound after a cancel. New random commands
    must change the RAM by exactly their data (no beat from before the cut lands
    afterwards) and end with ``done``, within a cycle bound.
    """
    rng = knobs.rng(71 if cancel else 70)
    params = params_from_env()
    beat_bytes = params["data_width"] // 8
    full = (1 << beat_bytes) - 1
    tb = WriterTB(dut, stall=0.3)
    dut.cancel.value = 0
    await tb.reset()
    what = "cancel" if cancel else "reset"

    def batch():
        commands = tb.cut_batch(rng)
        return commands, random_words(rng, sum(length for _, length in commands), params["data_width"])

    for _ in range(RESET_ROUNDS):
        before, before_words = batch()
        image = tb.ram.read(0, RAM_SIZE)
        bursts, w_beats = len(tb.monitor.bursts), len(tb.w_beats)
        tb.send_commands(before)
        tb.source.send_many(before_words)
        await tb.cut(rng, bursts=bursts, cancel=cancel, drivers=[tb.cmd, tb.source])
        strobes = tb.w_strobes[w_beats:]
        sent = strobes.count(full)
        assert sent < len(before_words), (
            f"{what} after the transfer: all {sent} beats written; {knobs.describe()}")
        assert strobes == [full] * sent + [0] * (len(strobes) - sent), (
            f"W strobes after the {what} are not whole beats then empty ones: {strobes}; {knobs.describe()}")
        if not cancel:
            assert len(strobes) == sent, f"{len(strobes) - sent} empty W beats without a cancel"
        tb.check_idle()
        after = tb.ram.read(0, RAM_SIZE)
        landed = beats_that_landed(image, after, beat_addresses(before, beat_bytes), before_words, sent,
                                   beat_bytes)
        assert landed is not None and (landed == sent or not cancel), (
            f"the write cut by {what} left memory that is not the first {sent} beats written "
            f"({landed} fit); {knobs.describe()}")
        commands, words = batch()
        expected = written_image(after, beat_addresses(commands, beat_bytes), words, len(words), beat_bytes)
        tb.send_commands(commands)
        tb.source.send_many(words)
        await tb.finish(tb.cmd, tb.source, beats=len(words))
        assert not tb.monitor.violations, f"{tb.monitor.violations[:5]}; {knobs.describe()}"
        tb.check_idle()
        tb.check_error(None)
        tb.check_memory(expected)


# The engines' common tests: writes_at_full_rate, writes_under_stalls, writes_with_error,
# reset_mid_transfer and cancel_mid_transfer.
globals().update(dma_tests("writes", run_writes, cut_then_clean))


# ---------------------------------------------------------------- pytest runner

MODULE = __name__


@pytest.mark.parametrize("params", DMA_CONFIGS, ids=dma_config_id)
def test_axi_burst_writer(params):
    run_cocotb("axi_burst_writer", MODULE, params=params)
