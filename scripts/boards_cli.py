"""``neartrain boards``, ``sweep``, ``bitstream`` and ``results``: sizing blocks against real devices.

Registered into :mod:`scripts.cli` through ``register(commands)``; every mistake a user can
make (unknown block or board, a bad ``--vary``, a board of the wrong target) is one line
and exit status 2, as for the other commands.
"""

import json
import os
import pathlib
import re

__all__ = ["register"]

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _usage_error():
    from scripts.cli import UsageError

    return UsageError


def _board(name, *, target=None):
    from boards import get_board, reference_board

    try:
        board = get_board(name) if name else reference_board(target)
    except ValueError as error:
        raise _usage_error()(str(error)) from None
    if target is not None and board.target != target:
        raise _usage_error()(f"board {board.name!r} is a {board.target} board, not {target}")
    return board


def command_boards(args):
    from boards import boards

    for board in boards().values():
        print(f"{board.name:<11} {board.title} [{board.target}]")
        for column, budget in board.budgets.items():
            print(f"    {column:<8} {budget:>10,}  {board.sources[column]}")
        for clock in board.clocks:
            print(f"    clock {clock.name}: {clock.hz / 1e6:g} MHz  {clock.source}")
        print(f"    memory: {board.memory}")
        if board.platform:
            print(f"    platform: {board.platform} (neartrain bitstream)")


def _print_points(result):
    from scripts.cli import format_resource_table

    rows = [(" ".join(f"{k}={point['params'][k]}" for k in result.names), point["resources"])
            for point in result.points if point["status"] == "ok"]
    if rows:
        print(format_resource_table(rows, result.target))
    for point in result.failed:
        label = " ".join(f"{k}={point['params'][k]}" for k in result.names)
        print(f"FAILED {label}: {point['reason']}")


def command_sweep(args):
    from scripts.cli import _lookup, _parse_sets, _writable_folder
    from scripts.sweep import fit_report, format_fit_report, parse_vary, plot_resources, run_sweep, write_csv

    UsageError = _usage_error()
    block = _lookup(args.block)
    board = _board(args.board, target=args.target)
    try:
        varied = parse_vary(block, args.vary or ())
    except ValueError as error:
        raise UsageError(str(error)) from None
    fixed = _parse_sets(block, args.set)
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    folder = _writable_folder(args.output)

    result = run_sweep(block, varied, target=args.target, fixed=fixed, workers=args.workers)
    csv_path = write_csv(result, folder / "sweep.csv")
    pictures = plot_resources(result, folder, board)
    _print_points(result)
    print(f"{len(result.points)} points, {result.cached} served from the cache, {len(result.failed)} failed")
    for line in format_fit_report(fit_report(result, board), board):
        print(line)
    print(f"wrote {csv_path} and {len(pictures)} plots ({', '.join(p.name for p in pictures)})")


def _default_output(block, overrides):
    suffix = "".join(f"-{key}{value}" for key, value in overrides.items())
    return ROOT / "build" / "bitstream" / re.sub(r"[^A-Za-z0-9_.=-]", "_", block.name + suffix)


def _check_frequency(board, frequency_mhz):
    from rtl.eval_top import ecp5_pll_dividers

    input_hz = board.load_platform().lookup(board.clock_resource, 0).clock.frequency
    try:
        return ecp5_pll_dividers(input_hz=input_hz, output_hz=frequency_mhz * 1e6)
    except ValueError as error:
        raise _usage_error()(f"--freq: {error}") from None


def format_bitstream_summary(label, summary):
    """The lines ``neartrain bitstream`` prints: clock, Fmax and utilisation."""
    pll = summary["pll"]
    lines = [f"{label} on {summary['board']} ({summary['device']}): {summary['bitstream']}",
             f"clock: {summary['requested_mhz']:g} MHz requested, PLL makes {summary['clock_mhz']:g} MHz "
             f"(CLKI_DIV {pll['CLKI_DIV']}, CLKFB_DIV {pll['CLKFB_DIV']}, CLKOP_DIV {pll['CLKOP_DIV']})"]
    for clock, figures in summary["fmax"].items():
        verdict = "PASS" if figures["pass"] else "FAIL"
        lines.append(f"Fmax {figures['achieved']:.2f} MHz for clock {clock} ({verdict} at "
                     f"{figures['constraint']:g} MHz)")
    lines.append("| resource | used | available | % |")
    lines.append("|---|---:|---:|---:|")
    for column, use in summary["utilisation"].items():
        lines.append(f"| {column} | {use['used']} | {use['available']} | "
                     f"{100 * use['used'] / use['available']:.2f} |")
    lines.append(f"evaluation top: {summary['input_bits']} input bits from the LFSR, "
                 f"{summary['output_bits']} output bits XOR-folded onto one pin; "
                 f"built in {summary['seconds']:.0f} s")
    return lines


