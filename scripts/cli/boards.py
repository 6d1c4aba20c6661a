"""``neartrain boards``, ``sweep``, ``bitstream``, ``results``, ``vitis``, ``board-demo``: blocks on devices.

Registered into :mod:`scripts.cli.main` through ``register(commands)``; every mistake a user can
make (unknown block or board, a bad ``--vary``, a board of the wrong target) is one line
and exit status 2, as for the other commands.
"""

import json
import os
import pathlib
import re

from scripts.flow.cache import BUILD

from .common import (
    UsageError,
    at_least_one,
    build_component,
    format_resource_table,
    lookup_block,
    parse_sets,
    writable_folder,
)
from .progress import elapsed

__all__ = ["register"]

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _board(name, *, target=None):
    from boards import get_board, reference_board

    try:
        board = get_board(name) if name else reference_board(target)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if target is not None and board.target != target:
        raise UsageError(f"board {board.name!r} is a {board.target} board, not {target}")
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

    rows = [(" ".join(f"{k}={point['params'][k]}" for k in result.names), point["resources"])
            for point in result.points if point["status"] == "ok"]
    if rows:
        print(format_resource_table(rows, result.target))
    for point in result.failed:
        label = " ".join(f"{k}={point['params'][k]}" for k in result.names)
        print(f"FAILED {label}: {point['reason']}")


def command_sweep(args):
    from scripts.flow.sweep import (
        fit_report,
        format_fit_report,
        parse_vary,
        plot_resources,
        run_sweep,
        write_csv,
    )

    block = lookup_block(args.block)
    board = _board(args.board, target=args.target)
    try:
        varied = parse_vary(block, args.vary or ())
    except ValueError as error:
        raise UsageError(str(error)) from None
    fixed = parse_sets(block, args.set)
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    if args.workers is not None and args.scheduler:
        raise UsageError("give --workers (a local cluster) or --scheduler (an existing one), not both")
    folder = writable_folder(args.output or BUILD / "sweep" / args.block)

    try:
        result = run_sweep(block, varied, target=args.target, fixed=fixed, workers=args.workers,
                           scheduler=args.scheduler, use_cache=not args.no_cache)
    except ConnectionError as error:
        raise UsageError(str(error)) from None
    csv_path = write_csv(result, folder / "sweep.csv")
    pictures = plot_resources(result, folder, board)
    if args.json:
        print(json.dumps({"block": result.block, "target": result.target, "board": board.name,
                          "varied": [[name, list(values)] for name, values in result.varied],
                          "points": result.points, "cached": result.cached, "failed": len(result.failed),
                          "fit": fit_report(result, board), "csv": str(csv_path),
                          "plots": [str(picture) for picture in pictures]}, indent=1, default=str))
        return 1 if result.failed else 0
    _print_points(result)
    print(f"{len(result.points)} points, {result.cached} served from the cache, {len(result.failed)} failed")
    for line in format_fit_report(fit_report(result, board), board):
        print(line)
    print(f"wrote {csv_path} and {len(pictures)} plots ({', '.join(p.name for p in pictures)})")


def _default_output(block, overrides):
    suffix = "".join(f"-{key}{value}" for key, value in overrides.items())
    return BUILD / "bitstream" / re.sub(r"[^A-Za-z0-9_.=-]", "_", block.name + suffix)


def _check_frequency(board, frequency_mhz):
    from rtl.eval_top import ecp5_pll_dividers

    input_hz = board.load_platform().lookup(board.clock_resource, 0).clock.frequency
    try:
        return ecp5_pll_dividers(input_hz=input_hz, output_hz=frequency_mhz * 1e6)
    except ValueError as error:
        raise UsageError(f"--freq: {error}") from None


