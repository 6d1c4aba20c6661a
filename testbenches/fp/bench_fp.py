"""Area, latency, issue rate and Fmax of every FP unit; writes the table in ``docs/fp.md``.

Run: ``.venv/bin/python -m testbenches.fp.bench_fp [--no-fmax] [--no-issue-rate]``.

* Resources: ``scripts.flow.synth`` (Yosys ``synth_xilinx -family xcup -flatten`` and
  ``synth_ecp5``), every registered ``fp`` unit in f32, f16 and bf16.
* Latency: the unit's declared ``latency`` (cycles), which the cocotb tests check.
* Issue rate: cocotb on Verilator feeds 1024 back-to-back operations and counts the
  cycles between the first and the last result (session ``fp.issue_rate``).
* Fmax: a real ECP5 place and route through ``neartrain bitstream`` when that flow is
  available (``scripts.flow.bitstream``); otherwise the column says so.

The rows go to ``docs/data/fp-units.json`` and the ``fp-units`` table of ``docs/fp.md``
(:func:`scripts.flow.docs.write_table`).
"""

import argparse
import concurrent.futures
import logging
import os

from boards.targets import RESOURCE_COLUMNS
from rtl.registry import blocks
from scripts.flow.docs import write_table
from scripts.flow.synth import synthesize

FORMATS = ("f32", "f16", "bf16")

# Beyond one row per unit and format: every conversion pair, and the multiplier's DSP
# tiling on xcup's 27x18 DSP48E2 (the default 18 suits ECP5's 18x18 MULT18X18D).
EXTRA_POINTS = [("fp_convert", {"source": s, "target": t}) for s in FORMATS for t in FORMATS if s != t] + [
    ("fp_mul", {"fmt": "f32", "dsp_tile": 24}), ("fp_fma", {"fmt": "f32", "dsp_tile": 24})]


def unit_points():
    """Every (block name, parameter overrides) to report: each fp unit in each format it takes."""
    points = []
    for name, block in blocks().items():
        if block.family != "fp" or name == "fp_convert":  # every pair is in EXTRA_POINTS
            continue
        names = {p.name for p in block.params}
        if "fmt" in names:
            points += [(name, {"fmt": fmt}) for fmt in FORMATS]
        else:
            points.append((name, {}))
    return points + EXTRA_POINTS


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
    from scripts.sim.devices.fp import measure_issue_rate

    return measure_issue_rate(name, overrides)["operations_per_cycle"]


def _fmax(point):
    """ECP5 Fmax (MHz) of one unit inside the evaluation top on the reference ECP5 board."""
    from boards import reference_board
    from rtl.registry import get_block
    from scripts.flow.bitstream import measure_bitstream

    name, overrides = point
    try:
        summary = measure_bitstream(get_block(name).build(overrides), board=reference_board("ecp5"))
    except Exception as error:  # noqa: BLE001 - one failed build is reported, the others go on
        return f"failed: {str(error).splitlines()[0]}"
    return min(clock["achieved"] for clock in summary["fmax"].values())


def _cells(resources, target):
    if "error" in resources:
        return ["failed"] * len(RESOURCE_COLUMNS[target])
    return [f"{resources[c]:g}" if isinstance(resources[c], float) else resources[c]
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

    headers = (["unit", "params", "latency", "ops/cycle"] + [f"xcup {c}" for c in RESOURCE_COLUMNS["xcup"]]
               + [f"ecp5 {c}" for c in RESOURCE_COLUMNS["ecp5"]] + ["ECP5 Fmax (MHz)"])
    rows = []
    for (name, overrides), result, fmax in zip(points, results, fmaxes, strict=True):
        rate = "—" if args.no_issue_rate else f"{_issue_rate(name, overrides):.3f}"
        fmax_text = "not measured" if fmax is None else fmax if isinstance(fmax, str) else f"{fmax:.1f}"
        params = ", ".join(f"{k}={v}" for k, v in overrides.items()) or "default"
        rows.append([name, params, result["latency"], rate, *_cells(result["xcup"], "xcup"),
                     *_cells(result["ecp5"], "ecp5"), fmax_text])
        print(rows[-1], flush=True)

    command = ".venv/bin/python -m testbenches.fp.bench_fp" + (" --no-fmax" if args.no_fmax else "") + (
        " --no-issue-rate" if args.no_issue_rate else "")
    write_table("fp.md", "fp-units", headers, rows, command,
                colalign=("left", "left") + ("right",) * (len(headers) - 2), disable_numparse=True)
    print("wrote docs/fp.md (fp-units)")


if __name__ == "__main__":
    main()
