"""Systolic arrays: resources (Yosys, xcup), cycles and MAC utilisation; prints Markdown tables.

Run ``.venv/bin/python -m testbenches.systolic.bench_systolic <part>``, part one of:

``synth``
    Resources of one PE of each kind and element, and of small whole arrays, through
    ``scripts.flow.synth.synthesize`` (``synth_xilinx -family xcup -flatten``), plus the DPT sizes
    extrapolated as ``rows x cols`` PEs and the measured edge logic of a 4 x 4 array (a rough
    one-point estimate; ``sizing`` fits several array sizes per type and both boards instead).
``rtl``
    Large GEMMs through :class:`rtl.systolic.tiled_gemm.TiledGemm` in cocotb on Verilator: measured
    compute cycles next to the cycle model, and MAC utilisation (slow: minutes per GEMM); with
    ``--resnet50``, a ResNet-50 layer's GEMMs instead (conv2_1a forward and weight gradient, one sample).
``sizing``
    Measured ``neartrain sweep`` rows of small arrays of each element type and dataflow (the
    CSVs under ``build/sweep/systolic_*``, listed in :data:`SIZING_SWEEPS`), per-resource fits
    ``y = a PEs + b (rows + cols) + c`` (block FP: ``y = a PEs + b groups + c``), and from them the
    largest square and 2:1 arrays within the SmartSSD (KU15P) and Alveo U250 budgets, beside DPT
    Section 3.2's sizes. With ``--run``, missing sweeps are run first (one worker; cached points
    are read back from ``build/synth``).
``blockfp``
    Resources of the block floating point designs (converters, arrays with and without D, a PE
    and a core, the weight-stationary array), one table per name given
    (:mod:`testbenches.systolic.bench_systolic_blockfp`).
``model``
    Utilisation of large GEMMs and of the ResNet-50 training GEMMs from
    :func:`golden.systolic.gemm_cycle_terms`. The cycle model equals the RTL's count on every shape
    the tests run (``testbenches/systolic/test_*.py`` assert it), so it stands in for
    simulations that would take hours.

Results are also written as JSON under ``build/bench/``, and the tables of docs/systolic.md
through :func:`scripts.flow.docs.write_table` (rows in ``docs/data/systolic-*.json``): ``synth`` the
PE rows, ``rtl`` its GEMMs, ``sizing`` Sections 6.2 to 6.5 (only when every sweep was
measured), ``blockfp`` the ``systolic-block-fp-*`` tables, ``model`` the utilisation
tables (the ResNet-50 ones at the default ``--batch``).
"""

import argparse

from testbenches.systolic.bench_systolic_blockfp import BLOCKFP_TABLES, blockfp
from testbenches.systolic.bench_systolic_model import model
from testbenches.systolic.bench_systolic_rtl import rtl, synth
from testbenches.systolic.bench_systolic_sizing import sizing


def _share_of_budget(text):
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"--derate must be in (0, 1], not {text}")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="part", required=True)
    p_synth = sub.add_parser("synth", help="resources on xcup")
    p_synth.add_argument("--array-sizes", type=int, nargs="+", default=[2, 4])
    p_synth.add_argument("--array-elements", nargs="+", default=["f16"])
    p_rtl = sub.add_parser("rtl", help="large GEMMs in cocotb on Verilator (slow)")
    p_rtl.add_argument("--resnet50", action="store_true",
                       help="run the ResNet-50 layer GEMMs of RESNET50_POINTS instead (slower)")
    p_sizing = sub.add_parser("sizing", help="sweep rows, fits and largest arrays per board")
    p_sizing.add_argument("--run", action="store_true", help="run the sweeps whose CSV is missing (slow)")
    p_sizing.add_argument("--derate", type=_share_of_budget, default=1.0,
                          help="share of each budget the array may use (default 1: the whole device)")
    p_blockfp = sub.add_parser("blockfp", help="resources of the block floating point designs")
    p_blockfp.add_argument("tables", nargs="+", choices=sorted(BLOCKFP_TABLES))
    p_model = sub.add_parser("model", help="utilisation from the cycle model")
    p_model.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)
    {"synth": synth, "rtl": rtl, "sizing": sizing, "blockfp": blockfp, "model": model}[args.part](args)


if __name__ == "__main__":
    main()
