"""``neartrain demo ...``: demonstrations on the simulated kernels."""

import sys

from .common import Parser, UsageError

__all__ = ["register"]


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


def register(commands):
    """Add ``demo`` and its sub-commands."""
    from scripts.demo_train import DEFAULT_STEPS, MAX_STEPS, OPTIMIZERS

    demo = commands.add_parser("demo", help="demonstrations on the simulated kernels")
    demos = demo.add_subparsers(dest="demo", required=True, parser_class=Parser)
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

