"""Throughput of the stream blocks with neither side stalling; writes ``docs/bus.md``.

Run: ``.venv/bin/python -m scripts.bench_bus``. Each point runs the cocotb test
``throughput_without_stalls`` on Verilator and counts clock cycles between the first and
the last output transfer (no wall-clock timing is involved).
"""

import json
import logging
import os
import pathlib
import tempfile

from testbenches.harness import run_cocotb

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODULE = "testbenches.bus.cocotb_stream_blocks"
TRANSFERS = 4096
POINTS = [
    ("skid_buffer", {"width": 32}),
    ("skid_buffer", {"width": 512}),
    ("stream_fifo", {"width": 32, "depth": 16}),
    ("width_converter", {"input_width": 512, "output_width": 512, "element_width": 32}),
    ("width_converter", {"input_width": 512, "output_width": 128, "element_width": 32}),
    ("width_converter", {"input_width": 128, "output_width": 512, "element_width": 32}),
]


def measure(block, params):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run_cocotb(block, MODULE, params=params, testcase="throughput_without_stalls",
                   extra_env={"NEARTRAIN_BENCH_OUT": out.name, "NEARTRAIN_VECTORS": str(TRANSFERS)})
        return json.loads(pathlib.Path(out.name).read_text())


def main():
    logging.disable(logging.INFO)
    os.environ["NEARTRAIN_VECTORS"] = str(TRANSFERS)
    lines = ["| block | parameters | narrow-side transfers | cycles | transfers per cycle |",
             "|---|---|---:|---:|---:|"]
    for block, params in POINTS:
        result = measure(block, params)
        text = ", ".join(f"{k}={v}" for k, v in params.items())
        lines.append(f"| {block} | {text} | {result['transfers']} | {result['cycles']} | "
                     f"{result['transfers_per_cycle']:.3f} |")
        print(lines[-1], flush=True)
    doc = ROOT / "docs" / "bus.md"
    doc.write_text(
        "# Stream blocks\n\n"
        "## Throughput without stalls\n\n"
        "Cycles counted in cocotb on Verilator from the first to the last output transfer; the rate is "
        "(output transfers - 1) / (cycles - 1), in narrow-side transfers, "
        "with `valid` always offered and `ready` always high. A width converter's narrow side "
        "moves one transfer per cycle; its wide side one per ratio cycles.\n\n"
        "Command: `.venv/bin/python -m scripts.bench_bus`\n\n" + "\n".join(lines) + "\n\n"
        "## Under random stalls\n\n"
        "`make test` moves 4 × 30,000 transfers through each configuration (full rate, random "
        "`valid` gaps, random `ready` backpressure, both; 40% stall probability) and checks that "
        "nothing is lost, duplicated or reordered (`testbenches/bus/test_bus.py`).\n")
    print(f"wrote {doc}")


if __name__ == "__main__":
    main()
