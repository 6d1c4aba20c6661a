"""``neartrain run`` (``make run``) and ``neartrain verilog`` (``make verilog``).

The main job shows the whole flow on the default accelerator in a few minutes:

1. Verilog and a manifest for every registered block, in ``build/verilog/``;
2. a short cocotb simulation on Verilator, checked against the golden model;
3. a resource table from Yosys for the ``xcup`` target.
"""

import contextlib
import io
import logging
import os
import pathlib
import time

__all__ = ["register", "generate_all", "run_main_job"]

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The blocks whose resources the main job reports (default parameters).
REPORTED_BLOCKS = ("skid_buffer", "width_converter", "stream_fifo")
SMOKE_BLOCK = "width_converter"
SMOKE_MODULE = "testbenches.bus.cocotb_stream_blocks"
SMOKE_TRANSFERS = 2000


def generate_all(folder):
    """Write Verilog and a manifest for every registered block (default parameters) into ``folder``."""
    from rtl.registry import blocks
    from scripts.cli import command_generate

    class Args:
        set = None
        output = str(folder)

    written = []
    for name in blocks():
        Args.block = name
        with contextlib.redirect_stdout(io.StringIO()):
            command_generate(Args)
        written.append(name)
    return written


def _smoke_simulation():
    import pytest

    from testbenches.harness import run_cocotb

    saved = os.environ.get("NEARTRAIN_VECTORS")
    os.environ["NEARTRAIN_VECTORS"] = str(SMOKE_TRANSFERS)
    # cocotb-test logs every compiler and simulator line at INFO; the job prints its own summary.
    logging.disable(logging.INFO)
    try:
        run_cocotb(SMOKE_BLOCK, SMOKE_MODULE, testcase="stream_order_under_stalls")
    except pytest.fail.Exception as failure:
        return f"FAILED: {failure}"
    finally:
        logging.disable(logging.NOTSET)
        if saved is None:
            os.environ.pop("NEARTRAIN_VECTORS")
        else:
            os.environ["NEARTRAIN_VECTORS"] = saved
    return (f"passed: {SMOKE_TRANSFERS} transfers x 4 stall patterns through {SMOKE_BLOCK}, "
            f"bit-exact with golden.bus.regroup")


def run_main_job(args):
    from rtl.registry import get_block
    from scripts.cli import UsageError, format_resource_table
    from scripts.synth import synthesize

    started = time.monotonic()
    folder = ROOT / "build" / "verilog"
    print(f"== 1. Verilog for every registered block -> {folder.relative_to(ROOT)}/")
    print(f"   {len(generate_all(folder))} blocks generated")

    print(f"== 2. Smoke simulation (cocotb on Verilator): {SMOKE_BLOCK}")
    outcome = _smoke_simulation()
    print(f"   {outcome}")

    print("== 3. Resources (Yosys synth_xilinx -family xcup, default parameters)")
    rows = [(name, synthesize(get_block(name).build(), "xcup")) for name in REPORTED_BLOCKS]
    print(format_resource_table(rows, "xcup"))
    print(f"== done in {time.monotonic() - started:.0f} s")
    if outcome.startswith("FAILED"):
        raise UsageError("smoke simulation failed")


def command_verilog(args):
    for name in generate_all(pathlib.Path(args.output)):
        print(f"{args.output}/{name}.v")


def register(commands):
    """Add ``run`` and ``verilog`` to the ``neartrain`` command."""
    run = commands.add_parser("run", help="the main job: generate, simulate, report resources")
    run.set_defaults(handler=run_main_job)
    verilog = commands.add_parser("verilog", help="write Verilog for every registered block")
    verilog.add_argument("-o", "--output", default="build/verilog", metavar="DIR")
    verilog.set_defaults(handler=command_verilog)
