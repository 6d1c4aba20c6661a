"""The ``sizing`` part of :mod:`testbenches.systolic.bench_systolic`: sweeps, fits, the largest arrays."""

from scripts.flow.docs import DOCS, blocks_in
from testbenches.systolic.bench_systolic_common import COMMAND, DOC, ROOT, print_table, write_json
from testbenches.systolic.sizing_fit import SIZING_RESOURCES, fit_costs, largest_array, predict_use

__all__ = ["sizing", "sizing_command", "SIZING_SWEEPS", "SIZING_BOARDS", "SIZING_RESOURCES", "DPT_SIZES"]

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
                             ({"rows": [1], "cols": [16]}, "systolic_bfp_1x16"),
                             ({"rows": [16], "cols": [16]}, "systolic_bfp_16x16"))],
    *[("tensor t=2", e, "tensor_array", {"rows": [1, 2], "cols": [1, 2]},
       {"element": e, "tensor": 2, "slots": t}, f"systolic_tensor_{e}")
      for e, t in (("int8", 1), ("f16", 6))],
]
SIZING_BOARDS = ("smartssd", "alveo-u250")
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


def _share(use, budgets, key):
    return f"{use[key] / budgets[key]:.0%}"


def _sizing_groups(run):
    """Measured points per (dataflow, element), read from the sweep CSVs (run first if ``run``)."""
    from rtl.registry import get_block
    from scripts.flow.sweep import run_sweep, write_csv

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
    rest_fit = fit_costs(kind, rest)
    if rest_fit is None or largest["rows"] * largest["cols"] <= max(p["rows"] * p["cols"] for p in rest):
        return "-"
    guess = predict_use(kind, rest_fit, largest["rows"], largest["cols"], fixed)
    return (f"{largest['rows']}x{largest['cols']}: LUT {guess['LUT']:,.0f} vs {largest['LUT']:,.0f}, "
            f"FF {guess['FF']:,.0f} vs {largest['FF']:,.0f}")


def _fits_table(groups):
    """``(headers, rows, colalign)`` of the fits, and the fits by (kind, element)."""
    rows, fits = [], {}
    for (kind, element), group in groups.items():
        points = group["points"]
        fit = fit_costs(kind, points)
        if fit is None:
            rows.append([kind, element, len(points), "too few points to fit"] + [""] * 5)
            continue
        fits[(kind, element)] = fit
        worst = max(abs(predict_use(kind, fit, p["rows"], p["cols"], p)["LUT"] - p["LUT"]) / p["LUT"]
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
                n, binding = largest_array(kind, fit, fixed, budget, shape)
                r, c = shape[0] * n, shape[1] * n
                use = predict_use(kind, fit, r, c, fixed)
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
            use = predict_use(kind, fit, r // t, c // t, fixed)
            fits_board = all(use[k] <= budget[k] for k in SIZING_RESOURCES)
            best = max(shape[0] * shape[1] * largest_array(kind, fit, fixed, budget, shape)[0] ** 2
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
    print_table(*_measured_table(groups), name="systolic-sweep" if documented else None, command=command)
    print("\nFitted (least squares over the measured points above; `edge` is rows + cols, for block FP"
          " rows x ceil(cols / 16) group units followed by a per de-skew stage term, cols (cols - 1) / 2;"
          " `held out`: the largest array predicted from the others):\n")
    fits_table, fits = _fits_table(groups)
    print_table(*fits_table, name="systolic-fits" if documented else None, command=command)

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
    print_table(*_largest_table(groups, fits, boards, budgets), name=largest, command=command)
    print("\nDPT Section 3.2's arrays under the same fits (extrapolated; `largest`: the bigger of our square"
          " and 2:1 arrays above, in MACs (PEs, but 4 per tensor PE), and its ratio to DPT's):\n")
    print_table(*_dpt_table(groups, fits, budgets), name="systolic-dpt" if documented else None,
                command=command)
    if not complete:
        print(f"\nnot every sweep was measured: docs/{DOC} left unchanged")
    output = "systolic_sizing.json" if args.derate == 1.0 else f"systolic_sizing_derate{args.derate:g}.json"
    write_json(output,
               {f"{k[0]} {k[1]}": {"points": g["points"], "missing": g["missing"],
                                   "fit": {r: list(map(float, v)) for r, v in fits.get(k, {}).items()}}
                for k, g in groups.items()})
