"""``neartrain demo train``: train a small NumPy model with the Verilated RTL updater as its optimizer.

The model is :class:`scripts.demo.model.MLP` (2-32-32-3, ``tanh``, 1251 parameters) on
spiral data, trained full batch. Every step:

1. NumPy computes the loss and the gradient of the current parameters;
2. optionally, the gradient goes through Top-K compression on the "GPU side"
   (:func:`golden.compress.topk_compress`, or :class:`golden.compress.ErrorFeedbackCompressor`
   with error feedback) and is rebuilt dense by :func:`golden.compress.scatter`, the
   decompressor's exact semantics;
3. all parameters, flattened into one tensor, are updated by ONE run of the updater kernel
   (``adam_updater`` for Adam and AdamW, ``sgd_updater``, ``adagrad_updater``) through
   :func:`scripts.sim.devices.updater.run_program` (:func:`rtl_session`); the kernel's new
   parameters and states are compared bit for bit with
   :func:`golden.optim.host.reference_update` on the same inputs (the sign-off), and its status, error
   and guard bytes are checked.

Beside it, the same model is trained from the same initial parameters by a software
optimizer: ``torch.optim`` (Adam, AdamW, SGD or Adagrad, ``foreach=False``, the same
hyper-parameters) when torch is installed; otherwise a NumPy float32 transcription of the
algorithms in torch's documentation (written from those formulas, not from golden.optim).
Both trajectories compute their own gradients with the same NumPy code and the same Top-K
pipeline, so their loss curves should agree; they are not bit-identical because the RTL
rounds its square roots correctly and torch's vectorised CPU square root does not (see
docs/optim_golden.md), and the few-ulp differences grow slowly with the steps.

Use :func:`run_demo` from Python and :func:`format_report` to print it.
"""

import dataclasses
import math
import time

import numpy as np

from golden.compress import ErrorFeedbackCompressor, scatter, topk_compress
from golden.optim import adagrad_init_state, step_scalars
from golden.optim.host import STATE_NAMES, reference_update
from scripts.demo.model import DEFAULT_SIZES, MLP, spiral

__all__ = ["OPTIMIZERS", "DEFAULT_STEPS", "MAX_STEPS", "Mode", "DemoResult", "check_arguments", "run_demo",
           "rtl_session", "software_run", "format_report", "LOSS_TOLERANCE"]

# Demo optimizer name -> (updater kernel, default hyper-parameters as golden.optim keywords).
OPTIMIZERS = {
    "adam": ("adam", {"lr": 0.02, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-4,
                      "decoupled": False}),
    "adamw": ("adam", {"lr": 0.02, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01,
                       "decoupled": True}),
    "sgd": ("sgd", {"lr": 0.3, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False}),
    "adagrad": ("adagrad", {"lr": 0.1, "lr_decay": 0.0, "weight_decay": 0.0, "eps": 1e-10}),
}
DEFAULT_STEPS = 40
MAX_STEPS = 1000
# Documented agreement of the RTL and software loss curves: at every step
# |loss_RTL - loss_software| <= LOSS_TOLERANCE * max(1, loss_software). The two differ only by
# a few ulps of the square roots per step (see the module docstring); measured differences over
# 40 steps are below 1e-5 (docs/optim.md, "Demo").
LOSS_TOLERANCE = 1e-3


@dataclasses.dataclass(frozen=True)
class Mode:
    """How the gradient reaches the updater: dense, or Top-K ``ratio`` with or without error feedback."""

    ratio: float = None
    error_feedback: bool = False

    @property
    def label(self):
        if self.ratio is None:
            return "dense"
        return f"top-k {self.ratio * 100:g}%" + (" + EF" if self.error_feedback else "")


class _GradientPipeline:
    """GPU-side compression and FPGA-side rebuild of one run's gradients (identity when dense)."""

    def __init__(self, mode, size):
        self.mode, self.size = mode, size
        self.compressor = (ErrorFeedbackCompressor(size, ratio=mode.ratio)
                           if mode.ratio is not None and mode.error_feedback else None)

    def __call__(self, grad):
        """The dense float32 gradient the updater sees, and the number of elements sent."""
        if self.mode.ratio is None:
            return grad, grad.size
        if self.compressor is not None:
            indices, values = self.compressor.compress(grad)
        else:
            indices, values = topk_compress(grad, ratio=self.mode.ratio)
        return scatter(indices, values, self.size), int(indices.size)


