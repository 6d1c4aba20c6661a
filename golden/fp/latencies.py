"""The documented latency of every FP unit configuration the tests build, stated here, not read from ``rtl/``.

A latency is the number of cycles from an accepted operation to its result (``docs/fp.md``,
"Area, latency, issue rate, Fmax"). The cocotb and ``amaranth.sim`` tests measure it and compare
the measurement with this table; ``testbenches/test_design_constants.py`` holds each unit's
declared ``latency`` attribute equal to it. A unit that gains or loses a register therefore fails
both until this table (and the docs) say so.

Keys are ``"<op>-<format>-<mode>[-<variant>]"`` for arithmetic, comparisons, division and square
root, and ``"<source>-<target>-<mode>"`` for conversions; ``<mode>`` is ``ieee`` or ``flush``
(flush-to-zero), ``<variant>`` names non-default constructor arguments (``dsp_tile24``,
``lut_bits7``). Division and square root are at ``bits_per_stage=1``: one quotient or root bit
per stage (wider stages shorten the pipeline; the tests derive that from these figures).
"""

__all__ = ["LATENCY"]


def _both(ieee, flush):
    return {"ieee": ieee, "flush": flush}


def _table(op, per_format):
    return {f"{op}-{fmt}-{mode}": cycles
            for fmt, modes in per_format.items() for mode, cycles in modes.items()}


_NAMED_AND_SMALL = ("f32", "f16", "bf16", "e4m3", "e5m2")

LATENCY = {
    # Adder (add, sub): six stages whatever the format and mode.
    **_table("add", dict.fromkeys(_NAMED_AND_SMALL, _both(6, 6))),
    **_table("sub", dict.fromkeys(("f32", "f16", "bf16"), _both(6, 6))),
    # Multiplier: two stages fewer when flushing (no subnormal normalisation), one more for the
    # f32 significand product over 18-bit DSP tiles.
    **_table("mul", {"f32": _both(7, 5), "f16": _both(6, 4), "bf16": _both(6, 4),
                     "e4m3": _both(6, 4), "e5m2": _both(6, 4)}),
    "mul-f32-ieee-dsp_tile24": 6,
    "mul-f32-ieee-dsp_tile24-lut_bits7": 7,
    "mul-f32-ieee-dsp_tile24-lut_bits24": 6,
    "mul-f16-flush-lut_bits3": 5,
    # Fused multiply-add: one stage fewer when flushing, three more where the f32 alignment
    # shifts are split.
    **_table("fma", {"f32": _both(11, 10), "f16": _both(8, 7), "bf16": _both(8, 7),
                     "e4m3": _both(8, 7), "e5m2": _both(8, 7)}),
    "fma-f32-ieee-dsp_tile24": 11,
    "fma-f32-ieee-dsp_tile24-lut_bits7": 11,
    "fma-f32-ieee-dsp_tile24-lut_bits24": 11,
    "fma-f16-flush-lut_bits3": 7,
    # Comparisons and minimumNumber/maximumNumber: one registered stage.
    **{key: cycles for op in ("min", "max", "eq", "lt", "le")
       for key, cycles in _table(op, dict.fromkeys(("f32", "f16", "bf16"), _both(1, 1))).items()},
    "lt_quiet-f32-ieee": 1,
    "le_quiet-f32-ieee": 1,
    # Float to float: 1, plus 2 to normalise source subnormals that are normal in the target,
    # plus the steps that put results tiny in the target on its subnormal grid.
    **{f"{source}-{target}-{mode}": cycles for (source, target), modes in {
        ("f32", "f16"): _both(3, 2), ("f32", "bf16"): _both(1, 1), ("f16", "f32"): _both(3, 1),
        ("f16", "bf16"): _both(3, 1), ("bf16", "f32"): _both(1, 1), ("bf16", "f16"): _both(3, 2),
    }.items() for mode, cycles in modes.items()},
    # Float to integer: three stages; integer to float: three, four for signed sources.
    **{f"{fmt}-{integer}-{mode}": 3 for fmt in ("f32", "f16", "bf16") for integer in ("i32", "u32")
       for mode in ("ieee", "flush")},
    **{f"{integer}-{fmt}-{mode}": {"i32": 4, "u32": 3}[integer] for fmt in ("f32", "f16", "bf16")
       for integer in ("i32", "u32") for mode in ("ieee", "flush")},
    # Division and square root, one bit per stage: one stage fewer when flushing.
    **_table("div", {"f32": _both(30, 29), "f16": _both(17, 16), "bf16": _both(14, 13)}),
    **_table("sqrt", {"f32": _both(29, 28), "f16": _both(16, 15), "bf16": _both(13, 12)}),
}
