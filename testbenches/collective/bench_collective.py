"""Measurements of the global control unit's blocks for ``docs/collective.md``.

Parts (each writes its table there):

* ``buffering``: the reduction unit's gradient storage in each order, from the RTL's own
  parameters (:attr:`rtl.collective.reduction_unit.ReductionUnit.lines`), against the leaves;
* ``area``: Yosys resources on ``xcup`` and ``ecp5`` of every collective block at its defaults
  and of the reduction unit in both orders;
* ``traffic``: one all-reduce through the GCU, simulated (session ``collective.gcu_traffic``)
  for several leaf counts: packets and packet-hops beside the seed's formula, and cycles, with
  their projection to ``Z = 1M`` elements from the measured steady state;
* ``tiered``: one all-reduce on two switch levels (session ``collective.tiered_traffic``,
  regional control units under the GCU) for several region shapes: packets at both levels and
  packet-hops beside the seed's formula with ``S`` sub-region switches, and cycles;
* ``compare``: the GCU's and the ring's figures at ``Z = 1M`` side by side, from the two tables'
  data (``traffic`` here, ``testbenches.collective.bench_ring`` for the ring), with a plot;
* ``accounting``: the seed's "order of magnitude" (Section 7.5) beside the same gradient counted
  the standard way for ring and GCU on two switch levels: packets, packet-hops and each one's
  cycle bound, at ``Z = 1M``; the GCU's counts checked against ``tiered``'s simulated ones;
* ``sliced``: one all-reduce on ``sliced_gcu_cluster`` (a GCU slice per leaf, session
  ``collective.sliced_traffic``) for several leaf counts: cycles, the spacing per line on a link,
  the projection to ``Z = 1M`` against ``Z/P``, the single-port GCU's and the ring's.

Run as ``.venv/bin/python -m testbenches.collective.bench_collective <part>``.
"""

import argparse
import json
import logging
import math

from scripts.flow.docs import write_table

DOC = "collective.md"
COMMAND = ".venv/bin/python -m testbenches.collective.bench_collective"
BUFFERING_LEAVES = (2, 4, 8, 16)
BUFFERING_SHAPE = {"slots": 2, "chunks": 256}  # partitions of 3,584 binary32 (14 KiB)
AREA_POINTS = (
    ("reduction_engine", {}),
    ("reduction_unit", {"mode": "deterministic"}),
    ("reduction_unit", {"mode": "arrival"}),
    ("barrier_table", {}),
    ("gcu", {}),
    ("parameter_update", {}),
    ("gcu", {"update": "adam"}),
)
# One switch level: the smallest runtime switch with a port for each leaf and the GCU.
TRAFFIC_LEAVES = (2, 3, 4, 7, 8, 15)
TRAFFIC_SHAPE = {"partitions": 32, "chunks": 32, "slots": 4, "queue_depth": 8, "switch_depth": 4}
# Two levels: (regions, leaves per region), the same partitions as one level.
TIERED_SHAPES = ((2, 2), (2, 4), (4, 2), (2, 8), (4, 4))
PROJECTED_ELEMENTS = 1_000_000
# The sliced all-reduce: 2N ports (N leaves, N slices), each slice with 16 partitions of 32 lines.
SLICED_LEAVES = (2, 4, 8)
SLICED_SHAPE = {"partitions": 16, "chunks": 32, "slots": 8, "queue_depth": 8, "switch_depth": 4}
# Leaf counts projected from the largest measured one: 2N ports do not fit the 16-port switch.
SLICED_PROJECTED = (15,)
COMPARE_PLOT = "collective_allreduce_cycles.png"
# Two-level shapes (regions S, leaves per region) for the accounting: the simulated ones, then
# larger ones of the 15 x 15 that 4-bit node ids allow (formulas only).
ACCOUNTING_SHAPES = TIERED_SHAPES + ((8, 8), (15, 15))
# A BRAM36 of UltraScale+ is 512 x 72 bits at its widest: a 448-bit line spans 7 of them.
BRAM36_WIDTH, BRAM36_DEPTH = 72, 512