def _initial_states(kernel, size):
    if kernel == "adagrad":
        return {"state_sum": adagrad_init_state(size, 0.0)}
    # SGD's buffer is not read at step 1 (the kernel's first_step flag), Adam's moments start at 0.
    return {name: np.zeros(size, np.float32) for name in STATE_NAMES[kernel]}


def kernel_params(lanes):
    """The kernel's parameters for ``lanes``: 512-bit port, a chunk of about 1024 elements.

    The chunk must be a multiple of ``lcm(lanes, 32)`` (lanes and 16-bit elements per beat), so
    a lane count that is not a power of two gets the nearest such multiple below 1024.
    """
    if not isinstance(lanes, int) or isinstance(lanes, bool):
        return {"lanes": lanes}
    step = math.lcm(max(lanes, 1), 32)
    return {"lanes": lanes, "chunk_elements": step * max(1, 1024 // step)}


def check_arguments(*, optimizer="adamw", steps=DEFAULT_STEPS, lanes=1, seed=1, ratio=None,
                    error_feedback=False, compare=False, lr=None):
    """Check the arguments: return ``(kernel, hyper, modes)``, or raise ValueError naming the bad one."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, not {optimizer!r}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"steps must be an integer in [1, {MAX_STEPS}], not {steps!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, not {seed!r}")
    if ratio is not None and not (isinstance(ratio, (int, float)) and not isinstance(ratio, bool)
                                  and 0 < ratio <= 1):
        raise ValueError(f"top-k ratio must be in (0, 1], not {ratio!r}")
    if error_feedback and ratio is None and not compare:
        raise ValueError("error feedback needs a top-k ratio (--topk RATIO)")
    kernel, hyper = OPTIMIZERS[optimizer]
    hyper = dict(hyper)
    if lr is not None:
        hyper["lr"] = lr
    # step_scalars raises ValueError naming a bad hyper-parameter. A value it accepts may still
    # overflow binary32 once combined (lr 1e300 gives a step size of -inf): refused here too. The
    # bias corrections make step 1 the largest; the last step is checked as well.
    for step in sorted({1, steps}):
        with np.errstate(over="ignore"):
            scalars = step_scalars(kernel, step=step, **hyper)
        bad = sorted(name for name, value in scalars.items() if not np.isfinite(value))
        if bad:
            raise ValueError(f"lr {hyper['lr']!r} is too large: the kernel's binary32 step scalars "
                             f"({', '.join(bad)}) overflow at step {step}")
    from rtl.registry import get_block

    get_block(f"{kernel}_updater").resolve(kernel_params(lanes))  # raises ValueError naming the range
    if compare:
        ratio = 0.01 if ratio is None else ratio
        modes = [Mode(), Mode(ratio), Mode(ratio, True)]
    else:
        modes = [Mode(ratio, bool(error_feedback) and ratio is not None)]
    return kernel, hyper, modes


def _problem(seed):
    model = MLP(DEFAULT_SIZES)
    x, y = spiral(seed=seed)
    return model, x, y, model.init(seed)


# -------------------------------------------------------------------- software side
def _torch_optimizer(optimizer, hyper, parameter):
    import torch

    common = {"lr": hyper["lr"], "weight_decay": hyper["weight_decay"], "foreach": False}
    if optimizer in ("adam", "adamw"):
        cls = torch.optim.AdamW if optimizer == "adamw" else torch.optim.Adam
        return cls([parameter], betas=hyper["betas"], eps=hyper["eps"], **common)
    if optimizer == "sgd":
        return torch.optim.SGD([parameter], momentum=hyper["momentum"], dampening=hyper["dampening"],
                               nesterov=hyper["nesterov"], **common)
    return torch.optim.Adagrad([parameter], lr_decay=hyper["lr_decay"], eps=hyper["eps"],
                               initial_accumulator_value=0.0, **common)


class _NumpyOptimizer:
    """torch.optim's documented algorithms (Adam, AdamW, SGD, Adagrad) in NumPy float32.

    Written from the pseudo-code in torch's documentation, with the bias corrections applied
    as torch's implementation does (``step_size = lr / bc1``, ``denom = sqrt(v) / sqrt(bc2) + eps``).
    """

    def __init__(self, optimizer, hyper, size):
        self.optimizer, self.hyper, self.t = optimizer, hyper, 0
        self.state = [np.zeros(size, np.float32), np.zeros(size, np.float32)]

    def step(self, p, g):
        h, f32 = self.hyper, np.float32
        self.t += 1
        t = self.t
        if self.optimizer in ("adam", "adamw"):
            beta1, beta2 = h["betas"]
            if self.optimizer == "adamw":
                p = p * f32(1 - h["lr"] * h["weight_decay"])
            elif h["weight_decay"]:
                g = g + f32(h["weight_decay"]) * p
            m, v = self.state
            m = m + (g - m) * f32(1 - beta1)
            v = v * f32(beta2) + f32(1 - beta2) * g * g
            self.state = [m, v]
            denom = np.sqrt(v) / f32(np.sqrt(1 - beta2 ** t)) + f32(h["eps"])
            return p - f32(h["lr"] / (1 - beta1 ** t)) * m / denom
        if self.optimizer == "sgd":
            if h["weight_decay"]:
                g = g + f32(h["weight_decay"]) * p
            if h["momentum"]:
                buf = g.copy() if t == 1 else self.state[0] * f32(h["momentum"]) + f32(1 - h["dampening"]) * g
                self.state[0] = buf
                g = g + f32(h["momentum"]) * buf if h["nesterov"] else buf
            return p - f32(h["lr"]) * g
        if h["weight_decay"]:
            g = g + f32(h["weight_decay"]) * p
        clr = f32(h["lr"] / (1 + (t - 1) * h["lr_decay"]))
        self.state[0] = self.state[0] + g * g
        return p - clr * g / (np.sqrt(self.state[0]) + f32(h["eps"]))


def software_backend(prefer="auto"):
    """``("torch", "torch <version>")`` when torch imports, else ``("numpy", <why>)``."""
    if prefer == "numpy":
        return "numpy", "NumPy float32 transcription of torch.optim's documented algorithm (asked for)"
    try:
        import torch
    except ImportError as error:
        if prefer == "torch":
            raise
        return "numpy", (f"NumPy float32 transcription of torch.optim's documented algorithm "
                         f"(torch is not installed: {error})")
    return "torch", f"torch.optim {torch.__version__} (foreach=False)"


def software_run(optimizer, hyper, mode, steps, seed, backend="torch"):
    """Train with the software optimizer; returns ``loss``, ``params``, ``accuracy`` like rtl_session."""
    model, x, y, initial = _problem(seed)
    pipeline = _GradientPipeline(mode, model.size)
    losses, params = [], []
    if backend == "torch":
        import torch

        parameter = torch.nn.Parameter(torch.from_numpy(initial.copy()))
        stepper = _torch_optimizer(optimizer, hyper, parameter)
    else:
        numpy_optimizer = _NumpyOptimizer(optimizer, hyper, model.size)
        param = initial.copy()
    for _ in range(steps):
        current = parameter.detach().numpy().copy() if backend == "torch" else param
        loss, grad = model.loss_and_grad(current, x, y)
        dense, _ = pipeline(grad)
        if backend == "torch":
            parameter.grad = torch.from_numpy(dense.copy())
            stepper.step()
            param = parameter.detach().numpy().copy()
        else:
            param = numpy_optimizer.step(current, dense).astype(np.float32)
        losses.append(loss)
        params.append(param.copy())
    losses.append(model.loss(param, x, y))
    return {"loss": losses, "params": params, "accuracy": model.accuracy(param, x, y)}


# -------------------------------------------------------------------- the demo
@dataclasses.dataclass
class DemoResult:
    """Everything :func:`format_report` prints; ``rtl[i]``, ``software[i]`` belong to ``modes[i]``."""

    optimizer: str
    kernel: str
    hyper: dict
    steps: int
    seed: int
    lanes: int
    modes: list
    rtl: list
    software: list
    software_name: str
    size: int
    seconds: float

    @property
    def bit_exact(self):
        """RTL == golden.optim (and clean status) at every step of every mode."""
        return all(all(run["bit_exact"]) and all(run["clean"]) for run in self.rtl)

    def max_param_difference(self, index):
        """Per step, max |p_RTL - p_software| of mode ``index``."""
        return [float(np.max(np.abs(a.astype(np.float64) - b)))
                for a, b in zip(self.rtl[index]["params"], self.software[index]["params"], strict=True)]

    def max_loss_difference(self, index):
        """max over the curve of |loss_RTL - loss_software| / max(1, loss_software)."""
        return max(abs(a - b) / max(1.0, abs(b))
                   for a, b in zip(self.rtl[index]["loss"], self.software[index]["loss"], strict=True))


async def rtl_session(device, payload):
    """Train every mode of ``payload`` on the simulated kernel (inside the simulation).

    The program :func:`run_demo` runs through :func:`scripts.sim.devices.updater.run_program`
    (``device`` is its :class:`~scripts.sim.devices.updater.UpdaterDevice`). Returns a list (one
    entry per mode) of dicts: ``loss`` (before each step, then the final),
    ``params`` (float32 parameters after each step), ``cycles``, ``sent``, ``bit_exact``
    (new parameters, states and status equal golden.optim), ``clean`` (no error bit, guard
    bytes intact), ``accuracy`` (final).
    """
    kernel, hyper, steps = payload["kernel"], payload["hyper"], payload["steps"]
    model, x, y, initial = _problem(payload["seed"])
    runs = []
    for mode in payload["modes"]:
        param = initial.copy()
        states = _initial_states(kernel, model.size)
        pipeline = _GradientPipeline(mode, model.size)
        run = {"loss": [], "params": [], "cycles": [], "sent": [], "bit_exact": [], "clean": []}
        for step in range(1, steps + 1):
            loss, grad = model.loss_and_grad(param, x, y)
            dense, sent = pipeline(grad)
            step_hyper = dict(hyper, step=step)
            result = await device.update(param, dense, states, step_hyper)
            expected = reference_update(kernel, param=param.view(np.uint32), grad=dense.view(np.uint32),
                                        states={k: v.view(np.uint32) for k, v in states.items()},
                                        hyper=step_hyper)
            names = ("param",) + STATE_NAMES[kernel]
            same = all(np.array_equal(result.outputs[name], expected[name]) for name in names)
            run["bit_exact"].append(same and result.status == int(expected["nonfinite"]))
            run["clean"].append(result.error == 0 and result.guards_intact)
            # Training continues from the kernel's outputs, whatever the check said.
            param = result.outputs["param"].view(np.float32)
            states = {name: result.outputs[name].view(np.float32) for name in STATE_NAMES[kernel]}
            run["loss"].append(loss)
            run["params"].append(param.copy())
            run["cycles"].append(result.cycles)
            run["sent"].append(sent)
        run["loss"].append(model.loss(param, x, y))
        run["accuracy"] = model.accuracy(param, x, y)
        runs.append(run)
    return runs


def run_demo(*, optimizer="adamw", steps=DEFAULT_STEPS, lanes=1, seed=1, ratio=None, error_feedback=False,
             compare=False, lr=None, software="auto"):
    """Train with the RTL updater and with the software optimizer; returns a :class:`DemoResult`.

    Arguments as ``neartrain demo train``; ``compare`` runs dense, Top-K ``ratio`` (default
    0.01) and Top-K with error feedback. ``software`` is ``"auto"`` (torch if installed),
    ``"torch"`` or ``"numpy"``. Raises ValueError on a bad argument (before any simulation).
    """
    from scripts.sim.devices import updater

    kernel, hyper, modes = check_arguments(optimizer=optimizer, steps=steps, lanes=lanes, seed=seed,
                                           ratio=ratio, error_feedback=error_feedback, compare=compare, lr=lr)
    backend, software_name = software_backend(software)
    start = time.monotonic()
    software_runs = [software_run(optimizer, hyper, mode, steps, seed, backend) for mode in modes]
    payload = {"kernel": kernel, "hyper": hyper, "steps": steps, "seed": seed, "modes": modes}
    rtl_runs = updater.run_program(kernel, rtl_session, payload, **kernel_params(lanes))
    return DemoResult(optimizer=optimizer, kernel=kernel, hyper=hyper, steps=steps, seed=seed, lanes=lanes,
                      modes=modes, rtl=rtl_runs, software=software_runs, software_name=software_name,
                      size=MLP(DEFAULT_SIZES).size, seconds=time.monotonic() - start)


def _hyper_text(hyper):
    return ", ".join(f"{key}={value}" for key, value in hyper.items())


def format_report(result):
    """The demo's printout: header, loss table, summary lines."""
    sizes = "-".join(str(s) for s in DEFAULT_SIZES)
    lines = [
        f"optimizer: {result.optimizer} ({_hyper_text(result.hyper)}), {result.steps} steps, full batch",
        f"model: NumPy MLP {sizes} (tanh), {result.size} parameters, spiral data (3 classes x 100 points), "
        f"seed {result.seed}",
        f"RTL: {result.kernel}_updater lanes={result.lanes} on Verilator, one kernel run per step on all "
        f"{result.size} parameters, each checked bit for bit against golden.optim",
        f"software: {result.software_name}, same initial parameters, same NumPy gradient code",
    ]
    for mode, run in zip(result.modes, result.rtl, strict=True):
        if mode.ratio is not None:
            compressor = "ErrorFeedbackCompressor" if mode.error_feedback else "topk_compress"
            lines.append(f"{mode.label}: {run['sent'][0]} of {result.size} gradient elements sent per step "
                         f"(golden.compress.{compressor}, rebuilt by golden.compress.scatter)")
    lines.append("")
    if len(result.modes) == 1:
        rtl, sw = result.rtl[0], result.software[0]
        differences = result.max_param_difference(0)
        lines.append(f"{'step':>5}  {'loss RTL':>10}  {'loss software':>13}  {'max|p_RTL-p_sw|':>15}  "
                     f"{'cycles':>6}  RTL==golden")
        for step in range(result.steps):
            exact = "yes" if rtl["bit_exact"][step] and rtl["clean"][step] else "NO"
            lines.append(f"{step + 1:>5}  {rtl['loss'][step]:>10.6f}  {sw['loss'][step]:>13.6f}  "
                         f"{differences[step]:>15.3e}  {rtl['cycles'][step]:>6}  {exact}")
        lines.append(f"{'final':>5}  {rtl['loss'][-1]:>10.6f}  {sw['loss'][-1]:>13.6f}")
    else:
        header = f"{'step':>5}"
        for mode in result.modes:
            header += f"  {mode.label + ' RTL':>17}  {'software':>9}"
        lines.append(header)
        for step in range(result.steps + 1):
            row = f"{'final' if step == result.steps else step + 1:>5}"
            for rtl, sw in zip(result.rtl, result.software, strict=True):
                row += f"  {rtl['loss'][step]:>17.6f}  {sw['loss'][step]:>9.6f}"
            lines.append(row)
    lines.append("")
    lines.append("(loss at step k is the loss before the k-th update; 'final' is after the last one)")
    for index, mode in enumerate(result.modes):
        rtl, sw = result.rtl[index], result.software[index]
        exact_steps = sum(a and b for a, b in zip(rtl["bit_exact"], rtl["clean"], strict=True))
        lines.append(f"{mode.label}: final loss RTL {rtl['loss'][-1]:.6f} (accuracy {rtl['accuracy']:.3f}), "
                     f"software {sw['loss'][-1]:.6f} (accuracy {sw['accuracy']:.3f})")
        lines.append(f"    max loss difference {result.max_loss_difference(index):.2e}, max parameter "
                     f"difference {max(result.max_param_difference(index)):.2e}; RTL == golden.optim at "
                     f"{exact_steps} of {result.steps} steps; {np.mean(rtl['cycles']):.0f} cycles per step")
    lines.append(f"{'PASS' if result.bit_exact else 'FAIL'}: RTL updater "
                 f"{'bit-exact with' if result.bit_exact else 'DIFFERS from'} golden.optim at every step; "
                 f"wall time {result.seconds:.0f} s")
    return "\n".join(lines)
