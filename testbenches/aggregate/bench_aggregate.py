"""The aggregation pipeline's measurements for docs/aggregate.md, one sub-command per table group.

``fill``
    Packet fill and total cycles of our spawner against the seed's block-20 / mod-P rule on the
    five synthetic graphs (and Reddit from its degrees only), from the golden spawner and the
    cycle model; the lanes sweep of the fill; the fill plot ``docs/aggregate_fill.png``.
``rtl``
    Whole graphs through the Verilated pipeline (Boolean, one feature: the cycle count does not
    depend on either): packets, cycles from the first to the last packet transfer, the stall
    counter, checked bit for bit and against the cycle model. P = 4 on every graph and the seed
    rule's packets; P = 1, 2, 8 on the three smaller graphs.
``area``
    Yosys resources on xcup and ECP5 (``scripts.flow.synth``) for P = 4, F = 16 and the lanes sweep,
    and an ECP5 bitstream's Fmax (``scripts.flow.bitstream``).
``registers``
    The register map of ``aggregation_kernel``.
``time``
    Per-graph aggregation time from the measured cycles at the ECP5 Fmax and at a stated xcup
    clock, against ``scipy.sparse`` on this machine's CPU (F = 16, float32).

Each writes its tables with :func:`scripts.flow.docs.write_table` and keeps its raw figures in
``build/bench/aggregate_<part>.json`` (``time`` reads ``rtl``'s and ``area``'s).
"""

import argparse
import json
import pathlib
import time

import numpy as np
import scipy.sparse as sp

from golden.aggregate import (
    BENCHMARK_GRAPHS,
    GRAPHS,
    cycle_estimate,
    degree_sequence,
    generate,
    issue_cycles,
    seed_rule,
    spawn,
    with_self_loops,
)
from scripts.flow.docs import DOCS, write_table

DOC = "aggregate.md"
COMMAND = ".venv/bin/python -m testbenches.aggregate.bench_aggregate"
BENCH = pathlib.Path(__file__).resolve().parents[2] / "build" / "bench"
SEED = 1
LANES = (1, 2, 4, 8)
# The seed's Table 4.2 "NN Function Kernels" row (all kernels together, Alveo U280 at 294 MHz).
TABLE_4_2 = {"LUT": 834876, "FF": 1182054, "DSP48E2": 2724, "BRAM18K": 2754, "MHz": 294}
XCUP_CLOCK_MHZ = 300  # a stated UltraScale+ clock: the seed's kernel ran at 294 MHz on the U280


def _save(part, data):
    BENCH.mkdir(parents=True, exist_ok=True)
    (BENCH / f"aggregate_{part}.json").write_text(json.dumps(data, indent=1) + "\n")


def _load(part):
    path = BENCH / f"aggregate_{part}.json"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `{COMMAND} {part}` first")
    return json.loads(path.read_text())


def _graph(name):
    return with_self_loops(generate(name, seed=SEED))


# --------------------------------------------------------------------------------------- fill
def fill(args):
    rows, sweep, plot = [], [], {}
    for name in BENCHMARK_GRAPHS:
        adjacency = _graph(name)
        degrees = np.diff(adjacency.indptr)
        ours, seed = spawn(adjacency, lanes=4), seed_rule(adjacency, lanes=4)
        seed_cycles = int(issue_cycles(seed.packets)[-1] + 1)
        bound = adjacency.nnz / 4
        rows.append([name, adjacency.shape[0], (adjacency.nnz - adjacency.shape[0]) // 2, adjacency.nnz,
                     int(degrees.max()), round(bound), len(ours.packets), f"{ours.packets.fill():.4f}",
                     ours.steps, f"{ours.steps / bound:.4f}", len(seed.packets), f"{seed.packets.fill():.4f}",
                     seed_cycles, f"{seed_cycles / bound:.3f}"])
        plot[name] = {}
        cells = [name]
        for lanes in LANES:
            mine, theirs = spawn(adjacency, lanes=lanes), seed_rule(adjacency, lanes=lanes)
            theirs_cycles = int(issue_cycles(theirs.packets)[-1] + 1)
            plot[name][lanes] = (mine.packets.fill(), theirs.packets.fill())
            cells.append(f"{mine.packets.fill():.4f} / {theirs.packets.fill():.3f}")
            bound = adjacency.nnz / lanes
            cells.append(f"{mine.steps / bound:.4f} / {theirs_cycles / bound:.3f}")
        sweep.append(cells)
    reddit = GRAPHS["reddit"]
    degrees = degree_sequence("reddit", seed=SEED) + 1  # + the self-loop
    estimate = cycle_estimate(degrees, 4)
    rows.append(["reddit (degrees only)", reddit.nodes, reddit.edges, int(degrees.sum()), int(degrees.max()),
                 round(degrees.sum() / 4), "", "", estimate, f"{estimate / (degrees.sum() / 4):.4f}"]
                + [""] * 4)
    headers = ["graph", "nodes", "edges", "nnz (A + I)", "max degree", "nnz / 4", "packets", "fill", "cycles",
               "cycles / bound", "seed packets", "seed fill", "seed cycles (window 9)", "seed / bound"]
    write_table(DOC, "aggregate-fill", headers, rows, f"{COMMAND} fill", disable_numparse=True)
    headers = ["graph"] + [f"{label} P = {lanes}" for lanes in LANES
                           for label in ("fill", "cycles / (nnz/P)")]
    write_table(DOC, "aggregate-lanes-fill", headers, sweep, f"{COMMAND} fill", disable_numparse=True)
    _save("fill", {"rows": rows, "sweep": sweep, "plot": plot})
    _plot(plot)


