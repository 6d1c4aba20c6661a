"""What the parts of :mod:`testbenches.systolic.bench_systolic` share: paths, tables, PE latencies."""

import json
import pathlib

from tabulate import tabulate

from golden.systolic.latencies import PE_LATENCY
from scripts.flow.docs import write_table

__all__ = ["ROOT", "OUT", "OS", "WS", "DOC", "COMMAND", "print_table", "write_json", "pe_latencies",
           "schedule"]

ROOT = pathlib.Path(__file__).resolve().parents[2]  # the repository: build/ is at its top
OUT = ROOT / "build" / "bench"
OS, WS = "output_stationary", "weight_stationary"
DOC = "systolic.md"
COMMAND = ".venv/bin/python -m testbenches.systolic.bench_systolic"


def print_table(headers, rows, colalign, name=None, command=None):
    """Print a table; with ``name``, also write it to docs/systolic.md (rows in docs/data/)."""
    print(tabulate(rows, headers=headers, tablefmt="github", colalign=colalign, disable_numparse=True),
          flush=True)
    if name:
        write_table(DOC, name, headers, rows, command, colalign=colalign, disable_numparse=True)


def pe_latencies(element):
    """(multiplier, adder) latency of the RTL PE's units, as documented (``golden.systolic.latencies``)."""
    return PE_LATENCY[element]


def schedule(element, dataflow, slots):
    """The cycle-model keyword arguments of an RTL array (the L and A its docstring gives)."""
    multiply, add = pe_latencies(element)
    if dataflow == OS:
        return {"tile": slots, "mac_latency": multiply + add + 2, "acc_latency": add}
    return {"mac_latency": multiply + add}


def write_json(name, value):
    """Write ``value`` as JSON to ``OUT / name``."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(json.dumps(value, indent=1, default=str))
