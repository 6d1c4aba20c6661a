"""Throughput of the AXI4 DMA engines with nothing stalling; writes the tables in ``docs/bus_axi.md``.

Run: ``.venv/bin/python -m testbenches.bus.bench_axi [--beats N]``. Each point runs the throughput
session of the reader or writer (:func:`scripts.sim.devices.bus.run_throughput`) on Verilator
against cocotbext-axi's ``AxiRam`` (no pause generators) and counts clock cycles: for the reader
from the first to the last beat on ``data``, for the writer from the first to the last W
transfer. No wall-clock timing is involved.

The AXI4-Lite register maps in the docs (:data:`REGISTER_MAPS`: the example of
``axi_lite_control`` at its registry defaults, and the kernels ``adam_updater`` and
``topk_updater``) are written from their ``register_map()`` in the same run, or alone with
``--register-maps`` (no simulation). Every table goes through :func:`scripts.flow.docs.write_table`.
"""

import argparse
import logging

from rtl.registry import get_block
from scripts.flow.docs import write_table
from scripts.sim.devices.bus import run_throughput

DOC = "bus_axi.md"
COMMAND = ".venv/bin/python -m testbenches.bus.bench_axi"
BEATS = 4096
POINTS = [
    ("axi_burst_reader", {"data_width": 512, "max_burst": 64, "max_outstanding": 4}),
    ("axi_burst_reader", {"data_width": 64, "max_burst": 16, "max_outstanding": 2}),
    ("axi_burst_writer", {"data_width": 512, "max_burst": 64, "max_outstanding": 4}),
    ("axi_burst_writer", {"data_width": 64, "max_burst": 16, "max_outstanding": 2}),
]


def throughput_rows(beats=BEATS):
    rows = []
    for block, params in POINTS:
        result = run_throughput(block, params, beats)
        rows.append([block, ", ".join(f"{key}={value}" for key, value in params.items()), result["beats"],
                     result["cycles"], f"{result['beats_per_cycle']:.3f}", result["command_to_done_cycles"],
                     result["peak_outstanding"]])
        print(rows[-1], flush=True)
    return rows


# (document, table, block): each block's register map at its registry defaults.
REGISTER_MAPS = [
    ("bus_axi.md", "axi-register-map", "axi_lite_control"),
    ("optim.md", "optim-register-map", "adam_updater"),
    ("compress.md", "compress-register-map", "topk_updater"),
]


def register_rows(block="axi_lite_control"):
    """The rows of ``block``'s register map (offset, name, width, access, kind, description)."""
    entries = get_block(block).build().register_map()
    digits = max(2, len(f"{max(entry['offset'] for entry in entries):X}"))
    return [[f"0x{entry['offset']:0{digits}X}", entry["name"], entry["width"], entry["access"], entry["kind"],
             entry["description"]] for entry in entries]


def write_register_maps():
    for doc, table, block in REGISTER_MAPS:
        write_table(doc, table, ["offset", "name", "width", "access", "kind", "description"],
                    register_rows(block), f"{COMMAND} --register-maps",
                    colalign=("left", "left", "right", "left", "left", "left"), disable_numparse=True)
        print(f"wrote docs/{doc} ({table})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beats", type=int, default=BEATS, help=f"per command (default {BEATS})")
    parser.add_argument("--register-maps", action="store_true", help="write the register maps only")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    write_register_maps()
    if args.register_maps:
        return
    command = COMMAND + (f" --beats {args.beats}" if args.beats != BEATS else "")
    write_table(DOC, "axi-throughput",
                ["block", "parameters", "beats", "cycles (first to last beat)", "beats per cycle",
                 "command to done (cycles)", "peak bursts in flight"],
                throughput_rows(args.beats), command, colalign=("left", "left") + ("right",) * 5,
                disable_numparse=True)
    print(f"wrote docs/{DOC} (axi-throughput)")


if __name__ == "__main__":
    main()
