"""Area, latency, issue rate and Fmax of every FP unit; writes ``docs/fp.md``.

Run: ``.venv/bin/python -m scripts.bench_fp [--no-fmax] [--no-issue-rate]``.

* Resources: ``scripts.synth`` (Yosys ``synth_xilinx -family xcup -flatten`` and
  ``synth_ecp5``), every registered ``fp`` unit in f32, f16 and bf16.
* Latency: the unit's declared ``latency`` (cycles), which the cocotb tests check.
* Issue rate: cocotb on Verilator feeds 1024 back-to-back operations and counts the
  cycles between the first and the last result (``one_operation_per_cycle``).
* Fmax: a real ECP5 place and route through ``neartrain bitstream`` when that flow is
  available (``scripts.bitstream``); otherwise the column says so.
"""

import argparse
import concurrent.futures
import json
import logging
import os
import pathlib
import tempfile

from rtl.registry import blocks
from scripts.synth import RESOURCE_COLUMNS, synthesize

ROOT = pathlib.Path(__file__).resolve().parent.parent
FORMATS = ("f32", "f16", "bf16")

PUBLISHED = """## Published figures for comparison

| unit | source | device, tool | LUT | DSP | latency | Fmax |
|---|---|---|---:|---:|---:|---:|
| FP32 add | Berkeley HardFloat release 1 (combinational) | xcup, Yosys 0.70 | 823 (+64 CARRY4) | 0 | 1 | — |
| FP32 mul | Berkeley HardFloat release 1 | xcup, Yosys 0.70 | 643 | 2 | 1 | — |
| FP32 add | Berkeley HardFloat release 1 | ECP5-85, Yosys + nextpnr | 1252 LUT4 | 0 | 1 | 24.6 MHz |
| FP32 mul | Berkeley HardFloat release 1 | ECP5-85, Yosys + nextpnr | 1307 LUT4 | 4 MULT18 | 1 | 25.5 MHz |
| FP32 mul | FloPoCo | Kintex-7, Vivado | 398 | 1 | 2 | 300 MHz |
| FP32 add | FloPoCo | Kintex-7, Vivado | 419 | 0 | 10 | ~340 MHz |

HardFloat figures are from `shared/targets.md` (same open flow as ours); FloPoCo figures
are the published Kintex-7/Vivado numbers quoted there, not comparable tool for tool.
"""


def unit_points():
    """Every (block name, parameter overrides) to report: each fp unit in each format it takes."""
    points = []
    for name, block in blocks().items():
        if block.family != "fp":
            continue
        names = {p.name for p in block.params}
        if "fmt" in names:
            points += [(name, {"fmt": fmt}) for fmt in FORMATS]
        else:
            points.append((name, {}))
    return points


def _synthesize_point(point):
    from rtl.registry import get_block

    name, overrides = point
    component = get_block(name).build(overrides)
    result = {"latency": getattr(component, "latency", None)}
    for target in ("xcup", "ecp5"):
        try:
            result[target] = synthesize(component, target)
        except Exception as error:  # a failed point is reported in the table, the others go on
            result[target] = {"error": str(error).splitlines()[0]}
    return result


def _issue_rate(name, overrides):
    from testbenches.harness import run_cocotb

    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run_cocotb(name, "testbenches.fp.cocotb_fp_unit", params=overrides,
                   testcase="one_operation_per_cycle", extra_env={"NEARTRAIN_BENCH_OUT": out.name})
        return json.loads(pathlib.Path(out.name).read_text())["operations_per_cycle"]


def _fmax(point):
    """ECP5 Fmax (MHz) of one unit inside the evaluation top on the reference ECP5 board."""
    from boards import reference_board
    from rtl.registry import get_block
    from scripts.bitstream import measure_bitstream

    name, overrides = point
    try:
        summary = measure_bitstream(get_block(name).build(overrides), board=reference_board("ecp5"))
    except Exception as error:  # noqa: BLE001 - one failed build is reported, the others go on
        return f"failed: {str(error).splitlines()[0]}"
    return min(clock["achieved"] for clock in summary["fmax"].values())


def _cells(resources, target):
    if "error" in resources:
        return ["failed"] * len(RESOURCE_COLUMNS[target])
    return [f"{resources[c]:g}" if isinstance(resources[c], float) else str(resources[c])
            for c in RESOURCE_COLUMNS[target]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-fmax", action="store_true", help="skip ECP5 place and route")
    parser.add_argument("--no-issue-rate", action="store_true", help="skip the cocotb issue-rate runs")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)

    points = unit_points()
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(_synthesize_point, points))
        fmaxes = [None] * len(points) if args.no_fmax else list(pool.map(_fmax, points))

    header = (["unit", "params", "latency", "ops/cycle"] + [f"xcup {c}" for c in RESOURCE_COLUMNS["xcup"]]
              + [f"ecp5 {c}" for c in RESOURCE_COLUMNS["ecp5"]] + ["ECP5 Fmax (MHz)"])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (name, overrides), result, fmax in zip(points, results, fmaxes, strict=True):
        rate = "—" if args.no_issue_rate else f"{_issue_rate(name, overrides):.3f}"
        fmax_text = "not measured" if fmax is None else fmax if isinstance(fmax, str) else f"{fmax:.1f}"
        params = ", ".join(f"{k}={v}" for k, v in overrides.items()) or "default"
        row = ([name, params, str(result["latency"]), rate] + _cells(result["xcup"], "xcup")
               + _cells(result["ecp5"], "ecp5") + [fmax_text])
        lines.append("| " + " | ".join(row) + " |")
        print(lines[-1], flush=True)

    command = "`.venv/bin/python -m scripts.bench_fp" + (" --no-fmax" if args.no_fmax else "") + (
        " --no-issue-rate" if args.no_issue_rate else "") + "`"
    doc = ROOT / "docs" / "fp.md"
    doc.write_text(
        "# Floating-point units\n\n"
        "Every unit is IEEE 754 binary32/binary16/bfloat16, round to nearest even, full subnormal "
        "support (or `flush_subnormals=True`), canonical NaN, SoftFloat's five flags, and accepts "
        "one operation per cycle. The tests compare bits and flags with `golden.fp`, which is "
        "itself checked against Berkeley SoftFloat (`softfloatpy`).\n\n"
        "## Area, latency, issue rate, Fmax\n\n"
        f"Command: {command}. Resources from Yosys (`synth_xilinx -family xcup -flatten`, "
        "`synth_ecp5`); the xcup LUT column counts LUT-built memories and shift registers too. "
        "ops/cycle is measured in cocotb on Verilator over 1024 back-to-back operations.\n\n"
        + "\n".join(lines) + "\n\n" + PUBLISHED)
    print(f"wrote {doc}")


if __name__ == "__main__":
    main()