def _plot(plot):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(plot)
    figure, axes = plt.subplots(1, len(LANES), figsize=(13, 3.6), sharey=True)
    positions = np.arange(len(names))
    for axis, lanes in zip(axes, LANES, strict=True):
        ours = [plot[name][lanes][0] for name in names]
        seed = [plot[name][lanes][1] for name in names]
        axis.bar(positions - 0.2, ours, 0.4, label="this spawner")
        axis.bar(positions + 0.2, seed, 0.4, label="seed rule (block 20, row mod P)")
        axis.axhline(0.95, color="black", linewidth=0.8, linestyle="--")
        axis.set_title(f"P = {lanes}")
        axis.set_xticks(positions, [name.replace("coauthor_", "") for name in names], rotation=30)
        axis.set_ylim(0, 1.05)
    axes[0].set_ylabel("packet fill (nonzeros / (packets x P))")
    axes[-1].legend(loc="lower right", fontsize=8)
    figure.suptitle(f"Packet fill on the synthetic graphs (A + I, seed {SEED}); dashed: the 0.95 target")
    figure.tight_layout()
    figure.savefig(DOCS / "aggregate_fill.png", dpi=110)
    plt.close(figure)


# ---------------------------------------------------------------------------------------- rtl
def rtl_params(lanes, nodes):
    """The bench build: Boolean, one feature, memories for ``nodes`` rows, 16-bit ids."""
    capacity = -(-nodes // 8) * 8
    return {"lanes": lanes, "features": 1, "rows": capacity, "cols": capacity, "row_bits": 16, "col_bits": 16}


def _run_graphs(lanes, jobs, capacity):
    """Run ``jobs`` (name, packets, n_rows) on one build; returns the device session's results."""
    from scripts.sim.devices.aggregate import run_graphs

    return run_graphs(rtl_params(lanes, capacity), jobs)


def rtl(args):
    capacity = max(GRAPHS[name].nodes for name in BENCHMARK_GRAPHS)
    results = []
    for lanes in args.lanes:
        names = BENCHMARK_GRAPHS if lanes == 4 else args.small_graphs
        jobs = []
        for name in names:
            adjacency = _graph(name)
            spawned = spawn(adjacency, lanes=lanes)
            jobs.append({"name": name, "packer": "ours", "packets": spawned.packets, "n_rows": spawned.n_rows,
                         "n_cols": adjacency.shape[1], "model_cycles": spawned.steps, "nnz": adjacency.nnz})
            if lanes == 4 and name in args.small_graphs:
                seed = seed_rule(adjacency, lanes=lanes)
                jobs.append({"name": name, "packer": "seed rule", "packets": seed.packets,
                             "n_rows": seed.n_rows, "n_cols": adjacency.shape[1], "nnz": adjacency.nnz,
                             "model_cycles": int(issue_cycles(seed.packets)[-1] + 1)})
        started = time.perf_counter()
        for result in _run_graphs(lanes, jobs, capacity):
            results.append({"lanes": lanes, **result})
        print(f"P = {lanes}: {len(jobs)} streams in {time.perf_counter() - started:.0f} s", flush=True)
    # Keep the earlier runs' rows for the lane counts not run this time.
    path = BENCH / "aggregate_rtl.json"
    earlier = json.loads(path.read_text()) if path.exists() else []
    results = [r for r in earlier if r["lanes"] not in args.lanes] + results
    results.sort(key=lambda r: (r["lanes"] != 4, r["lanes"], BENCHMARK_GRAPHS.index(r["name"]), r["packer"]))
    _save("rtl", results)
    rows = [[r["name"], r["packer"], r["lanes"], r["nnz"], r["packets"], r["cycles"], r["model_cycles"],
             r["stall_cycles"], f"{r['cycles'] / r['packets']:.4f}", f"{r['packets'] / r['cycles']:.4f}",
             f"{r['cycles'] / (r['nnz'] / r['lanes']):.4f}", "yes" if r["bit_exact"] else "NO"]
            for r in results]
    headers = ["graph", "packer", "P", "nnz", "packets", "cycles (RTL)", "cycles (model)", "stall cycles",
               "cycles / packet", "packets / cycle", "cycles / (nnz/P)", "OUT == golden"]
    write_table(DOC, "aggregate-rtl", headers, rows, f"{COMMAND} rtl", disable_numparse=True)


# --------------------------------------------------------------------------------------- area
# P = 4, F = 16 with memories for Cora-sized graphs (4,096 rows of B and OUT) on xcup; ECP5 with
# 256-row memories (its 208 EBR hold no more) for the resources and the bitstream's Fmax.
XCUP_MEMORY = {"rows": 4096, "cols": 4096, "row_bits": 12, "col_bits": 12}
ECP5_MEMORY = {"rows": 256, "cols": 256, "row_bits": 8, "col_bits": 8}


def _area_points(args):
    points = [("xcup", {"lanes": 4, "features": 16, **XCUP_MEMORY}),
              ("xcup", {"lanes": 4, "features": 16, "weighted": True, **XCUP_MEMORY}),
              ("ecp5", {"lanes": 4, "features": args.ecp5_features, **ECP5_MEMORY})]
    points += [("xcup", {"lanes": lanes, "features": args.sweep_features, **XCUP_MEMORY})
               for lanes in LANES]
    return points


def area(args):
    from boards.catalog import BOARDS
    from rtl.registry import get_block
    from scripts.flow.bitstream import measure_bitstream
    from scripts.flow.synth import synthesize

    block = get_block("aggregation_pipeline")
    measured = []
    for target, params in _area_points(args):
        started = time.perf_counter()
        resources = synthesize(block.build(params), target)
        print(f"{target} {params}: {resources} ({time.perf_counter() - started:.0f} s)", flush=True)
        measured.append({"target": target, "params": params, "resources": resources})
    fmax = None
    if not args.no_fmax:
        params = {"lanes": 4, "features": args.ecp5_features, **ECP5_MEMORY}
        fmax = {"params": params, "summary": measure_bitstream(block.build(params), board=BOARDS[args.board])}
        print(f"ECP5 bitstream: {fmax['summary']}", flush=True)
    _save("area", {"points": measured, "fmax": fmax})
    _area_tables(measured, fmax, args)


def _describe(params):
    kind = "weighted" if params.get("weighted") else "Boolean"
    return f"P = {params['lanes']}, F = {params['features']}, {kind}, {params['rows']} rows"


def _area_tables(measured, fmax, args):
    from boards.targets import RESOURCE_COLUMNS

    command = f"{COMMAND} area --ecp5-features {args.ecp5_features} --sweep-features {args.sweep_features}"
    rows = []
    for point in measured[:3]:
        resources = point["resources"]
        cells = [resources.get(column, "") for column in RESOURCE_COLUMNS[point["target"]]]
        rows.append([point["target"], _describe(point["params"])] + [
            f"{name} {value}" for name, value in zip(RESOURCE_COLUMNS[point["target"]], cells, strict=True)])
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    headers = ["target", "configuration"] + [f"resource {index + 1}" for index in range(width - 2)]
    write_table(DOC, "aggregate-area", headers, rows, command, disable_numparse=True)
    # Per lane against the seed's Table 4.2 (every NN kernel together, per kernel-lane unknown).
    xcup = measured[0]["resources"], measured[1]["resources"]
    per_lane = [["Table 4.2, NN function kernels (all kernels, U280)", TABLE_4_2["LUT"], TABLE_4_2["FF"],
                 TABLE_4_2["DSP48E2"], TABLE_4_2["BRAM18K"]]]
    for label, resources in zip(("Boolean", "weighted"), xcup, strict=True):
        per_lane.append([f"this pipeline, P = 4, F = 16, {label}: whole",
                         resources["LUT"], resources["FF"], resources["DSP48E2"], 2 * resources["BRAM"]])
        per_lane.append([f"this pipeline, {label}: per lane",
                         *(round(resources[key] * factor / 4) for key, factor in
                           (("LUT", 1), ("FF", 1), ("DSP48E2", 1), ("BRAM", 2)))])
    write_table(DOC, "aggregate-table42", ["", "LUT", "FF", "DSP48E2", "BRAM18K"], per_lane, command)
    sweep = []
    for point in measured[3:]:
        resources = point["resources"]
        sweep.append([point["params"]["lanes"], point["params"]["features"]]
                     + [resources.get(column, "") for column in RESOURCE_COLUMNS["xcup"]])
    write_table(DOC, "aggregate-lanes-area", ["P", "F"] + list(RESOURCE_COLUMNS["xcup"]), sweep, command)
    if fmax is not None:
        summary = fmax["summary"]
        clocks = summary.get("fmax", {})
        cells = [[_describe(fmax["params"]), summary["board"], summary.get("requested_mhz"),
                  ", ".join(f"{value:.1f}" for value in _clock_values(clocks)),
                  ", ".join(f"{key} {value}" for key, value in summary.get("utilisation", {}).items())]]
        write_table(DOC, "aggregate-fmax", ["configuration", "board", "constraint MHz", "Fmax MHz (nextpnr)",
                                            "utilisation"], cells, f"{command} (bitstream)",
                    disable_numparse=True)


def _clock_values(clocks):
    values = []
    for figures in clocks.values():
        value = figures.get("achieved") if isinstance(figures, dict) else figures
        if value is not None:
            values.append(float(value))
    return values


# --------------------------------------------------------------------------------------- time
def cpu_time(adjacency, features, repeats):
    """Best wall time of ``adjacency @ features`` (scipy.sparse CSR, float32) over ``repeats``."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        adjacency @ features
        best = min(best, time.perf_counter() - started)
    return best


def timing(args):
    rtl_results = [r for r in _load("rtl") if r["lanes"] == 4 and r["packer"] == "ours"]
    area_data = _load("area")
    ecp5_mhz = max(_clock_values(area_data["fmax"]["summary"]["fmax"])) if area_data.get("fmax") else None
    rng = np.random.default_rng(SEED)
    rows = []
    for result in rtl_results:
        adjacency = sp.csr_matrix(_graph(result["name"]), dtype=np.float32)
        features = rng.standard_normal((adjacency.shape[1], 16)).astype(np.float32)
        seconds = cpu_time(adjacency, features, args.repeats)
        cycles = result["cycles"]
        rows.append([result["name"], cycles, f"{cycles / (XCUP_CLOCK_MHZ * 1e6) * 1e6:.1f}",
                     f"{cycles / (ecp5_mhz * 1e6) * 1e6:.1f}" if ecp5_mhz else "",
                     f"{seconds * 1e6:.1f}", f"{seconds * XCUP_CLOCK_MHZ * 1e6 / cycles:.2f}"])
    reddit = GRAPHS["reddit"]
    estimate = cycle_estimate(degree_sequence("reddit", seed=SEED) + 1, 4)
    rows.append([f"reddit (cycle model; {reddit.nodes} nodes)", estimate,
                 f"{estimate / (XCUP_CLOCK_MHZ * 1e6) * 1e6:.1f}",
                 f"{estimate / (ecp5_mhz * 1e6) * 1e6:.1f}" if ecp5_mhz else "", "", ""])
    headers = ["graph", "simulated cycles (P = 4)", f"µs at {XCUP_CLOCK_MHZ} MHz (xcup, stated)",
               f"µs at {ecp5_mhz:.0f} MHz (ECP5 Fmax)" if ecp5_mhz else "µs at ECP5 Fmax",
               "µs scipy.sparse CSR @ dense, F = 16, this CPU (measured)",
               f"CPU / pipeline at {XCUP_CLOCK_MHZ} MHz"]
    write_table(DOC, "aggregate-time", headers, rows, f"{COMMAND} time", disable_numparse=True)
    _save("time", rows)


# ---------------------------------------------------------------------------------- registers
def registers(args):
    from testbenches.bus.bench_axi import register_rows

    write_table(DOC, "aggregate-register-map", ["offset", "name", "width", "access", "kind", "description"],
                register_rows("aggregation_kernel"), f"{COMMAND} registers",
                colalign=("left", "left", "right", "left", "left", "left"), disable_numparse=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bench_aggregate", description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    parts.add_parser("fill", help="packet fill and cycles: ours vs the seed rule (golden, cycle model)")
    p_rtl = parts.add_parser("rtl", help="whole graphs through the Verilated pipeline")
    p_rtl.add_argument("--lanes", type=int, nargs="+", default=list(LANES))
    p_rtl.add_argument("--small-graphs", nargs="+", default=["cora", "citeseer", "pubmed"])
    p_area = parts.add_parser("area", help="Yosys resources (xcup, ECP5) and the ECP5 Fmax")
    p_area.add_argument("--ecp5-features", type=int, default=16)
    p_area.add_argument("--sweep-features", type=int, default=16)
    p_area.add_argument("--board", default="ulx3s-85f")
    p_area.add_argument("--no-fmax", action="store_true")
    p_time = parts.add_parser("time", help="per-graph time: simulated cycles at a clock vs scipy.sparse")
    p_time.add_argument("--repeats", type=int, default=20)
    parts.add_parser("registers", help="the kernel's register map (no simulation)")
    args = parser.parse_args(argv)
    {"fill": fill, "rtl": rtl, "area": area, "time": timing, "registers": registers}[args.part](args)


if __name__ == "__main__":
    main()
