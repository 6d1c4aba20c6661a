"""``neartrain``: the command line of NearTrain.

Each sub-command lives in a module of this package with a ``register(commands)`` function:
:mod:`.blocks` (list, generate, synth), :mod:`.run` (run, verilog), :mod:`.demo` (demo ...),
:mod:`.boards` (boards, sweep, bitstream, results, vitis, board-demo), :mod:`.docs` (docs),
:mod:`.prove` (prove).
Exit status: 0 for success, 1 for a failing result (a stale doc, a failed proof, a block that does
not route), 2 for bad usage; errors print one line. ``--version`` prints the installed version.
"""

import sys

from scripts.sim import knobs

from . import blocks, boards, demo, docs, prove, run
from .common import Parser, UsageError, package_version

__all__ = ["main", "build_parser"]


def build_parser():
    parser = Parser(prog="neartrain", description="list blocks, generate Verilog with a manifest, "
                                                  "simulate, estimate resources")
    parser.add_argument("--version", action="version", version=f"neartrain {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in (blocks, demo, run, boards, docs, prove):
        module.register(commands)
    return parser


def main(argv=None):
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        knobs.check()  # a bad NEARTRAIN_* variable is refused before any work, not after it
        status = args.handler(args)
    except (UsageError, knobs.KnobError) as error:
        print(f"neartrain: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("neartrain: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (``| head``) closed the pipe: not an error of ours; leave without a traceback.
        sys.stdout = None
        return 0
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
