"""Systolic arrays: resources (Yosys, xcup), cycles and MAC utilisation; prints Markdown tables.

Run ``.venv/bin/python -m testbenches.systolic.bench_systolic <part>``, part one of:

``synth``
    Resources of one PE of each kind and element, and of small whole arrays, through
    ``scripts.synth.synthesize`` (``synth_xilinx -family xcup -flatten``), plus the DPT sizes
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
``model``
    Utilisation of large GEMMs and of the ResNet-50 training GEMMs from
    :func:`golden.systolic.gemm_cycle_terms`. The cycle model equals the RTL's count on every shape
    the tests run (``testbenches/systolic/test_rtl_*.py`` assert it), so it stands in for
    simulations that would take hours.

Results are also written as JSON under ``build/bench/``, and the tables of docs/systolic.md
through :func:`scripts.docs.write_table` (rows in ``docs/data/systolic-*.json``): ``synth`` the
PE rows, ``rtl`` its GEMMs, ``sizing`` Sections 6.2 to 6.5 (only when every sweep was
measured), ``model`` the utilisation tables (the ResNet-50 ones at the default ``--batch``).
"""

import argparse
import json
import pathlib

from tabulate import tabulate

from golden.systolic import gemm_cycle_terms
from golden.systolic.networks import resnet50
from scripts.docs import DOCS, blocks_in, write_table

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "bench"
OS, WS = "output_stationary", "weight_stationary"
DOC = "systolic.md"
COMMAND = ".venv/bin/python -m testbenches.systolic.bench_systolic"

ELEMENTS = ("f32", "f16", "bf16", "int8")


def _table(headers, rows, colalign, name=None, command=None):
    """Print a table; with ``name``, also write it to docs/systolic.md (rows in docs/data/)."""
    print(tabulate(rows, headers=headers, tablefmt="github", colalign=colalign, disable_numparse=True),
          flush=True)
    if name:
        write_table(DOC, name, headers, rows, command, colalign=colalign, disable_numparse=True)


def _latencies(element):
    """(multiplier, adder) latency of the RTL PE's units, read from rtl/systolic/arithmetic.py."""
    from rtl.systolic.arithmetic import arithmetic

    unit = arithmetic(element)
    return unit.multiply_latency, unit.add_latency


def schedule(element, dataflow, slots):
    """The cycle-model keyword arguments of an RTL array (the L and A its docstring gives)."""
    multiply, add = _latencies(element)
    if dataflow == OS:
        return {"tile": slots, "mac_latency": multiply + add + 2, "acc_latency": add}
    return {"mac_latency": multiply + add}


