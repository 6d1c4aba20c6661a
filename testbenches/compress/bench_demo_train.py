"""The Top-K training demo's figures for docs/compress.md and docs/optim.md, from real runs.

Run: ``.venv/bin/python -m testbenches.compress.bench_demo_train [--optimizer adamw] [--optimizer sgd]``
(default both). Each optimizer is one ``neartrain demo train --compare``
(:func:`scripts.demo.train.run_demo`): dense, Top-K 1 % and Top-K 1 % with error feedback,
40 steps, every step on the Verilated updater kernel. The bench stops if any step's RTL differs
from ``golden.optim``, so every figure written is of a bit-exact run. It writes, through
:func:`scripts.flow.docs.write_table`:

* ``demo-topk-losses`` (docs/compress.md): each mode's loss at steps 1, 10, 20, 30, the final loss
  and accuracy;
* ``optim-demo`` (docs/optim.md): the dense runs against ``torch.optim`` (loss, largest
  loss and parameter differences, kernel cycles per step);

and ``docs/compress_topk_losses.png``, the loss curves. Each run's curves are kept in
``build/bench/demo-train-<optimizer>.json``, so a run of one optimizer keeps the other's rows and curves;
``--from-build`` rewrites the tables and the plot from them without simulating.
Simulated cycles only; nothing is timed on the wall clock.
"""

import argparse
import json

from scripts.flow.docs import kept_rows, write_table
from scripts.sim.runner import BUILD_ROOT

OPTIMIZERS = ("adamw", "sgd")
COMMAND = ".venv/bin/python -m testbenches.compress.bench_demo_train"
TO_TORCH = "max loss difference to torch (relative)"
LOSS_TABLE = "demo-topk-losses"
LOSS_HEADERS = ["optimizer", "gradient", "loss, step 1", "step 10", "step 20", "step 30", "final loss",
                "final accuracy", TO_TORCH]
DEMO_TABLE = "optim-demo"
DEMO_HEADERS = ["optimizer", "loss, step 1 → final (RTL)", "final loss, torch", TO_TORCH,
                "max parameter difference", "cycles per step", "steps RTL == golden.optim"]
PLOT = "compress_topk_losses.png"


def _curves_path(optimizer):
    return BUILD_ROOT / "bench" / f"demo-train-{optimizer}.json"


def measure(optimizer):
    """Run the comparison for ``optimizer``; keep and return its curves (one dict per mode)."""
    import numpy as np

    from scripts.demo.train import run_demo

    result = run_demo(optimizer=optimizer, compare=True, software="torch")  # torch.optim, not the fallback
    if not result.bit_exact:
        raise AssertionError(f"{optimizer}: the RTL updater differs from golden.optim; nothing written")
    runs = [{"optimizer": optimizer, "mode": mode.label, "loss": [float(v) for v in rtl["loss"]],
             "software_loss": [float(v) for v in software["loss"]], "accuracy": float(rtl["accuracy"]),
             "max_loss_difference": result.max_loss_difference(index),
             "max_param_difference": max(result.max_param_difference(index)),
             "cycles_per_step": float(np.mean(rtl["cycles"])), "steps": result.steps,
             "exact_steps": int(sum(rtl["bit_exact"]))}
            for index, (mode, rtl, software) in enumerate(zip(result.modes, result.rtl, result.software,
                                                              strict=True))]
    path = _curves_path(optimizer)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(runs, indent=1) + "\n")
    return runs


def _loss_row(run):
    loss = run["loss"]
    return [run["optimizer"], run["mode"], *(f"{loss[step - 1]:.4f}" for step in (1, 10, 20, 30)),
            f"{loss[-1]:.4f}", f"{run['accuracy']:.3f}", f"{run['max_loss_difference']:.1e}"]


def _demo_row(run):
    loss = run["loss"]
    return [run["optimizer"], f"{loss[0]:.4f} → {loss[-1]:.4f}", f"{run['software_loss'][-1]:.4f}",
            f"{run['max_loss_difference']:.1e}", f"{run['max_param_difference']:.1e}",
            f"{run['cycles_per_step']:.0f}", f"{run['exact_steps']} of {run['steps']}"]


def write(runs, measured):
    """Write both tables (rows of optimizers not ``measured`` now are kept) and the plot."""
    def others(row):
        return row[0] not in measured

    write_table("compress.md", LOSS_TABLE, LOSS_HEADERS,
                kept_rows(LOSS_TABLE, LOSS_HEADERS, others) + [_loss_row(run) for run in runs],
                COMMAND, disable_numparse=True)
    write_table("optim.md", DEMO_TABLE, DEMO_HEADERS,
                kept_rows(DEMO_TABLE, DEMO_HEADERS, others) + [_demo_row(run) for run in runs
                                                               if run["mode"] == "dense"],
                COMMAND, disable_numparse=True)
    plot()


def plot():
    """``docs/compress_topk_losses.png`` from every optimizer's kept curves."""
    from scripts.flow.figures import docs_plot

    styles = {"adamw": "-", "sgd": "--"}  # the line tells the optimizer, the colour the gradient
    colours = {}
    with docs_plot(PLOT, xlabel="step (the last point: after the final step)",
                   ylabel="training loss (before the step; RTL updater)",
                   title="Spiral MLP, 1,251 parameters: dense against Top-K 1 %", from_zero=True,
                   legend_size=8) as axis:
        for optimizer in OPTIMIZERS:
            path = _curves_path(optimizer)
            if not path.exists():
                continue
            for run in json.loads(path.read_text()):
                colour = colours.setdefault(run["mode"], f"C{len(colours)}")
                axis.plot(range(1, len(run["loss"]) + 1), run["loss"], styles[optimizer], color=colour,
                          label=f"{optimizer}, {run['mode']}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimizer", action="append", choices=OPTIMIZERS,
                        help="measure only these (default: all; the others' stored rows are kept)")
    parser.add_argument("--from-build", action="store_true",
                        help="no simulation: rewrite the tables and the plot from the kept curves")
    args = parser.parse_args(argv)
    measured = args.optimizer or list(OPTIMIZERS)
    if args.from_build:
        runs = [run for optimizer in measured for run in json.loads(_curves_path(optimizer).read_text())]
    else:
        runs = [run for optimizer in measured for run in measure(optimizer)]
    write(runs, measured)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
