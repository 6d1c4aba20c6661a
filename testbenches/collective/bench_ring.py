"""Measurements of the ring all-reduce for ``docs/collective.md`` (section "Ring all-reduce").

Simulated on ``ring_cluster`` with 16 ring nodes on a 16-port runtime switch (one build: the
ring's size and segment length are inputs), for N = 2 .. 16 nodes:

* **packets** (flits into the switch) and **packet-hops** (flits into and out of it: one switch
  level, so each packet crosses two links, node to switch and switch to node) of one all-reduce,
  counted by the cocotb monitor on the switch ports and checked equal to
  :func:`golden.collective.ring_counts` at every point measured;
* **cycles** from the rising edge that takes ``start`` (all nodes at once) to the one that raises
  the last ``done``, at ``FIT_LINES`` lines per segment; a straight line ``a + b * lines`` is
  fitted per N, checked at ``HELD_OUT_LINES`` (not in the fit), and evaluated at Z = 1,000,000
  binary32 (71,429 lines of 14, rounded up to a multiple of N). Z = 1M is not simulated directly:
  the cocotb simulation runs at a few hundred cycles per second here, and the 16-node all-reduce
  takes about 134,000 cycles.

Run ``.venv/bin/python -m testbenches.collective.bench_ring`` (writes the ``collective-ring`` table
and ``docs/collective_ring_cycles.png``). :func:`ring_measurements` measures one point, for other
benches (the GCU comparison).
"""

import argparse
import logging
import math

import numpy as np

from golden.collective import LINE_WORDS, ring_counts, seed_ring_counts
from scripts.flow.docs import write_table
from scripts.flow.figures import docs_plot
from scripts.sim.devices.collective import measure_ring
from testbenches.collective.tb import RING_BENCH_PARAMS as BENCH_PARAMS

__all__ = ["ring_measurements", "measure_points", "lines_per_segment", "ELEMENTS", "FIT_LINES",
           "HELD_OUT_LINES"]

DOC = "collective.md"
COMMAND = ".venv/bin/python -m testbenches.collective.bench_ring"
PLOT = "collective_ring_cycles.png"
ELEMENTS = 1_000_000
# Below ~20 lines per segment the all-reduce is latency-bound (a few cycles per line, not the
# 2 (N - 1) packets each node sends per line): the fit needs longer segments.
FIT_LINES = (32, 48)
HELD_OUT_LINES = 64
COUNT_LINES = 2
NODES = tuple(range(2, BENCH_PARAMS["nodes"] + 1))
# Cycles cost simulation time in proportion to N * lines: four ring sizes, not fifteen.
CYCLE_NODES = (2, 4, 8, 16)
# A second check of the fit, far from it: the longest segment the bench build holds (1024 lines).
LONG_LINES = {2: 512, 4: 256, 8: 128}


def lines_per_segment(nodes, elements=ELEMENTS):
    """Lines per segment of a vector of ``elements`` binary32 on ``nodes`` nodes (padded up)."""
    return math.ceil(math.ceil(elements / LINE_WORDS) / nodes)


def measure_points(points):
    """Simulate one all-reduce per ``(nodes, lines)`` in ``points``, in one run of the bench build.

    Returns a list of dicts: ``nodes``, ``lines``, ``cycles``, ``packets``, ``packet_hops`` (counted
    on the switch ports) and ``sent`` (each node's packet counter).
    """
    points = [(int(nodes), int(lines)) for nodes, lines in points]
    for nodes, lines in points:
        if not 2 <= nodes <= BENCH_PARAMS["nodes"] or not 1 <= lines or nodes * lines > BENCH_PARAMS["depth"]:
            raise ValueError(f"({nodes} nodes, {lines} lines) does not fit the bench build {BENCH_PARAMS}")
    return measure_ring(BENCH_PARAMS, points)


def ring_measurements(nodes, lines):
    """One simulated ring all-reduce of ``nodes`` segments of ``lines`` lines per node.

    Returns
    -------
    dict
        ``nodes``, ``lines``, ``elements`` (binary32 per node), ``cycles`` (first start to last
        done), ``packets``, ``packet_hops`` (one switch level) and ``sent`` as simulated, and the
        golden's ``formula_packets`` and ``formula_packet_hops``.
    """
    point = measure_points([(nodes, lines)])[0]
    counts = ring_counts(nodes, lines)
    return {**point, "elements": nodes * lines * LINE_WORDS, "formula_packets": counts["packets"],
            "formula_packet_hops": counts["packet_hops"]}


def _fit(points, nodes):
    """``(slope, intercept, measured, predicted)`` of cycles against lines at ``nodes`` nodes."""
    fit = [p for p in points if p["nodes"] == nodes and p["lines"] in FIT_LINES]
    held = next(p for p in points if p["nodes"] == nodes and p["lines"] == HELD_OUT_LINES)
    slope, intercept = np.polyfit([p["lines"] for p in fit], [p["cycles"] for p in fit], 1)
    return slope, intercept, held["cycles"], intercept + slope * HELD_OUT_LINES


