# amaranth: UnusedElaboratable=no
"""The block floating point systolic array: cocotb on Verilator against golden.systolic, and its parameters.

The cocotb bench (``cocotb_block_fp_array``) checks every result bit against ``block_fp_gemm`` and,
without stalls, every count against ``block_fp_gemm_cycles``; with ``accumulate`` it adds a random
binary32 D (``C = A B + D``).
"""

import pytest

from golden.systolic import gemm_cycles
from golden.systolic.block_fp import block_fp_gemm_cycles
from rtl.registry import get_block
from rtl.systolic.block_fp_array import BlockFloatArray
from scripts.sim.runner import run_cocotb
from testbenches.systolic.schedule import block_fp_schedule

MODULE = "testbenches.systolic.cocotb_block_fp_array"

CASES = [
    # beat_len 2 (ceil(6 / 4)): idle beats; one group of two PEs per row.
    {"rows": 2, "cols": 2, "block": 4, "mantissa_bits": 8, "slots": 1},
    # D: two groups per row (2 + 1 PEs, the second PE of a group reads its d T + 1 cycles after the
    # first), two rows, T = 3 (d bank a memory), a 6-bit mantissa; fill_lead -3 (D after the first beat).
    {"rows": 2, "cols": 3, "block": 2, "mantissa_bits": 6, "slots": 3, "accumulate": True},
]
SLOW_CASES = [
    {"rows": 4, "cols": 4, "block": 8, "mantissa_bits": 8, "slots": 1},
    {"rows": 3, "cols": 5, "block": 2, "mantissa_bits": 12, "slots": 2},
    {"rows": 2, "cols": 3, "block": 16, "mantissa_bits": 16, "slots": 1},
    {"rows": 1, "cols": 3, "block": 2, "mantissa_bits": 6, "slots": 3},
    # D with fill_lead = 2 (> 0: a tile's D enters before its first beat), groups of 2 + 1, T = 2.
    {"rows": 5, "cols": 3, "block": 2, "mantissa_bits": 8, "slots": 2, "accumulate": True},
]


def _id(params):
    return "-".join(f"{key}={value}" for key, value in params.items())


@pytest.mark.parametrize("params", CASES + [pytest.param(p, marks=pytest.mark.slow) for p in SLOW_CASES],
                         ids=_id)
def test_block_fp_array(params):
    run_cocotb("block_fp_array", MODULE, params={**params, "max_blocks": 16, "max_tiles": 64})


@pytest.mark.parametrize("name, value, message", [
    ("block", 0, "block must be in 1..64, not 0"),
    ("block", 65, "block must be in 1..64, not 65"),
    ("mantissa_bits", 1, "mantissa_bits must be in 2..24, not 1"),
    ("mantissa_bits", 25, "mantissa_bits must be in 2..24, not 25"),
    ("slots", 0, "slots must be in 1..64, not 0"),
])
def test_bad_parameters(name, value, message):
    """A bad block or mantissa width is a Python error naming the parameter and its range."""
    with pytest.raises(ValueError, match=message):
        BlockFloatArray(**{name: value})
    with pytest.raises(ValueError, match=name):
        get_block("block_fp_array").resolve({name: value})


def test_cycle_model_pads_k_to_blocks():
    """K rounds up to whole blocks; beat_len = max(T, ceil(6 / block)) sets acc_latency."""
    array = BlockFloatArray(rows=2, cols=2, block=4, mantissa_bits=8, slots=1)
    assert (array.acc_latency, array.beat_len) == (2, 2)
    # docs/systolic.md 7c: L = 6 + 4 + 6 + max off - cols = 17 for 2 x 2, block 4, T = 1.
    assert block_fp_schedule(rows=2, cols=2, block=4) == {"tile": 1, "mac_latency": 17, "acc_latency": 2}
    schedule = dict(rows=2, cols=2, tile=1, mac_latency=17, acc_latency=2)
    assert block_fp_gemm_cycles(5, 5, 3, block=4, **schedule) == gemm_cycles(5, 8, 3, **schedule)
    assert block_fp_gemm_cycles(5, 8, 3, block=4, **schedule) == gemm_cycles(5, 8, 3, **schedule)
    assert BlockFloatArray(block=8, slots=1).beat_len == 1  # one MAC per PE per cycle from T = 1


def test_accumulate_ports_and_fill_lead():
    """``accumulate`` adds the d stream; fill_lead = (rows - 1) T - (block - 1) beat_len - 3, 0 without D."""
    plain = BlockFloatArray(rows=2, cols=3, block=2, mantissa_bits=6, slots=3)
    assert "d" not in plain.signature.members and plain.fill_lead == 0
    for (rows, block, slots), lead in [((2, 2, 3), -3), ((5, 2, 2), 2), ((2, 4, 1), -8), ((4, 8, 1), -7)]:
        array = BlockFloatArray(rows=rows, cols=3, block=block, slots=slots, accumulate=True)
        assert array.fill_lead == lead == (rows - 1) * slots - (block - 1) * array.beat_len - 3
        assert array.signature.members["d"].signature.members["payload"].shape.size == 3 * 32
    # D changes neither the latencies nor the beat length (the cycle model stays the same).
    accumulating = BlockFloatArray(rows=2, cols=3, block=2, mantissa_bits=6, slots=3, accumulate=True)
    documented = block_fp_schedule(rows=2, cols=3, block=2, slots=3)
    for array in (plain, accumulating):
        latencies = {"tile": 3, "mac_latency": array.mac_latency, "acc_latency": array.acc_latency}
        assert latencies == documented
        assert array.beat_len == max(3, documented["acc_latency"])
    with pytest.raises(ValueError, match="accumulate must be True or False"):
        BlockFloatArray(accumulate=1)


@pytest.mark.parametrize("params", CASES + SLOW_CASES + [{"rows": 3, "cols": 7, "block": 3, "slots": 4}],
                         ids=_id)
def test_latency_attributes_are_the_documented_ones(params):
    """``mac_latency`` / ``acc_latency`` equal Section 7c's formulas (``schedule.block_fp_schedule``),
    which the cocotb bench gives the cycle model instead of the block's own attributes."""
    array = BlockFloatArray(**params)
    expected = block_fp_schedule(rows=params["rows"], cols=params["cols"], block=params["block"],
                                 slots=params["slots"])
    latencies = {"tile": params["slots"], "mac_latency": array.mac_latency, "acc_latency": array.acc_latency}
    assert latencies == expected
