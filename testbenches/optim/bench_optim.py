"""``python -m testbenches.optim.bench_optim``: throughput of the Adam updater kernel, in cycles from cocotb.

For each lane count and port mode the kernel runs one Adam step (binary32 gradient,
bf16 parameter copy: the 30 bytes per element of docs/optim.md) on Verilator under
cocotb, with the memory model at full rate and with a pause probability on every AXI
channel. The kernel's own counters give the cycles and the AXI data beats; nothing is
timed by the wall clock. Reported per run:

* elements per cycle over the whole run (fill and drain included), and in steady state:
  two runs of ``n`` and ``2 n`` elements, ``n / (cycles(2 n) - cycles(n))``;
* steady-state read and write data beats per cycle (AXI bus efficiency, 1.0 = one beat
  every cycle);
* the bound: ``min(lanes, memory bound)``, where the memory bound is what the busiest AXI
  channel can carry when it moves one beat per cycle, scaled by ``1 - stall`` when the
  memory model pauses (a paused channel moves at most that fraction of beats);
* the fraction of that bound reached, in steady state and over the whole run.

The rows of a run at the default ``--stalls`` and ``--elements`` go to the ``optim-throughput``
table of docs/optim.md (:func:`scripts.flow.docs.write_table`; rows in
``docs/data/optim-throughput.json``), replacing the documented points they measured.

``--timing`` builds the kernels with ``arithmetic=False`` (the floating-point datapath
replaced by its timing: same latency, credits and buffers, no arithmetic), so that wide
kernels build in minutes. ``--check`` runs the small lane counts both ways and requires
identical cycle counts (and bit-exact outputs from the arithmetic build), which is what
justifies the timing builds. ``--synth`` adds Yosys resources on ``xcup`` next to
Smart-Infinity's Table III.
"""

import argparse
import json
import logging
import sys

import numpy as np

from boards.references import SMART_INFINITY

__all__ = ["run_point", "memory_bound", "main"]

# Bytes per element on each AXI channel of a port: (read, write). Adam with an f32 gradient
# and a 16-bit copy reads 4 x 4 bytes and writes 3 x 4 + 2 bytes per element.
_PORT_BYTES = {"param": (4, 4), "grad": (4, 0), "exp_avg": (4, 4), "exp_avg_sq": (4, 4), "param16": (0, 2)}


def memory_bound(ports, data_width, stall):
    """Elements per cycle the memory interface allows: the busiest channel at one beat per cycle."""
    beat = data_width // 8
    if ports == "shared":
        channels = [sum(pair[direction] for pair in _PORT_BYTES.values()) for direction in (0, 1)]
    else:
        channels = [value for pair in _PORT_BYTES.values() for value in pair]
    return (1 - stall) * beat / max(channels)


def run_point(lanes, ports, stalls, elements, *, arithmetic, data_width=512, seed=1, **kernel):
    """Adam steps of ``elements`` and ``2 * elements`` per stall value on one kernel build.

    The whole-run figures are those of the longer run; the steady-state figures are the
    differences between the two runs (extra elements over extra cycles), which removes the
    fixed cost of filling and draining the pipeline. Returns a list of result dicts.
    """
    from golden.optim.host import reference_update
    from golden.optim.vectors import f32_tensor
    from scripts.sim.devices import updater as device

    rng = np.random.default_rng(seed)
    hyper = {"step": 3, "lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01,
             "decoupled": True, "grad_scale": 1.0}
    n = 2 * elements
    tensors = {"param": f32_tensor(rng, n, specials=0.0),
               "grad": f32_tensor(rng, n, scale=1e-2, specials=0.0)}
    states = {"exp_avg": f32_tensor(rng, n, scale=1e-3, specials=0.0),
              "exp_avg_sq": f32_tensor(rng, n, scale=1e-3, positive=True, specials=0.0)}
    jobs = []
    for stall in stalls:
        for count in (elements, n):
            jobs.append({"kind": "update", "param": tensors["param"][:count], "grad": tensors["grad"][:count],
                         "states": {name: value[:count] for name, value in states.items()}, "hyper": hyper,
                         "grad_format": "f32", "copy_format": "bf16", "stall": stall})
    results = device.run_jobs("adam", jobs, lanes=lanes, ports=ports, data_width=data_width,
                              arithmetic=arithmetic, **kernel)
    expected = reference_update("adam", param=tensors["param"], grad=tensors["grad"], states=states,
                                hyper=hyper, copy_format="bf16") if arithmetic else None
    rows = []
    for index, stall in enumerate(stalls):
        short, full = results[2 * index], results[2 * index + 1]
        exact = None
        if expected is not None:
            exact = all(np.array_equal(full.outputs[name], expected[name])
                        for name in ("param", "exp_avg", "exp_avg_sq", "param16"))
        extra = full.cycles - short.cycles
        bound = min(lanes, memory_bound(ports, data_width, stall))
        steady = elements / extra
        rows.append({"lanes": lanes, "ports": ports, "stall": stall, "elements": n, "cycles": full.cycles,
                     "elements_per_cycle": n / full.cycles, "steady": steady, "per_lane": steady / lanes,
                     "read_beats_per_cycle": (full.read_beats - short.read_beats) / extra,
                     "write_beats_per_cycle": (full.write_beats - short.write_beats) / extra,
                     "bound": bound, "of_bound": steady / bound, "whole_of_bound": n / full.cycles / bound,
                     "arithmetic": arithmetic, "exact": exact, "error": full.error | short.error})
    return rows