def measure(args):
    cycle_nodes = [n for n in CYCLE_NODES if n in args.nodes]
    points = measure_points([(n, COUNT_LINES) for n in args.nodes]
                            + [(n, lines) for n in cycle_nodes for lines in (*FIT_LINES, HELD_OUT_LINES)]
                            + [(n, LONG_LINES[n]) for n in cycle_nodes if n in LONG_LINES])
    for p in points:
        counts = ring_counts(p["nodes"], p["lines"])
        assert (p["packets"], p["packet_hops"]) == (counts["packets"], counts["packet_hops"]), p
    rows, plotted, plotted_long = [], [], []
    bound = [(n, ring_counts(n, lines_per_segment(n))["packets_per_node"]) for n in args.nodes]
    for nodes in args.nodes:
        counted = next(p for p in points if p["nodes"] == nodes and p["lines"] == COUNT_LINES)
        lines = lines_per_segment(nodes)
        counts, seed = ring_counts(nodes, lines), seed_ring_counts(nodes, lines)
        row = [nodes, counted["packets"], counted["packet_hops"], lines, counts["packets_per_node"],
               counts["packets"], counts["packet_hops"], seed["packets"], seed["packet_hops"]]
        if nodes in cycle_nodes:
            slope, intercept, held, predicted = _fit(points, nodes)
            cycles = intercept + slope * lines
            plotted.append((nodes, cycles, counts["packets_per_node"]))
            row += [f"{slope:.2f}", f"{intercept:.0f}", held, f"{predicted:.0f}",
                    f"{100 * (predicted - held) / held:+.2f}"]
            row += [f"{cycles:,.0f}", f"{counts['packets_per_node'] / cycles:.3f}"]
            if nodes in LONG_LINES:
                long = next(p for p in points if p["nodes"] == nodes and p["lines"] == LONG_LINES[nodes])
                guess = intercept + slope * LONG_LINES[nodes]
                error = 100 * (guess - long["cycles"]) / long["cycles"]
                # The cost per line between the held-out and the longest segment, carried on to Z = 1M.
                far = (long["cycles"] - held) / (LONG_LINES[nodes] - HELD_OUT_LINES)
                from_long = long["cycles"] + far * (lines - LONG_LINES[nodes])
                plotted_long.append((nodes, from_long))
                row += [f"{long['cycles']} at {LONG_LINES[nodes]}", f"{error:+.2f}", f"{far:.2f}",
                        f"{from_long:,.0f}"]
            else:
                row += [""] * 4
        else:
            row += [""] * 11
        rows.append(row)
        print(row, flush=True)
    headers = ["N", f"packets, {COUNT_LINES} lines (simulated)",
               f"packet-hops, {COUNT_LINES} lines (simulated)",
               "lines per segment, Z = 1M", "packets per node", "packets", "packet-hops",
               "seed Z/P·2N(N-1)", "seed Z/P·4(N²H+SH)", "cycles per line", "cycles at 0 lines",
               f"cycles at {HELD_OUT_LINES} lines (simulated)", "fit there", "fit error %",
               "cycles, Z = 1M (fit)", "packets per cycle per node",
               "cycles at the longest segment (simulated)", "fit error there %",
               f"cycles per line, {HELD_OUT_LINES} to longest", "cycles, Z = 1M (from that)"]
    fits = ", ".join(map(str, FIT_LINES))
    write_table(DOC, "collective-ring", headers, rows,
                f"{COMMAND} (cycles fitted at {fits} lines per segment, checked at {HELD_OUT_LINES} "
                f"and at the longest segment the build holds)",
                disable_numparse=True)
    _plot(plotted, plotted_long, bound)


def _plot(plotted, plotted_long, bound):
    with docs_plot(PLOT, xlabel="nodes N", ylabel="cycles, first start to last done",
                   title="Ring all-reduce of 1M binary32 on the simulated switch", from_zero=True,
                   legend_size=8) as axis:
        axis.plot([n for n, _, _ in plotted], [c for _, c, _ in plotted], marker="o",
                  label=f"RTL, line fitted at {', '.join(map(str, FIT_LINES))} lines per segment")
        axis.plot([n for n, _ in plotted_long], [c for _, c in plotted_long], marker="s",
                  label="RTL, cost per line of the longest segments simulated")
        axis.plot([n for n, _ in bound], [p for _, p in bound], linestyle="--",
                  label="packets each node sends (one per cycle at best)")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bench_ring", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=list(NODES), choices=NODES,
                        help="ring sizes (default 2 .. 16)")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    measure(args)


if __name__ == "__main__":
    main()
