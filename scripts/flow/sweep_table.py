"""The Adam updater's lane sweep as the ``optim-sweep`` table of docs/optim.md, beside Smart-Infinity.

``make sweep`` (with its default block, lanes and options) runs ``neartrain sweep``, which
writes ``build/sweep/adam_updater/sweep.csv`` and one plot per resource, and then this
module, which turns that CSV into the table. Each lane count's elements per cycle is the
whole-run figure the throughput bench measured on the same kernel shape (one shared 512-bit
port, no stalls; ``docs/data/optim-throughput.json``): the product options change the
mapping of the multipliers, not the kernel's latency or its cycles.

Smart-Infinity's row is its Table III (``boards.references.SMART_INFINITY``) and 30,720
cycles per 65,536 elements on the same single 512-bit bundle (docs/optim.md, *Throughput*).

It also draws ``docs/optim_sweep.png`` from the table's rows: elements per cycle against LUTs,
one point per lane count, and Smart-Infinity's kernel.

Usage: ``python -m scripts.flow.sweep_table CSV COMMAND`` (``COMMAND``: what produced the CSV, as
typed, named beside the table); ``python -m scripts.flow.sweep_table --plot`` redraws the plot
from ``docs/data/optim-sweep.json`` alone.
"""

import csv
import json
import sys

from boards.references import SMART_INFINITY

from .docs import DATA, write_table

__all__ = ["SMART_INFINITY_ELEMENTS_PER_CYCLE", "PLOT", "sweep_rows", "write_sweep_table", "plot_sweep",
           "main"]

# Smart-Infinity's HLS Adam kernel: 65,536 elements in 30,720 cycles on one 512-bit bundle.
SMART_INFINITY_ELEMENTS_PER_CYCLE = 65536 / 30720
TABLE, DOC = "optim-sweep", "optim.md"
PLOT = "optim_sweep.png"
HEADERS = ["design", "LUT", "FF", "CARRY", "DSP48E2", "BRAM (36 Kb)", "URAM", "mapper", "elements/cycle",
           "elements/cycle per kLUT", "elements/cycle per DSP"]


def _measured_rates():
    """``{lanes: whole-run elements per cycle}`` on one shared port without stalls."""
    spec = json.loads((DATA / "optim-throughput.json").read_text())
    column = {name: index for index, name in enumerate(spec["headers"])}
    return {int(row[column["lanes"]]): float(row[column["elements/cycle"]]) for row in spec["rows"]
            if row[column["ports"]] == "shared" and float(row[column["stall"]]) == 0}


def _efficiency(rate, luts, dsps):
    return [f"{rate:.2f}", f"{1000 * rate / luts:.4f}", f"{rate / dsps:.4f}" if dsps else "-"]


def sweep_rows(points, label):
    """Table rows from the CSV's points (dicts of its columns); failed points say so.

    ``label(point)`` names the design of a point.
    """
    rates = _measured_rates()
    rows = []
    for point in points:
        if point["status"] != "ok":
            rows.append([label(point)] + ["-"] * (len(HEADERS) - 2) + [f"failed: {point['reason']}"])
            continue
        luts, dsps = int(point["LUT"]), int(point["DSP48E2"])
        rate = rates.get(int(point["lanes"]))
        tail = _efficiency(rate, luts, dsps) if rate is not None else ["not measured"] + ["-"] * 2
        counts = [f"{int(point[name]):,}" for name in ("LUT", "FF", "CARRY", "DSP48E2")]
        rows.append([label(point), *counts, point["BRAM"], point["URAM"], point["mapper"], *tail])
    lut = round(SMART_INFINITY["LUT"][0] * SMART_INFINITY["LUT"][1])
    dsp = round(SMART_INFINITY["DSP48E2"][0] * SMART_INFINITY["DSP48E2"][1])
    bram = round(SMART_INFINITY["BRAM"][0] * SMART_INFINITY["BRAM"][1])
    uram = round(SMART_INFINITY["URAM"][0] * SMART_INFINITY["URAM"][1])
    rows.append(["Smart-Infinity HLS Adam (Table III, Vivado)", f"about {lut:,}", "-", "-", f"about {dsp}",
                 f"about {bram}", str(uram), "-", *_efficiency(SMART_INFINITY_ELEMENTS_PER_CYCLE, lut, dsp)])
    return rows


def write_sweep_table(csv_path, command):
    """Read the sweep's CSV and write the ``optim-sweep`` table; returns its rows."""
    with open(csv_path, newline="") as handle:
        points = list(csv.DictReader(handle))
    if not points or "lanes" not in points[0]:
        raise ValueError(f"{csv_path} is not a sweep over lanes")
    rows = sweep_rows(points, lambda point: f"adam_updater lanes={point['lanes']}")
    write_table(DOC, TABLE, HEADERS, rows, command, disable_numparse=True,
                colalign=("left",) + ("right",) * 6 + ("left",) + ("right",) * 3)
    plot_sweep()
    return rows


def _number(cell):
    """A table cell as a float (``"about 175,705"`` -> 175705.0), or None for ``"-"`` and failures."""
    try:
        return float(cell.removeprefix("about ").replace(",", ""))
    except ValueError:
        return None


def plot_sweep():
    """Draw ``docs/optim_sweep.png`` from the stored table's rows; returns the points drawn.

    Returns ``{design: (kLUT, elements per cycle)}``; rows whose synthesis failed are left out.
    """
    from .figures import docs_plot

    spec = json.loads((DATA / f"{TABLE}.json").read_text())
    column = {name: index for index, name in enumerate(spec["headers"])}
    points = {}
    for row in spec["rows"]:
        luts, rate = _number(row[column["LUT"]]), _number(row[column["elements/cycle"]])
        if luts is not None and rate is not None:
            points[row[column["design"]]] = (luts / 1000, rate)
    ours = {name: point for name, point in points.items() if name.startswith("adam_updater")}
    with docs_plot(PLOT, xlabel="LUT (thousands, xcup)", ylabel="elements per cycle (one 512-bit port)",
                   title="Adam updater lane sweep against Smart-Infinity", from_zero=True) as axis:
        axis.plot([x for x, _ in ours.values()], [y for _, y in ours.values()], marker="o",
                  label="adam_updater, dsp_tile=24 lut_bits=7")
        for name, (x, y) in ours.items():
            axis.annotate(name.removeprefix("adam_updater "), (x, y), textcoords="offset points",
                          xytext=(4, -12), fontsize=8)
        for name, (x, y) in points.items():
            if name not in ours:
                axis.plot([x], [y], marker="s", linestyle="none", label=name)
        axis.set_xlim(0, 1.15 * max(x for x, _ in points.values()))  # room for the last label
    return points


def main(argv=None):
    """``python -m scripts.flow.sweep_table CSV COMMAND``: write the table, print one line (``--plot``:
    redraw the plot from the stored table)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--plot"]:
        plot_sweep()
        return 0
    if len(argv) != 2:
        print("usage: python -m scripts.flow.sweep_table CSV COMMAND | --plot", file=sys.stderr)
        return 2
    try:
        rows = write_sweep_table(argv[0], argv[1])
    except (OSError, ValueError, KeyError) as error:
        print(f"sweep_table: {error}", file=sys.stderr)
        return 2
    print(f"wrote {len(rows)} rows to docs/{DOC} (table {TABLE}, docs/data/{TABLE}.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