def _bram36(lines, width=448):
    columns = -(-width // BRAM36_WIDTH)
    return columns * -(-lines // BRAM36_DEPTH)


def buffering(args):
    from rtl.collective.reduction_unit import ReductionUnit

    rows = []
    for leaves in BUFFERING_LEAVES:
        row = [leaves]
        for mode in ("deterministic", "arrival"):
            lines = ReductionUnit(leaves=leaves, **BUFFERING_SHAPE, mode=mode).lines
            row += [lines, f"{lines * 448 / 8 / 1024:.1f}", _bram36(lines)]
        rows.append(row)
    headers = ["leaves"] + [f"{mode} {what}" for mode in ("deterministic", "arrival")
                            for what in ("lines", "KiB", "BRAM36")]
    write_table(DOC, "collective-buffering", headers, rows, f"{COMMAND} buffering", disable_numparse=True)


def area(args):
    from boards.targets import RESOURCE_COLUMNS
    from rtl.registry import get_block
    from scripts.flow.synth import synthesize

    rows = []
    for name, overrides in AREA_POINTS:
        block = get_block(name)
        params = block.resolve(overrides)
        xcup = synthesize(block.build(overrides), "xcup")
        ecp5 = synthesize(block.build(overrides), "ecp5")
        described = ", ".join(f"{key}={value}" for key, value in params.items())
        rows.append([f"{name} ({described})"] + [xcup[column] for column in RESOURCE_COLUMNS["xcup"]]
                    + [ecp5[column] for column in RESOURCE_COLUMNS["ecp5"]])
        print(rows[-1], flush=True)
    headers = (["block"] + [f"xcup {column}" for column in RESOURCE_COLUMNS["xcup"]]
               + [f"ECP5 {column}" for column in RESOURCE_COLUMNS["ecp5"]])
    write_table(DOC, "collective-area", headers, rows,
                f"{COMMAND} area (neartrain synth <block> --target xcup|ecp5)", disable_numparse=True)


def gcu_traffic(leaves, shape=TRAFFIC_SHAPE):
    """One simulated all-reduce through the GCU: the counts of ``collective.gcu_traffic``, plus
    ``cycles`` (the last partition's arrival at its last leaf), ``cycles_per_partition`` (the
    steady-state spacing of partitions) and ``projected_cycles`` (for ``Z = 1M``)."""
    nodes = next(size for size in (4, 8, 16) if size > leaves)
    params = dict(shape, nodes=nodes, leaves=leaves)
    return _simulated("gcu_cluster", params)


def _simulated(block, params):
    """One all-reduce's traffic on ``block`` (:func:`scripts.sim.devices.collective.measure_traffic`):
    its counts and the cycle figures."""
    from scripts.sim.devices.collective import measure_traffic

    measured = measure_traffic(block, params)
    done = measured["partition_done"]
    # The steady state: the second half, once the leaves' windows of open partitions are full.
    half = len(done) // 2
    spacing = (done[-1] - done[half]) / (len(done) - 1 - half)
    partitions = math.ceil(PROJECTED_ELEMENTS / (measured["elements"] // len(done)))
    return dict(measured, cycles=done[-1], cycles_per_partition=spacing,
                projected_cycles=round(done[0] + (partitions - 1) * spacing))


def traffic(args):
    rows = []
    for leaves in args.leaves:
        t = gcu_traffic(leaves)
        lines = t["elements"] // 14
        formula = lines * 2 * leaves  # Z/P * 2(N + S), S = 0
        rows.append([leaves, t["elements"], t["data_packets"], formula, t["control_packets"],
                     t["hops_per_packet"] * (t["data_packets"] + t["control_packets"]),
                     t["hops_per_packet"] * formula, t["cycles"], f"{t['cycles_per_partition']:.1f}",
                     t["projected_cycles"]])
        print(rows[-1], flush=True)
    headers = ["leaves N", "Z", "data packets", "Z/P*2(N+S)", "control packets", "packet-hops",
               "Z/P*2(N+S)*H", "cycles", "cycles per partition", "cycles, Z = 1M (projected)"]
    write_table(DOC, "collective-gcu-traffic", headers, rows, f"{COMMAND} traffic", disable_numparse=True)


def tiered(args):
    one_level = {row["leaves N"]: row["cycles"] for row in _rows("collective-gcu-traffic")}
    rows = []
    for regions, per_region in args.shapes:
        params = dict(TRAFFIC_SHAPE, regions=regions, region_leaves=per_region)
        t = _simulated("tiered_cluster", params)
        lines, leaves = t["elements"] // 14, regions * per_region
        formula = lines * 2 * (leaves + regions)  # Z/P * 2(N + S), S = regions
        packets = t["leaf_data_packets"] + t["root_data_packets"] + t["control_packets"]
        rows.append([leaves, f"{regions} x {per_region}", t["elements"], t["leaf_data_packets"],
                     t["root_data_packets"], formula, t["control_packets"], t["hops_per_packet"] * packets,
                     t["hops_per_packet"] * formula, t["cycles"], f"{t['cycles_per_partition']:.1f}",
                     one_level.get(leaves, "")])
        print(rows[-1], flush=True)
    headers = ["leaves N", "regions S x leaves", "Z", "data packets, leaf level", "data packets, root level",
               "Z/P*2(N+S)", "control packets", "packet-hops", "Z/P*2(N+S)*H", "cycles",
               "cycles per partition", "cycles, one level"]
    write_table(DOC, "collective-tiered-traffic", headers, rows, f"{COMMAND} tiered", disable_numparse=True)


def _rows(name):
    from scripts.flow.docs import DATA

    spec = json.loads((DATA / f"{name}.json").read_text())
    return [dict(zip(spec["headers"], row, strict=True)) for row in spec["rows"]]


def _number(cell):
    return None if cell in ("", None) else float(str(cell).replace(",", ""))


def compare(args):
    from scripts.flow.figures import docs_plot

    gcu = {row["leaves N"]: row for row in _rows("collective-gcu-traffic")}
    ring = {row["N"]: row for row in _rows("collective-ring")}
    lines = math.ceil(PROJECTED_ELEMENTS / 14)
    rows = []
    for n in sorted(set(gcu) | {k for k, row in ring.items() if _number(row["cycles, Z = 1M (fit)"])}):
        g, r = gcu.get(n), ring.get(n)
        gcu_packets = 2 * n * lines if g else None  # Z/P * 2(N + S): every leaf sends and fetches Z/P lines
        rows.append([n, gcu_packets or "", 2 * gcu_packets if g else "",
                     g["cycles, Z = 1M (projected)"] if g else "",
                     r["packets"] if r else "", r["packet-hops"] if r else "",
                     r["cycles, Z = 1M (fit)"] if r else ""])
    headers = ["N", "GCU data packets", "GCU packet-hops", "GCU cycles (projected)", "ring packets",
               "ring packet-hops", "ring cycles (fit)"]
    write_table(DOC, "collective-compare", headers, rows, f"{COMMAND} compare", disable_numparse=True)
    curves = (("GCU (reduce + broadcast on request)", 3), ("ring (reduce-scatter + all-gather)", 6))
    with docs_plot(COMPARE_PLOT, xlabel="leaves N (one switch level)", ylabel="cycles for Z = 1M binary32",
                   title="All-reduce of 1M binary32 on the simulated switch", from_zero=True,
                   legend_size=8) as axis:
        for label, column in curves:
            points = [(row[0], _number(row[column])) for row in rows if _number(row[column])]
            axis.plot([n for n, _ in points], [c for _, c in points], marker="o", label=label)


def sliced(args):
    from scripts.sim.devices.collective import switch_size

    gcu = {row["leaves N"]: row for row in _rows("collective-gcu-traffic")}
    ring = {row["N"]: row for row in _rows("collective-ring")}
    bound = math.ceil(PROJECTED_ELEMENTS / 14)  # Z/P: one pass of the lines over a link
    rows, last = [], None
    for leaves in args.leaves:
        params = dict(SLICED_SHAPE, nodes=switch_size(2 * leaves), leaves=leaves,
                      switch_depth=args.switch_depth)
        t = _simulated("sliced_gcu_cluster", params)
        last = t
        per_line = t["cycles_per_partition"] / params["chunks"]  # a partition is `chunks` lines per link
        whole = t["cycles"] / (t["elements"] // 14)  # every link carries all Z/P lines of the run
        rows.append(_sliced_row(leaves, params["nodes"], t["elements"], t["data_packets"], t["cycles"],
                                f"{whole:.2f}", f"{per_line:.3f}", t["projected_cycles"], "measured", bound,
                                gcu, ring))
        print(rows[-1], flush=True)
    # The largest measured N's first partition and spacing, from N = 8 only: the cost per line
    # still grows with N below that (docs/collective.md, section 9).
    for leaves in SLICED_PROJECTED if args.leaves[-1] >= 8 else ():
        rows.append(_sliced_row(leaves, "", "", "", "", "", "", last["projected_cycles"],
                                f"projected from N = {args.leaves[-1]}", bound, gcu, ring))
    headers = ["leaves N", "switch ports", "Z (simulated)", "data packets", "cycles (simulated)",
               "cycles per line, whole run", "cycles per line, second half", "cycles, Z = 1M", "how",
               "x Z/P (71,429)",
               "GCU one port, Z = 1M (projected)", "ring, Z = 1M (fit)"]
    write_table(DOC, "collective-sliced", headers, rows,
                f"{COMMAND} sliced --switch-depth {args.switch_depth}", disable_numparse=True)


def _sliced_row(leaves, ports, elements, packets, cycles, whole, per_line, projected, how, bound, gcu, ring):
    return [leaves, ports, elements, packets, cycles, whole, per_line, projected, how,
            f"{projected / bound:.2f}",
            gcu[leaves]["cycles, Z = 1M (projected)"] if leaves in gcu else "",
            ring[leaves]["cycles, Z = 1M (fit)"] if leaves in ring else ""]


def accounting(args):
    """The seed's ring-against-GCU ratio beside packets, packet-hops and cycle bounds, Z = 1M."""
    simulated = {row["regions S x leaves"]: row for row in _rows("collective-tiered-traffic")}
    lines = math.ceil(PROJECTED_ELEMENTS / 14)  # Z/P
    rows = []
    for regions, per_region in ACCOUNTING_SHAPES:
        n, s = regions * per_region, regions
        seed_ring, seed_gcu = 4 * (n * n + s) * lines, 2 * (n + s) * lines  # Section 7.5.1, H = 1
        # The ring's message is one segment, Z/(NP) packets: 2(N - 1) of them per node.
        ring_packets = 2 * (n - 1) * lines
        gcu_packets = 2 * (n + s) * lines
        # Links crossed: 2 inside a region (leaf, switch, leaf or unit), 4 for the S ring edges
        # that cross the root switch; every GCU-side packet crosses 2 at its own level.
        ring_hops = 2 * (n - 1) * lines * (2 * (n - s) + 4 * s) // n
        gcu_hops = 2 * gcu_packets
        # A link carries a line per cycle: the ring's links work in parallel; the GCU side is
        # held by its busiest port, a region's unit (N/S leaves) or the GCU (S regions).
        ring_cycles, gcu_cycles = 2 * (n - 1) * lines / n, max(per_region, regions) * lines
        row = simulated.get(f"{regions} x {per_region}")
        if row is not None:
            z_lines = int(row["Z"]) // 14
            measured = int(row["data packets, leaf level"]) + int(row["data packets, root level"])
            if measured != 2 * (n + s) * z_lines:
                raise SystemExit(f"{regions} x {per_region}: simulated data packets {measured} != "
                                 f"2(N + S) Z/P = {2 * (n + s) * z_lines}")
        rows.append([n, f"{regions} x {per_region}", "yes" if row is not None else "no",
                     f"{seed_ring / seed_gcu:.1f}", f"{ring_packets / gcu_packets:.2f}",
                     f"{ring_hops / gcu_hops:.2f}", f"{ring_cycles:,.0f}", f"{gcu_cycles:,}",
                     f"{ring_cycles / gcu_cycles:.2f}"])
    headers = ["leaves N", "regions S x leaves", "GCU counts simulated", "seed: ring / GCU volume",
               "ring / GCU packets", "ring / GCU packet-hops", "ring cycles (bound)", "GCU cycles (bound)",
               "ring / GCU cycles"]
    write_table(DOC, "collective-accounting", headers, rows, f"{COMMAND} accounting", disable_numparse=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bench_collective", description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    parts.add_parser("buffering")
    parts.add_parser("area")
    part = parts.add_parser("traffic")
    part.add_argument("--leaves", type=int, nargs="+", default=TRAFFIC_LEAVES)
    part = parts.add_parser("tiered")
    part.add_argument("--shapes", type=lambda text: tuple(map(int, text.split("x"))), nargs="+",
                      default=TIERED_SHAPES, help="regions x leaves per region, e.g. 2x8")
    parts.add_parser("compare")
    parts.add_parser("accounting")
    part = parts.add_parser("sliced")
    part.add_argument("--leaves", type=int, nargs="+", default=SLICED_LEAVES)
    part.add_argument("--switch-depth", type=int, default=SLICED_SHAPE["switch_depth"])
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    {"buffering": buffering, "area": area, "traffic": traffic, "tiered": tiered,
     "compare": compare, "accounting": accounting, "sliced": sliced}[args.part](args)


if __name__ == "__main__":
    main()
