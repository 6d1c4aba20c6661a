"""Throughput of the AXI4 DMA engines with nothing stalling; rewrites the tables in ``docs/bus_axi.md``.

Run: ``.venv/bin/python -m scripts.bench_axi``. Each point runs the cocotb test
``throughput_without_stalls`` of the reader or writer on Verilator against cocotbext-axi's
``AxiRam`` (no pause generators) and counts clock cycles: for the reader from the first to
the last beat on ``data``, for the writer from the first to the last W transfer. No
wall-clock timing is involved. The example register map of ``axi_lite_control`` (its
registry defaults) is regenerated from ``register_map()`` in the same run.
"""

import json
import logging
import os
import pathlib
import re
import tempfile

from rtl.registry import get_block
from testbenches.harness import run_cocotb

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "bus_axi.md"
BEATS = 4096
POINTS = [
    ("axi_burst_reader", {"data_width": 512, "max_burst": 64, "max_outstanding": 4}),
    ("axi_burst_reader", {"data_width": 64, "max_burst": 16, "max_outstanding": 2}),
    ("axi_burst_writer", {"data_width": 512, "max_burst": 64, "max_outstanding": 4}),
    ("axi_burst_writer", {"data_width": 64, "max_burst": 16, "max_outstanding": 2}),
]


def measure(block, params):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run_cocotb(block, f"testbenches.bus.cocotb_{block}", params=params,
                   testcase="throughput_without_stalls",
                   extra_env={"NEARTRAIN_BENCH_OUT": out.name, "NEARTRAIN_VECTORS": str(BEATS)})
        return json.loads(pathlib.Path(out.name).read_text())


def throughput_table():
    lines = ["| block | parameters | beats | cycles (first to last beat) | beats per cycle "
             "| command to done (cycles) | peak bursts in flight |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for block, params in POINTS:
        result = measure(block, params)
        text = ", ".join(f"{key}={value}" for key, value in params.items())
        lines.append(f"| {block} | {text} | {result['beats']} | {result['cycles']} | "
                     f"{result['beats_per_cycle']:.3f} | {result['command_to_done_cycles']} | "
                     f"{result['peak_outstanding']} |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def register_table():
    control = get_block("axi_lite_control").build()
    lines = ["| offset | name | width | access | kind | description |", "|---|---|---:|---|---|---|"]
    for entry in control.register_map():
        lines.append(f"| 0x{entry['offset']:02X} | {entry['name']} | {entry['width']} | {entry['access']} "
                     f"| {entry['kind']} | {entry['description']} |")
    return "\n".join(lines)


def replace_section(text, name, body):
    """Replace what lies between ``<!-- name:begin -->`` and ``<!-- name:end -->``."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{DOC} has no {name} section markers")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text)


def main():
    logging.disable(logging.INFO)
    os.environ["NEARTRAIN_VECTORS"] = str(BEATS)
    text = DOC.read_text()
    text = replace_section(text, "register-map", register_table())
    text = replace_section(text, "throughput", throughput_table())
    DOC.write_text(text)
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
