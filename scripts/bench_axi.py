"""Throughput of the AXI4 DMA engines with nothing stalling; writes the tables in ``docs/bus_axi.md``.

Run: ``.venv/bin/python -m scripts.bench_axi [--beats N]``. Each point runs the cocotb test
``throughput_without_stalls`` of the reader or writer on Verilator against cocotbext-axi's
``AxiRam`` (no pause generators) and counts clock cycles: for the reader from the first to
the last beat on ``data``, for the writer from the first to the last W transfer. No
wall-clock timing is involved. The example register map of ``axi_lite_control`` (its
registry defaults) is written from ``register_map()`` in the same run. Both tables go
through :func:`scripts.docs.write_table` (``axi-register-map``, ``axi-throughput``).
"""

import argparse
import json
import logging
import os
import pathlib
import tempfile

from rtl.registry import get_block
from scripts.docs import write_table
from testbenches.harness import run_cocotb

DOC = "bus_axi.md"
BEATS = 4096
POINTS = [
    ("axi_burst_reader", {"data_width": 512, "max_burst": 64, "max_outstanding": 4}),
    ("axi_burst_reader", {"data_width": 64, "max_burst": 16, "max_outstanding": 2}),
    ("axi_burst_writer", {"data_width": 512, "max_burst": 64, "max_outstanding": 4}),
    ("axi_burst_writer", {"data_width": 64, "max_burst": 16, "max_outstanding": 2}),
]


def measure(block, params, beats=BEATS):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run_cocotb(block, f"testbenches.bus.cocotb_{block}", params=params,
                   testcase="throughput_without_stalls",
                   extra_env={"NEARTRAIN_BENCH_OUT": out.name, "NEARTRAIN_VECTORS": str(beats)})
        return json.loads(pathlib.Path(out.name).read_text())


def throughput_rows(beats=BEATS):
    rows = []
    for block, params in POINTS:
        result = measure(block, params, beats)
        rows.append([block, ", ".join(f"{key}={value}" for key, value in params.items()), result["beats"],
                     result["cycles"], f"{result['beats_per_cycle']:.3f}", result["command_to_done_cycles"],
                     result["peak_outstanding"]])
        print(rows[-1], flush=True)
    return rows


def register_rows():
    control = get_block("axi_lite_control").build()
    return [[f"0x{entry['offset']:02X}", entry["name"], entry["width"], entry["access"], entry["kind"],
             entry["description"]] for entry in control.register_map()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beats", type=int, default=BEATS, help=f"per command (default {BEATS})")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    os.environ["NEARTRAIN_VECTORS"] = str(args.beats)
    command = ".venv/bin/python -m scripts.bench_axi"
    if args.beats != BEATS:
        command += f" --beats {args.beats}"
    write_table(DOC, "axi-register-map", ["offset", "name", "width", "access", "kind", "description"],
                register_rows(), command, colalign=("left", "left", "right", "left", "left", "left"),
                disable_numparse=True)
    write_table(DOC, "axi-throughput",
                ["block", "parameters", "beats", "cycles (first to last beat)", "beats per cycle",
                 "command to done (cycles)", "peak bursts in flight"],
                throughput_rows(args.beats), command, colalign=("left", "left") + ("right",) * 5,
                disable_numparse=True)
    print(f"wrote docs/{DOC} (axi-register-map, axi-throughput)")


if __name__ == "__main__":
    main()