def format_bitstream_summary(label, summary):
    """The lines ``neartrain bitstream`` prints: clock, Fmax and utilisation."""
    from scripts.flow.bitstream import stopped_reason

    pll = summary["pll"]
    # When scripts.flow.nextpnr_watch stopped nextpnr, one sentence says why instead of a bitstream path.
    stopped = stopped_reason(summary)
    lines = [f"{label} on {summary['board']} ({summary['device']}): {stopped or summary['bitstream']}",
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
    from scripts.flow.bitstream import BitstreamError, build_bitstream

    block = lookup_block(args.block)
    board = _board(args.board)
    if board.target != "ecp5" or board.platform is None:
        from boards import boards

        usable = ", ".join(name for name, known in boards().items() if known.platform)
        raise UsageError(f"board {board.name!r} has no open-toolchain flow (use one of: {usable})")
    if args.placer_seed < 0:
        raise UsageError(f"--placer-seed must be 0 or more, not {args.placer_seed}")
    _check_frequency(board, args.freq)
    overrides = parse_sets(block, args.set)
    component = build_component(block, overrides)
    folder = writable_folder(args.output or _default_output(block, overrides))
    try:
        with elapsed(f"bitstream {block.name} ({board.name}, {args.freq:g} MHz: Yosys, nextpnr, ecppack)"):
            summary = build_bitstream(component, board=board, output=folder, frequency_mhz=args.freq,
                                      seed=args.placer_seed, router=args.router)
    except BitstreamError as error:
        raise UsageError(str(error)) from None
    if args.json:
        print(json.dumps({"block": block.name, "params": block.resolve(overrides), **summary}, indent=1))
    else:
        label = block.name + "".join(f" {key}={value}" for key, value in overrides.items())
        print("\n".join(format_bitstream_summary(label, summary)))
    # No bitstream: the block was too large or did not route (the summary's first line says which).
    return 1 if summary["bitstream"] is None else 0


def command_results(args):
    from scripts.flow.results_table import write_results

    board = _board(args.board, target="ecp5")
    # The page is written after every block is measured (hours): a bad path is refused first.
    output = pathlib.Path(args.output)
    if output.is_dir():
        raise UsageError(f"output {str(output)!r} is a folder; give the page's file name")
    writable_folder(output.parent)
    tables = {}
    try:
        with elapsed(f"results ({board.name}, {args.freq:g} MHz)"):
            path = write_results(output, board=board, frequency_mhz=args.freq,
                                 with_fmax=not args.no_fmax, only=args.blocks, families=args.families,
                                 cached_only=args.cache_only, tables_out=tables, jobs=args.jobs)
    except ValueError as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(f"cannot write {str(output)!r}: {error.strerror}") from None
    if args.json:
        print(json.dumps({"page": str(path), "tables": tables}, indent=1, default=str))
    else:
        print(path)


def command_vitis(args):
    from scripts.vitis import KernelShapeError, write_kernel_tree

    block = lookup_block(args.block)
    overrides = parse_sets(block, args.set)
    component = build_component(block, overrides)
    folder = writable_folder(args.output or BUILD / "vitis" / (args.name or block.name))
    try:
        written = write_kernel_tree(component, name=args.name or block.name, output=folder,
                                    block_name=block.name, params=block.resolve(overrides))
    except KernelShapeError as error:
        raise UsageError(f"{block.name}: {error}") from None
    print("\n".join(str(path) for path in written))


def command_board_demo(args):
    from scripts.demo.board import DemoError, build_board, run_demo

    if (args.port is None) == (args.build is None):
        raise UsageError("board-demo needs either --port (run the demo) or --build DIR "
                             "(make the bitstream)")
    if args.build is not None:

        board = _board(args.board)
        folder = writable_folder(args.build)
        try:
            summary = build_board(board=board, output=folder, lanes=args.lanes, depth=args.depth,
                                  baud=args.baud)
        except DemoError as error:
            raise UsageError(str(error)) from None
        print(f"{summary['bitstream']} (UART divisor {summary['divisor']} for {args.baud} baud)")
        for clock, figures in summary["fmax"].items():
            print(f"Fmax {figures['achieved']:.2f} MHz for clock {clock} "
                  f"(constraint {figures['constraint']:g} MHz)")
        for column, use in summary["utilisation"].items():
            print(f"{column}: {use['used']} of {use['available']}")
        return
    try:
        ok = run_demo(port=args.port, baud=args.baud, elements=args.elements, seed=args.seed, step=args.step,
                      timeout=args.timeout, copy_format=args.copy_format)
    except DemoError as error:
        raise UsageError(str(error)) from None
    if not ok:
        raise SystemExit(1)


def register(commands):
    """Add ``boards``, ``sweep``, ``bitstream``, ``results``, ``vitis``, ``board-demo`` to ``neartrain``."""
    from boards.targets import TARGETS
    from scripts.flow.bitstream import DEFAULT_FREQUENCY_MHZ, DEFAULT_ROUTER, ROUTERS

    listing = commands.add_parser("boards", help="list the boards, their budgets and sources")
    listing.set_defaults(handler=command_boards)

    sweep = commands.add_parser("sweep", help="synthesise a cartesian product of parameters against a budget")
    sweep.add_argument("block")
    sweep.add_argument("--vary", action="append", metavar="KEY=V1,V2,...", help="a parameter to sweep")
    sweep.add_argument("--set", action="append", metavar="KEY=VALUE", help="a parameter held fixed")
    sweep.add_argument("--target", required=True, choices=TARGETS)
    sweep.add_argument("--board", help="budget to compare with (default: smartssd for xcup, "
                                        "ulx3s-85f for ecp5)")
    sweep.add_argument("--workers", type=int,
                       help=f"worker processes of a local Dask cluster (default {os.cpu_count() or 1}, the "
                            "cores); 1 synthesises here, one point after another, without Dask")
    sweep.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                       help="submit the points to this existing Dask scheduler instead")
    sweep.add_argument("--no-cache", action="store_true",
                       help="synthesise every point again (its cache entry is rewritten)")
    sweep.add_argument("--json", action="store_true", help="machine-readable output")
    sweep.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/sweep/BLOCK)")
    sweep.set_defaults(handler=command_sweep)

    bitstream = commands.add_parser("bitstream", help="build an ECP5 bitstream of a block; "
                                                      "report Fmax and utilisation",
                                    description="Build an ECP5 bitstream of a block and report its Fmax "
                                                "and utilisation. Exits 1, saying why in one line, when "
                                                "the block does not fit, place or route (nextpnr is "
                                                "stopped when its log shows it; the rules are in "
                                                "scripts/flow/nextpnr_watch.py).")
    bitstream.add_argument("block")
    bitstream.add_argument("--board", default="ulx3s-85f", help="an ECP5 board (default: ulx3s-85f)")
    bitstream.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a block parameter")
    bitstream.add_argument("--freq", type=float, default=DEFAULT_FREQUENCY_MHZ, metavar="MHZ",
                           help=f"clock constraint and PLL frequency (default {DEFAULT_FREQUENCY_MHZ:g})")
    bitstream.add_argument("--placer-seed", type=int, default=1, metavar="SEED",
                           help="nextpnr placer seed (default 1); --seed elsewhere seeds random data")
    bitstream.add_argument("--router", choices=ROUTERS, default=DEFAULT_ROUTER,
                           help=f"nextpnr router (default {DEFAULT_ROUTER}; router2 is faster on large "
                                "designs)")
    bitstream.add_argument("--json", action="store_true", help="machine-readable output")
    bitstream.add_argument("-o", "--output", metavar="DIR",
                           help="build folder (default build/bitstream/BLOCK)")
    bitstream.set_defaults(handler=command_bitstream)

    results = commands.add_parser("results", help="regenerate docs/results.md")
    results.add_argument("-o", "--output", default=str(ROOT / "docs" / "results.md"), metavar="FILE")
    results.add_argument("--board", default="ulx3s-85f", help="ECP5 board for the Fmax column")
    results.add_argument("--json", action="store_true", help="also print the tables as JSON")
    results.add_argument("--freq", type=float, default=DEFAULT_FREQUENCY_MHZ, metavar="MHZ")
    results.add_argument("--no-fmax", action="store_true", help="skip place and route")
    results.add_argument("--blocks", nargs="+", metavar="BLOCK", help="only these blocks")
    results.add_argument("--families", nargs="+", metavar="FAMILY", help="only blocks of these families")
    results.add_argument("--jobs", "-j", type=at_least_one(None), default=1, metavar="N",
                         help="block configurations measured at once, one per process (default 1; "
                              "nextpnr and Yosys use a core each)")
    results.add_argument("--cache-only", action="store_true",
                         help="run no tool: write the cached figures, 'not measured yet' for the rest")
    results.set_defaults(handler=command_results)

    vitis = commands.add_parser("vitis", help="write a Vitis RTL-kernel source tree (Verilog, kernel.xml, "
                                              "package_xo TCL, v++ configs, XRT host)")
    vitis.add_argument("block")
    vitis.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a block parameter")
    vitis.add_argument("--name", help="kernel name (default: the block name)")
    vitis.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/vitis/NAME)")
    vitis.set_defaults(handler=command_vitis)

    demo = commands.add_parser("board-demo", help="run one Adam step on the UART board demo and check it "
                                                  "against golden.optim")
    demo.add_argument("--port", help="serial device (/dev/ttyUSB0; needs pyserial) or "
                                      "socket://HOST:PORT (the simulation)")
    demo.add_argument("--build", metavar="DIR",
                      help="instead of running: build the demo bitstream for --board")
    demo.add_argument("--board", default="ulx3s-85f", help="ECP5 board for --build (default ulx3s-85f)")
    demo.add_argument("--lanes", type=int, default=1,
                      help="lanes for --build: 1 or 2 fit an LFE5U-85F, 4 do not")
    demo.add_argument("--depth", type=int, default=256, help="elements per tensor memory for --build")
    demo.add_argument("--baud", type=int, default=115200, help="serial baud rate (ignored for socket://)")
    demo.add_argument("--elements", type=int, default=32, help="tensor shard length")
    demo.add_argument("--copy-format", default="bf16", choices=("none", "f16", "bf16"),
                      help="16-bit parameter copy format")
    demo.add_argument("--step", type=int, default=3, help="Adam step number")
    demo.add_argument("--seed", type=int, default=1, help="random tensors seed")
    demo.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for any reply")
    demo.set_defaults(handler=command_board_demo)