# ---------------------------------------------------------------------------------------------
def synth(args):
    from rtl.systolic.os_array import OutputStationaryArray
    from rtl.systolic.os_pe import OutputStationaryPE
    from rtl.systolic.ws_array import WeightStationaryArray
    from rtl.systolic.ws_pe import WeightStationaryPE
    from scripts.synth import synthesize

    points = []
    for element in ELEMENTS:
        slots = _latencies(element)[1]
        points.append((f"OS PE, T={slots}", element, lambda e=element, t=slots: OutputStationaryPE(
            element=e, slots=t)))
        points.append(("WS PE", element, lambda e=element: WeightStationaryPE(element=e)))
    for element in args.array_elements:
        slots = _latencies(element)[1]
        for size in args.array_sizes:
            points.append((f"os_array {size}x{size}, T={slots}", element,
                           lambda e=element, s=size, t=slots: OutputStationaryArray(
                               rows=s, cols=s, element=e, slots=t, max_k=4096, max_tiles=4096)))
            points.append((f"ws_array {size}x{size}", element,
                           lambda e=element, s=size: WeightStationaryArray(
                               rows=s, cols=s, element=e, max_m=512, max_k=4096, max_tiles=4096)))
    rows, cells = [], []
    for name, element, build in points:
        result = synthesize(build(), "xcup")
        rows.append({"design": name, "element": element, **{k: v for k, v in result.items() if k != "cells"}})
        cells.append([name, element, *(result[k] if isinstance(result[k], int) else f"{result[k]}"
                                       for k in ("LUT", "FF", "CARRY", "DSP48E2", "BRAM")), result["mapper"]])
        print(cells[-1], flush=True)
    _write("systolic_synth.json", rows)
    headers = ["design", "element", "LUT", "FF", "CARRY", "DSP48E2", "BRAM", "mapper"]
    colalign = ("left", "left", "right", "right", "right", "right", "right", "left")
    _table(headers, cells, colalign)
    # The docs keep the PE rows; the small arrays are Section 6.2's sweeps.
    command = (f"{COMMAND} synth --array-sizes {' '.join(map(str, args.array_sizes))} "
               f"--array-elements {' '.join(args.array_elements)}")
    write_table(DOC, "systolic-pe", headers, [row for row in cells if " PE" in row[0]], command,
                colalign=colalign, disable_numparse=True)
    print("\nExtrapolated (rows x cols x PE + the edge logic measured on the largest array above):\n")
    estimates = []
    by_name = {(row["design"], row["element"]): row for row in rows}
    size = max(args.array_sizes)
    for element in args.array_elements:
        slots = _latencies(element)[1]
        for kind, pe_name, array_name in (("OS", f"OS PE, T={slots}", f"os_array {size}x{size}, T={slots}"),
                                          ("WS", "WS PE", f"ws_array {size}x{size}")):
            pe, array = by_name[(pe_name, element)], by_name[(array_name, element)]
            for r, c in ((32, 16), (64, 32)):
                estimate = {key: r * c * pe[key] + max(array[key] - size * size * pe[key], 0)
                            for key in ("LUT", "FF", "DSP48E2")}
                estimates.append([f"{kind} {r}x{c}", element, f"{estimate['LUT']:,}", f"{estimate['FF']:,}",
                                  f"{estimate['DSP48E2']:,}", f"{estimate['LUT'] / 522720:.0%}",
                                  f"{estimate['DSP48E2'] / 1968:.0%}"])
    _table(["array", "element", "LUT", "FF", "DSP48E2", "KU15P LUT (522,720)", "KU15P DSP (1,968)"],
           estimates, ("left", "left") + ("right",) * 5)


# ---------------------------------------------------------------------------------------------
# Sizing: every sweep below is ``neartrain sweep BLOCK --vary rows=.. --vary cols=.. --set ...
# --target xcup --workers 1 -o build/sweep/FOLDER`` (see sizing_command).
_WS_BUFFERS = {"max_m": 512, "max_k": 4096, "max_tiles": 4096}  # the ws_array rows of Section 6
SIZING_SWEEPS = [
    # (dataflow, element, block, varied, fixed, folder)
    *[("OS", e, "os_array", {"rows": [1, 2], "cols": [1, 2]}, {"element": e, "slots": t},
       f"systolic_os_{e}") for e, t in (("int8", 1), ("f16", 6), ("bf16", 6), ("f32", 6))],
    *[("WS", e, "ws_array", {"rows": [1, 2], "cols": [1, 2]}, {"element": e, **_WS_BUFFERS},
       f"systolic_ws_{e}") for e in ("int8", "f16", "bf16", "f32")],
    *[("OS", e, "os_array", {"rows": [4], "cols": [4]}, {"element": e, "slots": t}, f"systolic_os_{e}_4x4")
      for e, t in (("int8", 1), ("f16", 6), ("bf16", 6), ("f32", 6))],
    *[("WS", e, "ws_array", {"rows": [4], "cols": [4]}, {"element": e, **_WS_BUFFERS}, f"systolic_ws_{e}_4x4")
      for e in ("int8", "f16", "bf16", "f32")],
    *[("block FP", "k16 m8", "block_fp_array", varied, {"block": 16, "mantissa_bits": 8, "slots": 1}, folder)
      for varied, folder in (({"rows": [1, 2], "cols": [1, 2]}, "systolic_bfp"),
                             ({"rows": [4], "cols": [4]}, "systolic_bfp_4x4"),
                             ({"rows": [1], "cols": [16]}, "systolic_bfp_1x16"))],
    *[("tensor t=2", e, "tensor_array", {"rows": [1, 2], "cols": [1, 2]},
       {"element": e, "tensor": 2, "slots": t}, f"systolic_tensor_{e}")
      for e, t in (("int8", 1), ("f16", 6))],
]
SIZING_BOARDS = ("smartssd", "alveo-u250")
SIZING_RESOURCES = ("LUT", "FF", "CARRY", "DSP48E2", "BRAM")
# DPT (IEEE CAL 2021) Section 3.2: the arrays it found to fit each FPGA (test cases 1 and 2); the
# bfloat16 64 x 32 of test case 3 is the SmartSSD array beside a 128 x 128 ASIC NPU.
DPT_SIZES = {
    ("smartssd", "f16"): (32, 16), ("alveo-u250", "f16"): (48, 48),
    ("smartssd", "k16 m8"): (64, 32), ("alveo-u250", "k16 m8"): (96, 96),
    ("smartssd", "bf16"): (64, 32),
}
SWEEP_DIR = ROOT / "build" / "sweep"


