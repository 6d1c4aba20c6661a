"""Measurements of the global control unit's blocks for ``docs/collective.md``.

Parts (each writes its table there):

* ``buffering``: the reduction unit's gradient storage in each order, from the RTL's own
  parameters (:attr:`rtl.collective.reduction_unit.ReductionUnit.lines`), against the leaves;
* ``area``: Yosys resources on ``xcup`` and ``ecp5`` of every collective block at its defaults
  and of the reduction unit in both orders.

Run as ``.venv/bin/python -m testbenches.collective.bench_collective <part>``.
"""

import argparse
import logging

from scripts.docs import write_table

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
)
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
    from scripts.synth import synthesize

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


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bench_collective", description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    parts.add_parser("buffering")
    parts.add_parser("area")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    {"buffering": buffering, "area": area}[args.part](args)


if __name__ == "__main__":
    main()