def command_bitstream(args):
    from scripts.bitstream import BitstreamError, build_bitstream
    from scripts.cli import _build, _lookup, _parse_sets, _writable_folder

    UsageError = _usage_error()
    block = _lookup(args.block)
    board = _board(args.board)
    if board.target != "ecp5" or board.platform is None:
        from boards import boards

        usable = ", ".join(name for name, known in boards().items() if known.platform)
        raise UsageError(f"board {board.name!r} has no open-toolchain flow (use one of: {usable})")
    if args.seed < 0:
        raise UsageError(f"--seed must be 0 or more, not {args.seed}")
    _check_frequency(board, args.freq)
    overrides = _parse_sets(block, args.set)
    component = _build(block, overrides)
    folder = _writable_folder(args.output or _default_output(block, overrides))
    try:
        summary = build_bitstream(component, board=board, output=folder, frequency_mhz=args.freq,
                                  seed=args.seed)
    except BitstreamError as error:
        raise UsageError(str(error)) from None
    if args.json:
        print(json.dumps({"block": block.name, "params": block.resolve(overrides), **summary}, indent=1))
        return
    label = block.name + "".join(f" {key}={value}" for key, value in overrides.items())
    print("\n".join(format_bitstream_summary(label, summary)))


def command_results(args):
    from scripts.results_table import write_results

    board = _board(args.board, target="ecp5")
    try:
        path = write_results(pathlib.Path(args.output), board=board, frequency_mhz=args.freq,
                             with_fmax=not args.no_fmax, only=args.blocks, families=args.families)
    except ValueError as error:
        raise _usage_error()(str(error)) from None
    print(path)


def register(commands):
    """Add ``boards``, ``sweep``, ``bitstream`` and ``results`` to the ``neartrain`` command."""
    from scripts.bitstream import DEFAULT_FREQUENCY_MHZ
    from scripts.synth import TARGETS

    listing = commands.add_parser("boards", help="list the boards, their budgets and sources")
    listing.set_defaults(handler=command_boards)

    sweep = commands.add_parser("sweep", help="synthesise a cartesian product of parameters against a budget")
    sweep.add_argument("block")
    sweep.add_argument("--vary", action="append", metavar="KEY=V1,V2,...", help="a parameter to sweep")
    sweep.add_argument("--set", action="append", metavar="KEY=VALUE", help="a parameter held fixed")
    sweep.add_argument("--target", required=True, choices=TARGETS)
    sweep.add_argument("--board", help="budget to compare with (default: smartssd for xcup, "
                                        "ulx3s-85f for ecp5)")
    sweep.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel syntheses")
    sweep.add_argument("-o", "--output", required=True, metavar="DIR")
    sweep.set_defaults(handler=command_sweep)

    bitstream = commands.add_parser("bitstream", help="build an ECP5 bitstream of a block; "
                                                      "report Fmax and utilisation")
    bitstream.add_argument("block")
    bitstream.add_argument("--board", default="ulx3s-85f", help="an ECP5 board (default: ulx3s-85f)")
    bitstream.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a block parameter")
    bitstream.add_argument("--freq", type=float, default=DEFAULT_FREQUENCY_MHZ, metavar="MHZ",
                           help=f"clock constraint and PLL frequency (default {DEFAULT_FREQUENCY_MHZ:g})")
    bitstream.add_argument("--seed", type=int, default=1, help="nextpnr placer seed")
    bitstream.add_argument("--json", action="store_true", help="machine-readable output")
    bitstream.add_argument("-o", "--output", metavar="DIR",
                           help="build folder (default build/bitstream/BLOCK)")
    bitstream.set_defaults(handler=command_bitstream)

    results = commands.add_parser("results", help="regenerate docs/results.md")
    results.add_argument("-o", "--output", default=str(ROOT / "docs" / "results.md"), metavar="FILE")
    results.add_argument("--board", default="ulx3s-85f", help="ECP5 board for the Fmax column")
    results.add_argument("--freq", type=float, default=DEFAULT_FREQUENCY_MHZ, metavar="MHZ")
    results.add_argument("--no-fmax", action="store_true", help="skip place and route")
    results.add_argument("--blocks", nargs="+", metavar="BLOCK", help="only these blocks")
    results.add_argument("--families", nargs="+", metavar="FAMILY", help="only blocks of these families")
    results.set_defaults(handler=command_results)
