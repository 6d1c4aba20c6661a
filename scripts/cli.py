"""``neartrain``: list blocks, generate Verilog with a manifest, estimate resources.

Every command reads the block registry (:mod:`rtl.registry`), so a newly registered
block is available everywhere without changes here. Errors a user can cause (an unknown
block, a bad parameter, an unwritable folder) print one line and exit with status 2.
"""

import argparse
import json
import pathlib
import sys

__all__ = ["main", "UsageError"]


class UsageError(Exception):
    """A mistake in the command line or its inputs: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _parse_sets(block, assignments):
    overrides = {}
    for assignment in assignments or ():
        if "=" not in assignment:
            raise UsageError(f"--set expects key=value, not {assignment!r}")
        key, text = assignment.split("=", 1)
        try:
            overrides[key] = block.param(key).parse(text)
        except ValueError as error:
            raise UsageError(str(error)) from None
    return overrides


def _lookup(name):
    from rtl.registry import get_block

    try:
        return get_block(name)
    except ValueError as error:
        raise UsageError(str(error)) from None


def _build(block, overrides):
    try:
        return block.build(overrides)
    except ValueError as error:
        raise UsageError(f"{block.name}: {error}") from None


def _writable_folder(path):
    folder = pathlib.Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".neartrain-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise UsageError(f"cannot write to output folder {str(folder)!r}: {error.strerror}") from None
    return folder


def command_list(args):
    from rtl.registry import blocks

    registered = blocks()
    if args.json:
        print(json.dumps({name: {
            "family": block.family, "summary": block.summary,
            "params": [{"name": p.name, "type": p.type.__name__, "default": p.default,
                        "range": p.describe_range(), "help": p.help} for p in block.params],
        } for name, block in registered.items()}, indent=1))
        return
    for family in sorted({block.family for block in registered.values()}):
        print(f"[{family}]")
        for name, block in registered.items():
            if block.family != family:
                continue
            print(f"  {name:<22} {block.summary}")
            for p in block.params:
                print(f"      {p.name:<20} {p.type.__name__:<5} default={p.default!s:<8} "
                      f"range={p.describe_range():<16} {p.help}")


def _manifest(block, params, component):
    from rtl.elaborate import describe_timing, port_table, source_hash, tool_versions

    return {
        "block": block.name,
        "family": block.family,
        "top": "top",
        "params": params,
        "ports": port_table(component),
        "timing": describe_timing(component),
        "source_sha256": source_hash(),
        "tools": tool_versions(),
    }


def command_generate(args):
    from rtl.elaborate import to_verilog

    block = _lookup(args.block)
    overrides = _parse_sets(block, args.set)
    component = _build(block, overrides)
    folder = _writable_folder(args.output)
    verilog_path = folder / f"{block.name}.v"
    verilog_path.write_text(to_verilog(component))
    manifest_path = folder / f"{block.name}.json"
    manifest = _manifest(block, block.resolve(overrides), component)
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{verilog_path}\n{manifest_path}")


def format_resource_table(rows, target):
    """Render ``[(label, resources), ...]`` as a Markdown table for ``target``."""
    from boards.targets import RESOURCE_COLUMNS

    columns = RESOURCE_COLUMNS[target]
    lines = ["| block | " + " | ".join(columns) + " | mapper |",
             "|---|" + "---:|" * len(columns) + "---|"]
    for label, resources in rows:
        cells = []
        for column in columns:
            value = resources[column]
            cells.append(f"{value:g}" if isinstance(value, float) else str(value))
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {resources['mapper']} |")
    return "\n".join(lines)


def command_synth(args):
    from scripts.synth import SynthesisError, synthesize

    block = _lookup(args.block)
    overrides = _parse_sets(block, args.set)
    component = _build(block, overrides)
    try:
        resources = synthesize(component, args.target, use_cache=not args.no_cache)
    except SynthesisError as error:
        raise UsageError(str(error)) from None
    params = block.resolve(overrides)
    if args.json:
        print(json.dumps({"block": block.name, "target": args.target, "params": params,
                          "resources": resources}, indent=1))
        return
    label = block.name + "".join(f" {k}={v}" for k, v in overrides.items())
    print(format_resource_table([(label, resources)], args.target))


def command_demo_train(args):
    import logging

    import pytest

    from scripts import demo_train

    options = {"optimizer": args.optimizer, "steps": args.steps, "lanes": args.lanes, "seed": args.seed,
               "ratio": args.topk, "error_feedback": args.error_feedback, "compare": args.compare,
               "lr": args.lr}
    try:
        demo_train.check_arguments(**options)
    except ValueError as error:
        raise UsageError(str(error)) from None
    print("neartrain demo train: simulating the updater kernel (the first run builds it with Verilator, "
          "minutes; then a few seconds per step at most)", flush=True)
    logging.disable(logging.INFO)  # cocotb-test logs every compiler and simulator line at INFO
    try:
        result = demo_train.run_demo(**options)
    except pytest.fail.Exception as failure:
        print(f"neartrain: simulation failed: {failure}", file=sys.stderr)
        return 1
    finally:
        logging.disable(logging.NOTSET)
    print(demo_train.format_report(result))
    return 0 if result.bit_exact else 1


def _add_demo(commands):
    from scripts.demo_train import DEFAULT_STEPS, MAX_STEPS, OPTIMIZERS

    demo = commands.add_parser("demo", help="demonstrations on the simulated kernels")
    demos = demo.add_subparsers(dest="demo", required=True, parser_class=_Parser)
    train = demos.add_parser("train", help="train a NumPy MLP with the RTL updater as its optimizer")
    # Values are checked by scripts.demo_train.check_arguments, whose errors name the allowed range.
    train.add_argument("--optimizer", default="adamw", metavar="|".join(OPTIMIZERS))
    train.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                       help=f"1 to {MAX_STEPS} (default {DEFAULT_STEPS})")
    train.add_argument("--lanes", type=int, default=1, help="updater kernel lanes (default 1)")
    train.add_argument("--seed", type=int, default=1, help="data and initial parameters (default 1)")
    train.add_argument("--lr", type=float, default=None, help="learning rate (default: per optimizer)")
    train.add_argument("--topk", type=float, default=None, metavar="RATIO",
                       help="Top-K gradient compression, kept fraction in (0, 1]")
    train.add_argument("--error-feedback", action="store_true", help="Top-K with error feedback")
    train.add_argument("--compare", action="store_true",
                       help="dense, Top-K (--topk, default 0.01) and Top-K with error feedback side by side")
    train.set_defaults(handler=command_demo_train)


def build_parser():
    from boards.targets import TARGETS

    parser = _Parser(prog="neartrain", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    listing = commands.add_parser("list", help="show the registered blocks and their parameters")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=command_list)

    generate = commands.add_parser("generate", help="write Verilog and a JSON manifest")
    generate.add_argument("block")
    generate.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a block parameter")
    generate.add_argument("-o", "--output", required=True, metavar="DIR")
    generate.set_defaults(handler=command_generate)

    synth = commands.add_parser("synth", help="print a resource table from Yosys")
    synth.add_argument("block")
    synth.add_argument("--target", required=True, choices=TARGETS)
    synth.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a block parameter")
    synth.add_argument("--json", action="store_true", help="machine-readable output")
    synth.add_argument("--no-cache", action="store_true", help="synthesise again even if cached")
    synth.set_defaults(handler=command_synth)

    _add_demo(commands)
    for extension in _extensions():
        extension(commands)
    return parser


def _extensions():
    """Subcommands contributed by other modules (``register(commands)`` functions)."""
    import importlib

    found = []
    for module_name in ("scripts.main_job", "scripts.boards_cli"):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            continue
        found.append(module.register)
    return found


def main(argv=None):
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        status = args.handler(args)
    except UsageError as error:
        print(f"neartrain: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("neartrain: interrupted", file=sys.stderr)
        return 130
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
