# amaranth: UnusedElaboratable=no
# (Kernels built only to check their parameters are never elaborated.)
"""``amaranth.sim`` tests of the kernels' beat/lane converters, and their lane-count checks.

:class:`rtl.optim.counted_gearbox.CountedGearbox` (neither width divides the other) and
:class:`rtl.optim.counted_width_converter.CountedWidthConverter` (one divides the other,
including ratios that are not powers of two, as 6 lanes against 2-word beats need).

Each configuration (words per input and output transfer, word width) runs several tensors
back to back in one simulation, each started with ``start``, with lengths of 0, 1 and
random lengths that are multiples of neither side. Four stall patterns: none, random idle
cycles between inputs (valid held until the transfer), random backpressure on the output,
and both. Checked: the words out equal the words in, in order; exactly ``ceil(n / p)``
inputs are taken and ``ceil(n / q)`` outputs sent; no input is taken past the tensor's
end (gearbox; the divisible converter's contract leaves that to the source); without
stalls the run takes at most ``max(ceil(n / p), ceil(n / q)) + 2`` cycles (full rate).
``NEARTRAIN_SEED`` seeds the data and the stalls; ``NEARTRAIN_VECTORS`` (default 6) is the
number of random lengths per run.
"""

import zlib

import pytest
from amaranth.hdl import ResetInserter, Signal
from amaranth.sim import Simulator

from rtl.optim.counted_gearbox import CountedGearbox
from rtl.optim.counted_width_converter import CountedWidthConverter
from rtl.optim.updater_kernel import AdagradUpdater, SGDUpdater
from scripts.sim import knobs

# (words per input transfer, words per output transfer, word width): beats to lanes and back.
CONFIGS = [(2, 3, 32), (3, 2, 32), (4, 6, 16), (6, 4, 16), (16, 3, 32), (3, 16, 32), (4, 5, 32), (5, 4, 32),
           (32, 7, 16), (7, 32, 16), (1, 3, 32), (3, 3, 8)]
# Divisible ratios for CountedWidthConverter, among them 1:3 and 3:1.
DIVISIBLE = [(2, 6, 32), (6, 2, 32), (2, 8, 16), (8, 2, 16), (4, 1, 32), (1, 3, 32)]
STALLS = {"none": (0.0, 0.0), "idle": (0.4, 0.0), "backpressure": (0.0, 0.4), "both": (0.3, 0.5)}


def _converter(p, q, word, gearbox):
    if gearbox:
        return CountedGearbox(input_width=p * word, output_width=q * word, word_width=word)
    return CountedWidthConverter(input_width=p * word, output_width=q * word)