HEADERS = ["lanes", "ports", "stall", "elements", "cycles", "elements/cycle", "steady elements/cycle",
           "steady / lanes", "R beats/cycle", "W beats/cycle", "bound", "steady of bound",
           "whole run of bound"]
COLALIGN = ("right", "left") + ("right",) * 11
TABLE = "optim-throughput"


def table_rows(rows):
    """The cells of the throughput table, one list per :func:`run_point` result."""
    return [[r["lanes"], r["ports"], f"{r['stall']:.1f}", r["elements"], r["cycles"],
             f"{r['elements_per_cycle']:.3f}", f"{r['steady']:.3f}", f"{r['per_lane']:.3f}",
             f"{r['read_beats_per_cycle']:.3f}", f"{r['write_beats_per_cycle']:.3f}", f"{r['bound']:.2f}",
             f"{r['of_bound']:.1%}", f"{r['whole_of_bound']:.1%}"] for r in rows]


def format_table(rows):
    from tabulate import tabulate

    return tabulate(table_rows(rows), headers=HEADERS, tablefmt="github", colalign=COLALIGN,
                    disable_numparse=True)


def write_doc_table(rows, command):
    """Put ``rows`` in the ``optim-throughput`` table of docs/optim.md, keeping the other points.

    A row replaces the documented row of the same lanes, ports and stall; new points are
    appended. So an interrupted sweep can be completed by a run of the missing points.
    """
    from scripts.flow.docs import DATA, write_table

    path = DATA / f"{TABLE}.json"
    kept = json.loads(path.read_text())["rows"] if path.exists() else []
    new = {tuple(row[:3]): row for row in table_rows(rows)}
    merged = [new.pop(tuple(row[:3]), row) for row in kept] + list(new.values())
    write_table("optim.md", TABLE, HEADERS, merged, command, colalign=COLALIGN, disable_numparse=True)


def synth_table(lane_counts):
    from tabulate import tabulate

    from rtl.optim.updater_kernel import AdamUpdater
    from scripts.flow.synth import synthesize

    columns = ("LUT", "FF", "CARRY", "DSP48E2", "BRAM", "URAM")
    rows = []
    for lanes in lane_counts:
        stats = synthesize(AdamUpdater(lanes=lanes), "xcup")
        rows.append([f"adam_updater lanes={lanes}", *(str(stats[column]) for column in columns)])
    reference = {name: share * total for name, (share, total) in SMART_INFINITY.items()}
    rows.append(["Smart-Infinity Adam (Table III, KU15P)", f"{reference['LUT']:.0f}", "", "",
                 f"{reference['DSP48E2']:.0f}", f"{reference['BRAM']:.0f}", f"{reference['URAM']:.0f}"])
    headers = ["design", "LUT", "FF", "CARRY", "DSP48E2", "BRAM36", "URAM"]
    return tabulate(rows, headers=headers, tablefmt="github", colalign=("left",) + ("right",) * 6,
                    disable_numparse=True)


def _ints(text):
    return [int(item) for item in text.split(",") if item]


def _floats(text):
    return [float(item) for item in text.split(",") if item]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lanes", type=_ints, default=[1, 2, 4, 8, 16])
    parser.add_argument("--ports", default="shared,separate")
    parser.add_argument("--stalls", type=_floats, default=[0.0, 0.3])
    parser.add_argument("--elements", type=int, default=16384,
                        help="elements of the shorter run (the longer has twice as many)")
    parser.add_argument("--timing", action="store_true", help="build with arithmetic=False (see above)")
    parser.add_argument("--check", type=_ints, default=[], metavar="LANES",
                        help="also run these lane counts with the arithmetic and compare cycles")
    parser.add_argument("--synth", type=_ints, default=[], metavar="LANES", help="Yosys xcup resources")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    defaults = parser.parse_args([])

    rows = []
    for ports in args.ports.split(","):
        for lanes in args.lanes:
            rows += run_point(lanes, ports, args.stalls, args.elements, arithmetic=not args.timing)
            print(format_table(rows[-len(args.stalls):]), flush=True)
    print("\n## Adam updater throughput (cycles from cocotb on Verilator)\n")
    print(format_table(rows))
    if rows and (args.stalls, args.elements) == (defaults.stalls, defaults.elements):
        command = ".venv/bin/python -m testbenches.optim.bench_optim" + (" --timing" if args.timing else "")
        write_doc_table(rows, command)
        print(f"wrote docs/optim.md ({TABLE})")

    failures = 0
    if args.check:
        print("\n## Timing builds against arithmetic builds\n")
        for ports in args.ports.split(","):
            for lanes in args.check:
                real = run_point(lanes, ports, args.stalls, args.elements, arithmetic=True)
                timing = run_point(lanes, ports, args.stalls, args.elements, arithmetic=False)
                for r, t in zip(real, timing, strict=True):
                    same = r["cycles"] == t["cycles"] and r["steady"] == t["steady"]
                    failures += (not same) + (not r["exact"])
                    verdict = "equal" if same else "DIFFERENT"
                    exact = "bit-exact" if r["exact"] else "NOT bit-exact"
                    print(f"lanes={lanes} ports={ports} stall={r['stall']}: cycles {r['cycles']} "
                          f"(arithmetic) vs {t['cycles']} (timing): {verdict}; outputs {exact} with golden")
    if args.synth:
        print("\n## Resources (Yosys synth_xilinx -family xcup)\n")
        print(synth_table(args.synth))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
