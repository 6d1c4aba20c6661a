"""``python -m testbenches.optim.bench_ddr``: the updater kernels on the SmartSSD's shared DDR4.

The 16-lane Adam and fused Top-K (1 %) kernels with read/write phases (``rw_phases``), and the
same kernels without them for comparison, under :class:`scripts.sim.devices.ddr.DdrModel`
(:mod:`testbenches.optim.ddr_measure` runs them and says how). The rows of a default run go to
the ``optim-ddr`` table of docs/optim.md (:func:`scripts.flow.docs.write_table`), whose
``adam_updater`` row is the system model's FPGA update rate
(``testbenches.optim.bench_system_model``). Exits 1 if a phased kernel is below 95 % of the
DDR bound or a run reported a bus error.
"""

import argparse
import logging
import sys

from testbenches.optim.ddr_measure import KERNELS, TARGET, measure_adam, measure_topk

__all__ = ["TABLE", "main"]

TABLE = "optim-ddr"
COMMAND = ".venv/bin/python -m testbenches.optim.bench_ddr"


HEADERS = ["kernel", "elements", "cycles", "elements/cycle", "steady elements/cycle", "DDR bytes/element",
           "DDR bound", "steady of bound", "DDR bytes/cycle", "turnarounds per 1K elements",
           "GB/s at 300 MHz", "G elements/s"]


def table_rows(rows):
    return [[r["kernel"], r["elements"], r["cycles"], f"{r['whole']:.3f}", f"{r['steady']:.3f}",
             f"{r['bytes_per_element']:.2f}", f"{r['bound']:.3f}", f"{r['of_bound']:.1%}",
             f"{r['ddr_bytes_per_cycle']:.1f}", f"{r['turnarounds_per_kelement']:.2f}", f"{r['gbps']:.1f}",
             f"{r['gelements']:.3f}"] for r in rows]


def main(argv=None):
    from tabulate import tabulate

    from scripts.flow.docs import write_table

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--elements", type=int, default=16384, help="elements of the shorter run")
    parser.add_argument("--kernels", default=",".join(KERNELS),
                        help="adam, topk (rw_phases on), adam-overlap, topk-overlap (off)")
    parser.add_argument("--arithmetic", action="store_true",
                        help="real datapath, outputs checked bit for bit")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    rows = []
    for name in args.kernels.split(","):
        measure = measure_adam if name.startswith("adam") else measure_topk
        phased = not name.endswith("-overlap")
        rows.append(measure(args.elements, arithmetic=args.arithmetic, rw_phases=phased))
    print(tabulate(table_rows(rows), headers=HEADERS, tablefmt="github", disable_numparse=True))
    # The target is the phased kernels'; the overlapping ones are shown for comparison.
    failures = [r["kernel"] for r in rows
                if r["error"] or (r["of_bound"] < TARGET and "rw_phases off" not in r["kernel"])]
    if args.elements == 16384 and args.kernels == ",".join(KERNELS) and not args.arithmetic:
        write_table("optim.md", TABLE, HEADERS, table_rows(rows), COMMAND, disable_numparse=True,
                    colalign=("left",) + ("right",) * (len(HEADERS) - 1))
        print(f"wrote docs/optim.md ({TABLE})")
    if failures:
        print(f"below {TARGET:.0%} of the DDR bound (or a bus error): {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
