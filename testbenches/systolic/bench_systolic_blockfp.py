"""The ``blockfp`` part of :mod:`testbenches.systolic.bench_systolic`: Yosys resources of block FP designs.

Each table of docs/systolic.md Sections 6.1, 7c and 7d is one design list, synthesised for xcup
through :func:`scripts.flow.synth.synthesize` (``synth_xilinx -family xcup -flatten``, cached in
``build/synth`` by the Verilog's hash) and written by :func:`scripts.flow.docs.write_table`:

``converters``
    ``block_fp_encoder`` and ``block_fp_decoder`` at their defaults (k = 8, m = 8).
``accumulate``
    ``block_fp_array`` without and with D (``accumulate``), at three sizes, and what D costs.
``parts``
    One ``BlockFloatPE`` and a 1 x 1 ``BlockFloatCore`` (block 16, m 8, T 1); the whole arrays are
    the ``block FP`` rows of the sizing sweep (Section 6.2).
``ws``
    ``block_fp_ws_array`` at three sizes, and the LUT solve ``a R C + b R C / block + e`` through them.

Each synthesis of a list takes under a minute to a few minutes of one core.
"""

import numpy as np

from testbenches.systolic.bench_systolic_common import COMMAND, print_table

__all__ = ["blockfp", "BLOCKFP_TABLES"]

_RESOURCES = ("LUT", "FF", "CARRY", "DSP48E2", "BRAM")
_WS_BUFFERS = {"max_m": 512, "max_k": 4096, "max_tiles": 4096}  # the ws_array buffers of Section 6
_ACCUMULATE_SIZES = ((2, 2, 8), (2, 2, 16), (4, 4, 16))  # rows, cols, block (block 8: the defaults)
_WS_SIZES = ((2, 2, 2), (4, 4, 4), (16, 1, 16))


def _converters():
    from rtl.systolic.block_fp_decoder import BlockFloatDecoder
    from rtl.systolic.block_fp_encoder import BlockFloatEncoder

    return [("`block_fp_encoder` k=8, m=8", BlockFloatEncoder(block=8, mantissa_bits=8)),
            ("`block_fp_decoder` k=8, m=8", BlockFloatDecoder(block=8, mantissa_bits=8))]


def _accumulate():
    from rtl.systolic.block_fp_array import BlockFloatArray

    return [(f"`block_fp_array` {rows} x {cols}, block {block}", accumulate,
             BlockFloatArray(rows=rows, cols=cols, block=block, mantissa_bits=8, slots=1,
                             accumulate=accumulate))
            for rows, cols, block in _ACCUMULATE_SIZES for accumulate in (False, True)]


def _parts():
    from rtl.systolic.block_fp_core import BlockFloatCore
    from rtl.systolic.block_fp_pe import BlockFloatPE

    return [("`BlockFloatPE` alone", BlockFloatPE(block=16, mantissa_bits=8, slots=1, beat_len=1, index=0,
                                                  index_width=4)),
            ("`BlockFloatCore` 1 x 1 (one PE, one group's converter + f32 adder + ring, counters)",
             BlockFloatCore(rows=1, cols=1, block=16, mantissa_bits=8, slots=1))]


def _ws():
    from rtl.systolic.block_fp_ws_array import BlockFloatWeightStationaryArray

    return [((rows, cols, block), f"`block_fp_ws_array` {rows} x {cols}, block {block}",
             BlockFloatWeightStationaryArray(rows=rows, cols=cols, block=block, mantissa_bits=8,
                                             **_WS_BUFFERS))
            for rows, cols, block in _WS_SIZES]


def _measure(component):
    """The resource counts of one design (Yosys, xcup), printed as they come."""
    from scripts.flow.synth import synthesize

    result = synthesize(component, "xcup")
    print({key: result[key] for key in (*_RESOURCES, "mapper")}, flush=True)
    return result


def _counts(result):
    return [f"{result[key]:,}" if isinstance(result[key], int) else f"{result[key]:g}" for key in _RESOURCES]


_HEADERS = ["design", *_RESOURCES, "mapper"]
_ALIGN = ("left",) + ("right",) * len(_RESOURCES) + ("left",)


def _write_plain(name, designs):
    rows = [[label, *_counts(result := _measure(component)), result["mapper"]]
            for label, component in designs]
    print_table(_HEADERS, rows, _ALIGN, f"systolic-block-fp-{name}", f"{COMMAND} blockfp {name}")


def _write_accumulate():
    rows, without = [], None
    for label, accumulate, component in _accumulate():
        result = _measure(component)
        if accumulate:
            cost = f"+{result['LUT'] - without['LUT']:,} LUT, +{result['FF'] - without['FF']:,} FF"
        else:
            without, cost = result, ""
        rows.append([label, str(accumulate).lower(), *_counts(result), result["mapper"], cost])
    headers = ["design", "accumulate", *_RESOURCES, "mapper", "D costs"]
    print_table(headers, rows, ("left", "left") + _ALIGN[1:] + ("left",), "systolic-block-fp-accumulate",
                f"{COMMAND} blockfp accumulate")


def _write_ws():
    rows, equations, luts = [], [], []
    for (rows_, cols, block), label, component in _ws():
        result = _measure(component)
        rows.append([label, *_counts(result), result["mapper"]])
        equations.append([rows_ * cols, rows_ * cols / block, 1])
        luts.append(result["LUT"])
    print_table(_HEADERS, rows, _ALIGN, "systolic-block-fp-ws", f"{COMMAND} blockfp ws")
    # Three points, three unknowns: an exact solve, not a check of the model.
    a, b, e = np.linalg.solve(np.array(equations, dtype=float), np.array(luts, dtype=float))
    fit = [[f"{a:.0f}", f"{b:.0f}", f"{e:.0f}", f"{a + b / 16:.0f}"]]
    headers = ["a: LUT per PE", "b: LUT per converter + f32 adder", "e: fixed LUT", "LUT per PE at block 16"]
    print_table(headers, fit, ("right",) * 4, "systolic-block-fp-ws-fit", f"{COMMAND} blockfp ws")


BLOCKFP_TABLES = {
    "converters": lambda: _write_plain("converters", _converters()),
    "accumulate": _write_accumulate,
    "parts": lambda: _write_plain("parts", _parts()),
    "ws": _write_ws,
}


def blockfp(args):
    """Synthesise the designs of each table named in ``args.tables`` and write the table."""
    for name in args.tables:
        BLOCKFP_TABLES[name]()