async def _transfer(ctx, dut, p, q, word, n, idle_rate, stall_rate, rng, gearbox, cut_at=None):
    """Start a run of ``n`` random words and move it through ``dut``.

    Returns (words, words received, outputs, inputs taken, cycles).

    With ``cut_at``, stop (valid still raised, for a reset to cut) at the first cycle from
    ``cut_at`` on at which an input has been taken and an output is still due; the run must
    not have ended by then.
    """
    mask = (1 << word) - 1
    words = [int(v) for v in rng.integers(0, 1 << word, n, dtype="uint64")]
    # Inputs carry junk past the tensor's end: the gearbox must drop it.
    padded = words + [int(v) for v in rng.integers(0, 1 << word, p, dtype="uint64")]
    beats = [sum(padded[b * p + j] << (j * word) for j in range(p)) for b in range(-(-n // p))]
    # The divisible converter counts transfers of its narrow side, the gearbox words.
    ctx.set(dut.count, n if gearbox else -(-n // min(p, q)))
    ctx.set(dut.start, 1)
    await ctx.tick()
    ctx.set(dut.start, 0)
    got, taken, outputs = [], 0, 0
    valid, cycles = False, 0
    limit = 20 * (n + p + q) + 50
    while outputs < -(-n // q) or taken < len(beats):
        assert cycles < limit, f"stuck: n={n}, {taken} inputs taken, {outputs} outputs"
        if cut_at is not None and cycles >= cut_at and taken:
            return words, got, outputs, taken, cycles
        if not valid and taken < len(beats) and rng.random() >= idle_rate:
            valid = True
        ctx.set(dut.i.valid, valid)
        ctx.set(dut.i.payload, beats[taken] if valid else 0)
        ready = rng.random() >= stall_rate
        ctx.set(dut.o.ready, ready)
        if ready and ctx.get(dut.o.valid):
            value = ctx.get(dut.o.payload)
            got += [(value >> (j * word)) & mask for j in range(q)]
            outputs += 1
        if valid and ctx.get(dut.i.ready):
            taken += 1
            valid = False
        await ctx.tick()
        cycles += 1
    assert cut_at is None, f"n={n}: the run ended after {cycles} cycles, before the reset at cycle {cut_at}"
    ctx.set(dut.i.valid, 0)
    return words, got, outputs, taken, cycles


def _run(p, q, word, lengths, idle_rate, stall_rate, rng, gearbox=True):
    dut = _converter(p, q, word, gearbox)
    results = []

    async def bench(ctx):
        for n in lengths:
            words, got, outputs, taken, cycles = await _transfer(ctx, dut, p, q, word, n, idle_rate,
                                                                 stall_rate, rng, gearbox)
            extra_ready = 0
            # Nothing more leaves, and (gearbox) a further beat of junk is not taken; the
            # divisible converter relies on its source sending no more than the run's beats.
            ctx.set(dut.i.valid, gearbox)
            ctx.set(dut.o.ready, 1)
            for _ in range(3):
                extra_ready += ctx.get(dut.i.ready)
                assert not ctx.get(dut.o.valid), f"an output after the last one, n={n}"
                await ctx.tick()
            ctx.set(dut.i.valid, 0)
            results.append((n, words, got, outputs, taken, cycles, extra_ready))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return results


def _check(p, q, word, stall, gearbox):
    rng = knobs.rng(zlib.crc32(f"{p} {q} {word} {stall} {gearbox}".encode()))
    count = knobs.vectors(6, limit=60)  # tensors, in Amaranth's Python simulator
    # The divisible converter's count is at least 1 (its contract); the gearbox also takes 0.
    lengths = ([0] if gearbox else []) + [1] + [int(rng.integers(2, 6 * (p + q))) for _ in range(count)]
    lengths = [n + 1 if n > 1 and (n % p == 0 or n % q == 0) else n for n in lengths]
    idle_rate, stall_rate = STALLS[stall]
    kind = "gearbox" if gearbox else "divisible converter"
    where = f"{kind} p={p} q={q} word={word} stall={stall}; {knobs.describe(6)}"
    for n, words, got, outputs, taken, cycles, extra in _run(p, q, word, lengths, idle_rate, stall_rate, rng,
                                                             gearbox):
        assert taken == -(-n // p), f"n={n}: {taken} inputs taken; {where}"
        assert outputs == -(-n // q), f"n={n}: {outputs} outputs; {where}"
        wrong = [i for i in range(n) if i >= len(got) or got[i] != words[i]]
        assert not wrong, f"n={n}: {len(wrong)} words differ, the first at {wrong[:1]}; {where}"
        assert extra == 0 or not gearbox, f"n={n}: input taken past the tensor's end; {where}"
        if stall == "none":
            bound = max(-(-n // p), -(-n // q)) + 2
            assert cycles <= bound, f"n={n}: {cycles} cycles, not full rate; {where}"


def _check_reset(p, q, word, gearbox):
    """Runs cut by a reset at a random cycle under stalls, each followed by a clean run.

    Each round starts a run of random length, moves it with random idle cycles and
    backpressure, and raises reset (1 to 4 cycles) at a random cycle at which inputs have
    been taken and outputs are still due. After it, without ``start``, nothing may leave
    (and the gearbox takes nothing); then a clean run must deliver exactly its own words,
    in order, with the right transfer counts, within the cycle bound of ``_transfer``, and
    nothing after its last output.
    """
    rng = knobs.rng(zlib.crc32(f"reset {p} {q} {word} {gearbox}".encode()))
    rst = Signal()
    dut = _converter(p, q, word, gearbox)
    idle_rate, stall_rate = STALLS["both"]
    kind = "gearbox" if gearbox else "divisible converter"
    where = f"{kind} p={p} q={q} word={word}; {knobs.describe(6)}"
    clean = []

    async def bench(ctx):
        for _ in range(knobs.vectors(6, limit=60)):  # tensors, in Amaranth's Python simulator
            n = int(rng.integers(4 * (p + q), 10 * (p + q)))
            # The full-rate run takes max(ceil(n / p), ceil(n / q)) cycles; the stalled one longer.
            cut_at = int(rng.integers(1, max(-(-n // p), -(-n // q)) // 2 + 1))
            _, _, outputs, _, cycles = await _transfer(ctx, dut, p, q, word, n, idle_rate, stall_rate, rng,
                                                       gearbox, cut_at=cut_at)
            assert outputs < -(-n // q), f"n={n}: every output left before the reset; {where}"
            ctx.set(rst, 1)
            ctx.set(dut.i.valid, 0)
            for _ in range(int(rng.integers(1, 5))):
                await ctx.tick()
            ctx.set(rst, 0)
            # Before the next start: no output, and the gearbox takes no input (the divisible
            # converter's source sends none before a start, its contract).
            ctx.set(dut.i.valid, gearbox)
            ctx.set(dut.o.ready, 1)
            for _ in range(3):
                assert not ctx.get(dut.o.valid), f"an output after the reset, before a start; {where}"
                assert not (gearbox and ctx.get(dut.i.ready)), f"input taken after the reset; {where}"
                await ctx.tick()
            ctx.set(dut.i.valid, 0)
            n = int(rng.integers(1, 6 * (p + q)))
            clean.append((n, *await _transfer(ctx, dut, p, q, word, n, idle_rate, stall_rate, rng, gearbox)))
            ctx.set(dut.o.ready, 1)
            for _ in range(3):
                assert not ctx.get(dut.o.valid), f"n={n}: an output after the last one; {where}"
                await ctx.tick()

    sim = Simulator(ResetInserter(rst)(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for n, words, got, outputs, taken, _ in clean:
        assert taken == -(-n // p) and outputs == -(-n // q), \
            f"n={n} after a reset: {taken} inputs taken, {outputs} outputs; {where}"
        wrong = [i for i in range(n) if got[i] != words[i]]
        assert not wrong, f"n={n} after a reset: {len(wrong)} words differ, the first at {wrong[:1]}; {where}"


@pytest.mark.parametrize("stall", list(STALLS))
@pytest.mark.parametrize("p,q,word", CONFIGS, ids=lambda v: str(v))
def test_gearbox(p, q, word, stall):
    _check(p, q, word, stall, gearbox=True)


@pytest.mark.parametrize("p,q,word", CONFIGS, ids=lambda v: str(v))
def test_gearbox_reset_mid_transfer(p, q, word):
    _check_reset(p, q, word, gearbox=True)


@pytest.mark.parametrize("p,q,word", DIVISIBLE, ids=lambda v: str(v))
def test_divisible_converter_reset_mid_transfer(p, q, word):
    _check_reset(p, q, word, gearbox=False)


@pytest.mark.parametrize("stall", list(STALLS))
@pytest.mark.parametrize("p,q,word", DIVISIBLE, ids=lambda v: str(v))
def test_divisible_converter(p, q, word, stall):
    _check(p, q, word, stall, gearbox=False)


@pytest.mark.parametrize("kwargs,message", [
    ({"input_width": 48, "output_width": 96, "word_width": 32}, "input_width must be a multiple of word_"),
    ({"input_width": 64, "output_width": 80, "word_width": 32}, "output_width must be a multiple of word_"),
    ({"input_width": 64, "output_width": 96, "word_width": 0}, "word_width must be in 1..64"),
])
def test_gearbox_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CountedGearbox(**kwargs)


@pytest.mark.parametrize("lanes", [1, 3, 5, 7, 12, 31, 32])
def test_kernel_takes_any_lane_count(lanes):
    chunk = 2 * lanes * 64 // 16
    kernel = SGDUpdater(lanes=lanes, data_width=64, chunk_elements=chunk)
    assert kernel.parameters["lanes"] == lanes


@pytest.mark.parametrize("kwargs,message", [
    ({"lanes": 0}, r"lanes must be in 1\.\.32, not 0"),
    ({"lanes": 33}, r"lanes must be in 1\.\.32, not 33"),
    ({"lanes": 3, "data_width": 64, "chunk_elements": 16}, "chunk_elements must be a multiple of 12"),
    ({"lanes": 6, "data_width": 128, "chunk_elements": 36}, "chunk_elements must be a multiple of 24"),
])
def test_kernel_lane_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AdagradUpdater(**kwargs)
