"""Throughput of the stream blocks with neither side stalling; writes the table in ``docs/bus.md``.

Run: ``.venv/bin/python -m testbenches.bus.bench_bus [--transfers N]``. Each point runs the stream device's
throughput session (:func:`scripts.sim.devices.stream.run_throughput`) on Verilator and counts clock
cycles between the first and the last output transfer (no wall-clock timing is involved). The rows go to
``docs/data/bus-throughput.json`` and the table between the ``bus-throughput`` markers
(:func:`scripts.flow.docs.write_table`).
"""

import argparse
import logging

from scripts.flow.docs import write_table
from scripts.sim.devices.stream import run_throughput

TRANSFERS = 4096
POINTS = [
    ("skid_buffer", {"width": 32}),
    ("skid_buffer", {"width": 512}),
    ("stream_fifo", {"width": 32, "depth": 16}),
    ("width_converter", {"input_width": 512, "output_width": 512, "element_width": 32}),
    ("width_converter", {"input_width": 512, "output_width": 128, "element_width": 32}),
    ("width_converter", {"input_width": 128, "output_width": 512, "element_width": 32}),
]
HEADERS = ["block", "parameters", "narrow-side transfers", "cycles", "transfers per cycle"]
COLALIGN = ("left", "left", "right", "right", "right")


def measure(block, params, transfers=TRANSFERS):
    return run_throughput(block, transfers, params)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transfers", type=int, default=TRANSFERS, help=f"per point (default {TRANSFERS})")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    rows = []
    for block, params in POINTS:
        result = measure(block, params, args.transfers)
        rows.append([block, ", ".join(f"{k}={v}" for k, v in params.items()), result["transfers"],
                     result["cycles"], f"{result['transfers_per_cycle']:.3f}"])
        print(rows[-1], flush=True)
    command = "python -m testbenches.bus.bench_bus" + (f" --transfers {args.transfers}"
                                               if args.transfers != TRANSFERS else "")
    write_table("bus.md", "bus-throughput", HEADERS, rows, f".venv/bin/{command}", colalign=COLALIGN,
                disable_numparse=True)
    print("wrote docs/bus.md (bus-throughput)")


if __name__ == "__main__":
    main()