def sizing_command(block, varied, fixed, folder):
    """The ``neartrain sweep`` command line that writes ``build/sweep/<folder>/sweep.csv``."""
    parts = [f"--vary {k}={','.join(map(str, v))}" for k, v in varied.items()]
    parts += [f"--set {k}={v}" for k, v in fixed.items()]
    return (f".venv/bin/neartrain sweep {block} {' '.join(parts)} --target xcup --board smartssd "
            f"--workers 1 -o build/sweep/{folder}")


def _read_sweep(folder, fixed):
    import csv

    path = SWEEP_DIR / folder / "sweep.csv"
    if not path.exists():
        return None
    points = []
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            if row["status"] != "ok":
                continue
            point = {**fixed, **{k: row[k] for k in ("mapper", "cached", "seconds")}}
            point["rows"], point["cols"] = int(row["rows"]), int(row["cols"])
            point.update({k: float(row[k]) for k in SIZING_RESOURCES})
            points.append(point)
    return points


def _features(kind, rows, cols, fixed):
    """The regressors of one array: PEs, edge (rows + cols, or block FP's group units), 1.

    Block FP also has the output de-skew, ``cols (cols - 1) / 2`` registers of 33 bits (Section
    7c), which dominates the FFs of its 1 x 16 point and would otherwise be charged to the PEs.
    """
    if kind == "block FP":
        return (rows * cols, rows * -(-cols // fixed["block"]), cols * (cols - 1) // 2, 1)
    return (rows * cols, rows + cols, 1)


def _fit(kind, points):
    """Least squares per resource over ``points``; None when they do not fix every coefficient."""
    import numpy as np

    if not points:
        return None
    x = np.array([_features(kind, p["rows"], p["cols"], p) for p in points], dtype=float)
    if len(points) < x.shape[1] or np.linalg.matrix_rank(x) < x.shape[1]:
        return None
    return {key: np.linalg.lstsq(x, np.array([p[key] for p in points]), rcond=None)[0]
            for key in SIZING_RESOURCES}


def _predict(kind, fit, rows, cols, fixed):
    features = _features(kind, rows, cols, fixed)
    return {key: max(float(sum(a * f for a, f in zip(fit[key], features, strict=True))), 0.0)
            for key in SIZING_RESOURCES}


def _largest(kind, fit, fixed, budgets, shape):
    """Largest n with the (shape[0] n) x (shape[1] n) array inside every budget; binding resource."""
    def fits(n):
        use = _predict(kind, fit, shape[0] * n, shape[1] * n, fixed)
        return all(use[k] <= budgets[k] for k in SIZING_RESOURCES)

    n = 0
    while n < 4096 and fits(n + 1):
        n += 1
    over = _predict(kind, fit, shape[0] * (n + 1), shape[1] * (n + 1), fixed)
    binding = max(SIZING_RESOURCES, key=lambda k: over[k] / budgets[k])
    return n, binding


def _share(use, budgets, key):
    return f"{use[key] / budgets[key]:.0%}"


def _sizing_groups(run):
    """Measured points per (dataflow, element), read from the sweep CSVs (run first if ``run``)."""
    from rtl.registry import get_block
    from scripts.sweep import run_sweep, write_csv

    groups = {}
    for kind, element, block, varied, fixed, folder in SIZING_SWEEPS:
        points = _read_sweep(folder, fixed)
        if points is None and run:
            result = run_sweep(get_block(block), list(varied.items()), target="xcup", fixed=fixed, workers=1)
            (SWEEP_DIR / folder).mkdir(parents=True, exist_ok=True)
            write_csv(result, SWEEP_DIR / folder / "sweep.csv")
            points = _read_sweep(folder, fixed)
        group = groups.setdefault((kind, element), {"fixed": fixed, "points": [], "missing": []})
        if points is None:
            group["missing"].append(folder)
        else:
            group["points"].extend(points)
    return groups


def _measured_table(groups):
    rows = []
    for (kind, element), group in groups.items():
        for p in sorted(group["points"], key=lambda p: (p["rows"] * p["cols"], p["rows"])):
            rows.append([kind, element, f"{p['rows']} x {p['cols']}", f"{p['LUT']:,.0f}", f"{p['FF']:,.0f}",
                         f"{p['CARRY']:,.0f}", f"{p['DSP48E2']:.0f}", f"{p['BRAM']:g}", p["mapper"]])
        if group["missing"]:
            rows.append([kind, element, f"not measured: {', '.join(group['missing'])}"] + [""] * 6)
    headers = ["array", "element", "rows x cols", "LUT", "FF", "CARRY", "DSP48E2", "BRAM", "mapper"]
    return headers, rows, ("left", "left", "left") + ("right",) * 5 + ("left",)


def _held_out(kind, points, fixed):
    """The largest measured array predicted by the fit of the others, beside its measurement."""
    largest = max(points, key=lambda p: p["rows"] * p["cols"])
    rest = [p for p in points if p is not largest]
    rest_fit = _fit(kind, rest)
    if rest_fit is None or largest["rows"] * largest["cols"] <= max(p["rows"] * p["cols"] for p in rest):
        return "-"
    guess = _predict(kind, rest_fit, largest["rows"], largest["cols"], fixed)
    return (f"{largest['rows']}x{largest['cols']}: LUT {guess['LUT']:,.0f} vs {largest['LUT']:,.0f}, "
            f"FF {guess['FF']:,.0f} vs {largest['FF']:,.0f}")


def _fits_table(groups):
    """``(headers, rows, colalign)`` of the fits, and the fits by (kind, element)."""
    rows, fits = [], {}
    for (kind, element), group in groups.items():
        points = group["points"]
        fit = _fit(kind, points)
        if fit is None:
            rows.append([kind, element, len(points), "too few points to fit"] + [""] * 5)
            continue
        fits[(kind, element)] = fit
        worst = max(abs(_predict(kind, fit, p["rows"], p["cols"], p)["LUT"] - p["LUT"]) / p["LUT"]
                    for p in points)
        triple = {key: " / ".join(f"{v:,.1f}" for v in fit[key]) for key in ("LUT", "FF", "DSP48E2")}
        rows.append([kind, element, len(points), triple["LUT"], triple["FF"], triple["DSP48E2"],
                     f"{fit['BRAM'][1]:.2f}", f"{worst:.1%}", _held_out(kind, points, group["fixed"])])
    headers = ["array", "element", "points", "LUT: per PE / edge / const", "FF: per PE / edge / const",
               "DSP: per PE / edge / const", "BRAM per edge", "worst LUT residual", "held out"]
    return (headers, rows, ("left", "left", "right", "left", "left", "left", "right", "right", "left")), fits


def _largest_table(groups, fits, boards, budgets):
    rows = []
    for (kind, element), fit in fits.items():
        fixed = groups[(kind, element)]["fixed"]
        cells = []
        for board in boards:
            budget = budgets[board.name]
            for shape in ((1, 1), (2, 1)):
                n, binding = _largest(kind, fit, fixed, budget, shape)
                r, c = shape[0] * n, shape[1] * n
                use = _predict(kind, fit, r, c, fixed)
                macs = r * c * fixed.get("tensor", 1) ** 2
                count = f"{r * c:,} PEs" + (f", {macs:,} MACs" if macs != r * c else "")
                cells.append(f"{r}x{c} = {count} ({binding}; LUT {_share(use, budget, 'LUT')}, "
                             f"DSP {_share(use, budget, 'DSP48E2')})")
        rows.append([kind, element, *cells])
    headers = ["array", "element", *(f"{b.device} {shape}" for b in boards for shape in ("square", "2:1"))]
    return headers, rows, ("left",) * len(headers)


def _dpt_table(groups, fits, budgets):
    from boards import get_board

    rows = []
    for (board_name, element), (r, c) in DPT_SIZES.items():
        board, budget = get_board(board_name), budgets[board_name]
        for (kind, fit_element), fit in fits.items():
            if fit_element != element:
                continue
            fixed = groups[(kind, element)]["fixed"]
            # A tensor PE is t x t MACs: compare the same number of MACs, (r / t) x (c / t) PEs.
            t = fixed.get("tensor", 1)
            use = _predict(kind, fit, r // t, c // t, fixed)
            fits_board = all(use[k] <= budget[k] for k in SIZING_RESOURCES)
            best = max(shape[0] * shape[1] * _largest(kind, fit, fixed, budget, shape)[0] ** 2
                       for shape in ((1, 1), (2, 1))) * t * t
            array = kind if t == 1 else f"{kind}, {r // t}x{c // t} PEs"
            rows.append([board.device, element, f"{r}x{c} = {r * c:,}", array, _share(use, budget, "LUT"),
                         _share(use, budget, "FF"), _share(use, budget, "DSP48E2"),
                         "yes" if fits_board else "no", f"{best:,}", f"{best / (r * c):.2f}x"])
    headers = ["board", "element", "DPT array", "array", "LUT", "FF", "DSP48E2", "fits", "largest", "ratio"]
    return headers, rows, ("left",) * 4 + ("right",) * 3 + ("left", "right", "right")


def sizing(args):
    from boards import get_board

    print("Measured (`neartrain sweep`, xcup, Yosys `synth_xilinx -flatten`); the commands:\n\n```")
    for _kind, _element, block, varied, fixed, folder in SIZING_SWEEPS:
        print(sizing_command(block, varied, fixed, folder))
    print("```\n")
    groups = _sizing_groups(args.run)
    # Only a complete set of sweeps is written to the docs; a missing one is reported in the tables.
    complete = not any(group["missing"] for group in groups.values())
    documented = complete and args.derate == 1.0
    command = f"{COMMAND} sizing" + (f" --derate {args.derate:g}" if args.derate != 1.0 else "")
    _table(*_measured_table(groups), name="systolic-sweep" if documented else None, command=command)
    print("\nFitted (least squares over the measured points above; `edge` is rows + cols, for block FP"
          " rows x ceil(cols / 16) group units followed by a per de-skew stage term, cols (cols - 1) / 2;"
          " `held out`: the largest array predicted from the others):\n")
    fits_table, fits = _fits_table(groups)
    _table(*fits_table, name="systolic-fits" if documented else None, command=command)

    boards = [get_board(name) for name in SIZING_BOARDS]
    # A placed design rarely routes at 100 % of a resource, and the card's shell takes a share.
    budgets = {b.name: {k: v * args.derate for k, v in b.budgets.items()} for b in boards}
    print("\nExtrapolated from the fits (estimates, not synthesised): the largest n x n and 2n x n arrays "
          "inside every budget (LUT, FF, CARRY, DSP48E2, BRAM), and the resource that runs out first:\n")
    if args.derate != 1.0:
        print(f"(every budget scaled by {args.derate:g}; the shares below are of the scaled budgets)\n")
    largest = "systolic-largest" + ("" if args.derate == 1.0 else f"-derate{args.derate:g}")
    if not complete or largest not in blocks_in((DOCS / DOC).read_text()):
        largest = None
    _table(*_largest_table(groups, fits, boards, budgets), name=largest, command=command)
    print("\nDPT Section 3.2's arrays under the same fits (extrapolated; `largest`: the bigger of our square"
          " and 2:1 arrays above, in MACs (PEs, but 4 per tensor PE), and its ratio to DPT's):\n")
    _table(*_dpt_table(groups, fits, budgets), name="systolic-dpt" if documented else None, command=command)
    if not complete:
        print(f"\nnot every sweep was measured: docs/{DOC} left unchanged")
    _write("systolic_sizing.json" if args.derate == 1.0 else f"systolic_sizing_derate{args.derate:g}.json",
           {f"{k[0]} {k[1]}": {"points": g["points"], "missing": g["missing"],
                               "fit": {r: list(map(float, v)) for r, v in fits.get(k, {}).items()}}
            for k, g in groups.items()})


# ---------------------------------------------------------------------------------------------
RTL_POINTS = [
    ({"rows": 4, "cols": 4, "element": "f16", "slots": 6, "dataflow": OS}, (384, 64, 96)),
    ({"rows": 4, "cols": 4, "element": "f16", "dataflow": WS}, (384, 64, 96)),
    ({"rows": 8, "cols": 4, "element": "int8", "slots": 1, "dataflow": OS}, (512, 128, 64)),
]

# A real ResNet-50 layer: conv2_1a, the first 1 x 1 convolution of conv2_x (64 -> 64 channels on
# 56 x 56), one sample (golden.systolic.networks.resnet50(), layer 1): forward M = 56 * 56, K = N = 64;
# weight gradient M = 64, K = 56 * 56, N = 64.
_INT8_8X4 = {"rows": 8, "cols": 4, "element": "int8", "slots": 1, "dataflow": OS}
RESNET50_POINTS = [  # (array, GEMM, pass)
    (_INT8_8X4, (3136, 64, 64), "forward"),
    (_INT8_8X4, (64, 3136, 64), "weight gradient"),
    ({"rows": 4, "cols": 4, "element": "f16", "slots": 6, "dataflow": OS}, (3136, 64, 64), "forward"),
]


def rtl(args):
    from scripts.sim.runner import run_cocotb

    OUT.mkdir(parents=True, exist_ok=True)
    results, rows = [], []
    for params, shape, *gemm_pass in RESNET50_POINTS if args.resnet50 else RTL_POINTS:
        full = {**params, "max_m": shape[0], "max_k": shape[1], "max_n": shape[2]}
        result = run_cocotb("tiled_gemm", "testbenches.systolic.cocotb_tiled_gemm", params=full,
                            testcase="large_gemm", job=tuple(shape)).reply
        results.append({"params": params, **result})
        name = f"{params['dataflow'][:1].upper()}S {params['rows']}x{params['cols']} {params['element']}" + (
            f" T={params['slots']}" if params["dataflow"] == OS else "")
        rows.append([name, *gemm_pass, f"{shape[0]} x {shape[1]} x {shape[2]}", f"{result['cycles']:,}",
                     f"{result['model']:,}", f"{result['utilisation']:.2%}"])
        print(rows[-1], flush=True)
    _write("systolic_rtl_resnet50.json" if args.resnet50 else "systolic_rtl.json", results)
    headers = ["array (`TiledGemm`)", *(["pass"] if args.resnet50 else []), "GEMM M x K x N", "RTL cycles",
               "model cycles", "MAC utilisation"]
    _table(headers, rows, ("left",) * (len(headers) - 3) + ("right",) * 3,
           name="systolic-rtl-resnet50" if args.resnet50 else "systolic-rtl",
           command=f"{COMMAND} rtl" + (" --resnet50" if args.resnet50 else ""))


# ---------------------------------------------------------------------------------------------
MODEL_ARRAYS = [
    ("OS 32x16 f16 T=6", 32, 16, "f16", OS, 6),
    ("OS 32x16 f16 T=8", 32, 16, "f16", OS, 8),
    ("WS 32x16 f16", 32, 16, "f16", WS, 1),
    ("OS 64x32 int8 T=1", 64, 32, "int8", OS, 1),
    ("WS 64x32 int8", 64, 32, "int8", WS, 1),
]
LARGE_GEMMS = [(1024, 1024, 1024), (4096, 1024, 1024), (2048, 4096, 512)]


def model(args):
    results = {"large": [], "resnet50": []}
    print("Large GEMMs (MAC utilisation from the cycle model):\n")
    rows = []
    for name, r, c, element, dataflow, slots in MODEL_ARRAYS:
        cells = []
        for shape in LARGE_GEMMS:
            terms = gemm_cycle_terms(*shape, rows=r, cols=c, dataflow=dataflow,
                                     **schedule(element, dataflow, slots))
            cells.append(terms.utilisation)
            results["large"].append({"array": name, "shape": shape, "cycles": terms.total,
                                     "utilisation": terms.utilisation})
        rows.append([name, *(f"{u:.1%}" for u in cells)])
    command = f"{COMMAND} model" + (f" --batch {args.batch}" if args.batch != 32 else "")
    _table(["array", *(f"{m} x {k} x {n}" for m, k, n in LARGE_GEMMS)], rows,
           ("left",) + ("right",) * len(LARGE_GEMMS), name="systolic-model-large", command=command)

    network = resnet50()
    for transpose in (False, True):
        how = ("each GEMM run as C or as C^T = B^T A^T, whichever takes fewer cycles" if transpose
               else "each GEMM as written")
        print(f"\nResNet-50 training GEMMs, batch {args.batch}, {how} (MACs / (PEs x cycles)):\n")
        rows = []
        for name, r, c, element, dataflow, slots in MODEL_ARRAYS:
            totals = {"forward": [0, 0], "backward": [0, 0], "weight": [0, 0]}
            for index, entry in enumerate(network.layers):
                layer = entry.layer
                passes = {"forward": layer.forward_gemm(args.batch),
                          "weight": layer.weight_grad_gemm(args.batch)}
                if index:  # the first layer computes no input gradient
                    passes["backward"] = layer.backward_data_gemm(args.batch)
                for key, (m, k, n) in passes.items():
                    options = [(m, k, n), (n, k, m)] if transpose else [(m, k, n)]
                    terms = min((gemm_cycle_terms(*shape, rows=r, cols=c, dataflow=dataflow,
                                                  **schedule(element, dataflow, slots)) for shape in options),
                                key=lambda t: t.total)
                    totals[key][0] += terms.macs
                    totals[key][1] += terms.total
            macs = sum(v[0] for v in totals.values())
            cycles = sum(v[1] for v in totals.values())
            utilisation = {key: v[0] / (r * c * v[1]) for key, v in totals.items()}
            utilisation["all"] = macs / (r * c * cycles)
            results["resnet50"].append({"array": name, "batch": args.batch, "transpose": transpose,
                                        **utilisation, "cycles": cycles})
            rows.append([name, *(f"{utilisation[key]:.1%}"
                                 for key in ("forward", "backward", "weight", "all"))])
        table = "systolic-model-resnet50" + ("-transposed" if transpose else "")
        _table(["array", "forward", "backward data", "weight gradient", "all passes"], rows,
               ("left",) + ("right",) * 4, name=table if args.batch == 32 else None, command=command)
    _write("systolic_model.json", results)


def _write(name, value):
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(json.dumps(value, indent=1, default=str))


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
    p_model = sub.add_parser("model", help="utilisation from the cycle model")
    p_model.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)
    {"synth": synth, "rtl": rtl, "sizing": sizing, "model": model}[args.part](args)


if __name__ == "__main__":
    main()
