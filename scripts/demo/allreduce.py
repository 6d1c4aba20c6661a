"""``neartrain demo allreduce``: data-parallel training through the GCU, Adam applied in the network.

The model is :class:`scripts.demo.model.MLP` (2-H-H-3, ``tanh``; H = 32 by default: 1,251
parameters) on the spiral data of :func:`scripts.demo.model.spiral` (300 points), cut into ``leaves``
shards (:func:`numpy.array_split`). Every step:

1. each leaf computes the loss gradient of its own shard at its own copy of the parameters
   (NumPy, host side), flattened into lines of 14 binary32 words (zero padding);
2. the leaves all-reduce the gradients through the simulated switch of ``gcu_cluster`` (the GCU on
   its last port, built with ``update="adam"``): the GCU sums every line in leaf order and applies
   one Adam step (``rtl/collective/parameter_update.py``: ``grad_scale = 1/leaves`` turns the sum
   into the mean) to the parameters and moments it holds;
3. every leaf fetches the new parameters and continues from what it fetched.

The sliced all-reduce (``sliced_gcu_cluster``, a GCU slice per port) has no ``update="adam"``
(docs/collective.md, section 9), so the demo runs on the single-port ``gcu_cluster``. The leaves wait
for the new parameters before their next gradient: staleness 0, the step single-node Adam takes.

Checks (the result passes only if all hold): (a) at every step what every leaf fetched equals, bit
for bit, :func:`golden.collective.delayed_update_step` (leaf-order sum, then
:func:`golden.optim.adam`) on the same gradients from the golden's own state; (b) the full-batch loss
follows ``torch.optim.Adam`` (``foreach=False``) stepped on the float64 mean of the same leaves'
gradients, rounded once to binary32, from the same initial parameters, within :data:`LOSS_BOUND`;
(c) the GCU's error counters are zero, its overflow flag and Adam's non-finite flag clear.

Use :func:`run_demo` from Python and :func:`format_report` to print it.
"""

import dataclasses
import math
import time

import numpy as np

from golden.collective import LINE_WORDS
from scripts.demo.model import MLP, spiral

__all__ = ["LEAF_CHOICES", "DEFAULT_LEAVES", "DEFAULT_STEPS", "MAX_STEPS", "DEFAULT_HIDDEN", "HIDDEN_RANGE",
           "PARTITIONS", "HYPER", "LOSS_BOUND", "AllReduceDemoResult", "check_arguments", "cluster_params",
           "training_program", "torch_reference", "run_demo", "format_report"]

LEAF_CHOICES = range(2, 8)  # leaves on one 4- or 8-port switch beside the GCU
DEFAULT_LEAVES = 4
DEFAULT_STEPS = 10
MAX_STEPS = 200
DEFAULT_HIDDEN = 32
HIDDEN_RANGE = range(2, 65)
# The gradient is cut into 4 partitions, two of them in flight (the GCU's default slots): a leaf
# sends the third once it holds the first's new parameters.
PARTITIONS = 4
# torch.optim.Adam with an L2 weight decay (``decoupled=False``), as ``neartrain demo train --optimizer
# adam``: the decay is added to the mean gradient, so it also checks that the sum is scaled to the mean.
HYPER = {"lr": 0.02, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-4, "decoupled": False}
# Check (b): at every step |loss_RTL - loss_torch| <= LOSS_BOUND * max(1, loss_torch). The two
# trajectories take the same gradients up to rounding (the leaf-order sum times fl(1/N) against the
# mean rounded once; correctly rounded square root and division against torch's), which parts the
# parameters by about an ulp per step: 2.4e-5 over MAX_STEPS, moving the loss (gradient 1-norm about 8
# on this model) by 2e-4 at most; the factor of five above that covers elements whose leaves' gradients
# nearly cancel, where Adam's first steps amplify the sum's rounding (docs/collective.md, section 10).
LOSS_BOUND = 1e-3


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_arguments(*, leaves=DEFAULT_LEAVES, steps=DEFAULT_STEPS, hidden=DEFAULT_HIDDEN, seed=1):
    """Raise ValueError naming the first bad argument (torch missing included)."""
    if not _is_int(leaves) or leaves not in LEAF_CHOICES:
        raise ValueError(f"leaves must be an integer in {LEAF_CHOICES[0]}..{LEAF_CHOICES[-1]}, "
                         f"not {leaves!r}")
    if not _is_int(steps) or not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"steps must be an integer in [1, {MAX_STEPS}], not {steps!r}")
    if not _is_int(hidden) or hidden not in HIDDEN_RANGE:
        raise ValueError(f"hidden must be an integer in {HIDDEN_RANGE[0]}..{HIDDEN_RANGE[-1]}, "
                         f"not {hidden!r}")
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, not {seed!r}")
    try:
        import torch  # noqa: F401
    except ImportError as error:
        raise ValueError(f"demo allreduce needs torch (pip install -e '.[torch]'): {error}") from None


def cluster_params(leaves, size):
    """The ``gcu_cluster`` build for ``leaves`` leaves and ``size`` parameters: the smallest switch
    with a port per leaf and one for the GCU, :data:`PARTITIONS` partitions of as many lines as
    ``size`` needs, and the Adam step (one lane). For 3 leaves and up to 112 parameters this is
    ``test_gcu``'s ``3_leaves_adam`` build."""
    from scripts.sim.devices.collective import switch_size

    chunks = math.ceil(math.ceil(size / LINE_WORDS) / PARTITIONS)
    return {"nodes": switch_size(leaves + 1), "leaves": leaves, "partitions": PARTITIONS, "chunks": chunks,
            "update": "adam"}


def _shards(leaves, seed):
    x, y = spiral(seed=seed)
    return x, y, np.array_split(np.arange(len(y)), leaves)


def _lines(vector, shape):
    """A float32 vector as uint32 lines of ``shape`` ``(partitions, chunks, 14)``, zero padded."""
    padded = np.zeros(int(np.prod(shape)), np.float32)
    padded[:vector.size] = vector
    return padded.view(np.uint32).reshape(shape)


async def training_program(tb, payload):
    """Train inside the simulation (:func:`scripts.sim.devices.collective.run_program`; ``tb`` is its
    :class:`~scripts.sim.devices.collective.AllReduceTB`). Returns a dict: ``loss`` (full batch, at
    leaf 0's parameters, before each step, then the final), ``params`` (leaf 0's after each step),
    ``bit_exact`` (per step, per leaf), ``cycles`` (per step), ``counters``, ``nonfinite``, ``accuracy``."""
    model = MLP(payload["sizes"])
    x, y, shards = _shards(len(tb.leaves), payload["seed"])
    shape = (tb.partitions, tb.chunks, LINE_WORDS)
    tb.hyper = payload["hyper"]
    initial = model.init(payload["seed"])
    zeros = np.zeros(shape, np.uint32)
    await tb.load([_lines(initial, shape), zeros, zeros])
    params = [initial] * len(tb.leaves)  # each leaf's own copy
    run = {"loss": [], "params": [], "bit_exact": [], "cycles": []}
    for step in range(payload["steps"]):
        run["loss"].append(model.loss(params[0], x, y))
        gradients = np.stack([_lines(model.loss_and_grad(param, x[shard], y[shard])[1], shape)
                              for param, shard in zip(params, shards, strict=True)])
        started = tb.cycle
        fetched, golden = await tb.all_reduce(step, gradients)
        run["cycles"].append(tb.cycle - started)
        run["bit_exact"].append([bool(np.array_equal(lines, golden)) for lines in fetched])
        # Every leaf goes on from what it fetched, whatever the check said.
        params = [lines.reshape(-1).view(np.float32)[:model.size].copy() for lines in fetched]
        run["params"].append(params[0])
    run["loss"].append(model.loss(params[0], x, y))
    run["accuracy"] = model.accuracy(params[0], x, y)
    run["counters"] = tb.counters()
    run["nonfinite"] = int(tb.dut.update_nonfinite.value)
    return run


def torch_reference(sizes, leaves, steps, seed, hyper):
    """Single-node ``torch.optim.Adam`` on the mean of the leaves' shard gradients (the same NumPy
    gradient code), from the same initial parameters: the losses (as :func:`training_program`'s) and
    the parameters after each step."""
    import torch

    model = MLP(sizes)
    x, y, shards = _shards(leaves, seed)
    parameter = torch.nn.Parameter(torch.from_numpy(model.init(seed)))
    adam = torch.optim.Adam([parameter], lr=hyper["lr"], betas=hyper["betas"], eps=hyper["eps"],
                            weight_decay=hyper["weight_decay"], foreach=False)
    losses, params = [], []
    for _ in range(steps):
        current = parameter.detach().numpy().copy()
        losses.append(model.loss(current, x, y))
        grads = np.stack([model.loss_and_grad(current, x[shard], y[shard])[1] for shard in shards])
        parameter.grad = torch.from_numpy(grads.astype(np.float64).mean(axis=0).astype(np.float32))
        adam.step()
        params.append(parameter.detach().numpy().copy())
    losses.append(model.loss(params[-1], x, y))
    return losses, params


@dataclasses.dataclass
class AllReduceDemoResult:
    """Everything :func:`format_report` prints."""

    leaves: int
    steps: int
    hidden: int
    seed: int
    size: int
    params: dict
    loss: list
    loss_torch: list
    param_deviation: list
    bit_exact: list
    cycles: list
    counters: dict
    nonfinite: int
    accuracy: float
    seconds: float

    @property
    def loss_ratio(self):
        """max over the steps of |loss_RTL - loss_torch| / (LOSS_BOUND * max(1, loss_torch)): <= 1 passes."""
        return max(abs(a - b) / (LOSS_BOUND * max(1.0, abs(b)))
                   for a, b in zip(self.loss, self.loss_torch, strict=True))

    @property
    def checks(self):
        """``{name: passed}`` of checks (a), (b) and (c)."""
        return {"a": all(all(step) for step in self.bit_exact), "b": self.loss_ratio <= 1,
                "c": not any(self.counters.values()) and not self.nonfinite}

    @property
    def ok(self):
        return all(self.checks.values())


def run_demo(*, leaves=DEFAULT_LEAVES, steps=DEFAULT_STEPS, hidden=DEFAULT_HIDDEN, seed=1):
    """Train through the GCU and with ``torch.optim.Adam``; an :class:`AllReduceDemoResult`. Raises
    ValueError on a bad argument (before any simulation)."""
    from scripts.sim.devices.collective import run_program

    check_arguments(leaves=leaves, steps=steps, hidden=hidden, seed=seed)
    sizes = (2, hidden, hidden, 3)
    size = MLP(sizes).size
    start = time.monotonic()
    loss_torch, params_torch = torch_reference(sizes, leaves, steps, seed, HYPER)
    params = cluster_params(leaves, size)
    run = run_program(params, training_program,
                      {"sizes": sizes, "steps": steps, "seed": seed, "hyper": HYPER}, salt=seed)
    deviation = [float(np.max(np.abs(ours.astype(np.float64) - theirs)))
                 for ours, theirs in zip(run["params"], params_torch, strict=True)]
    return AllReduceDemoResult(leaves=leaves, steps=steps, hidden=hidden, seed=seed, size=size, params=params,
                               loss=run["loss"], loss_torch=loss_torch, param_deviation=deviation,
                               bit_exact=run["bit_exact"], cycles=run["cycles"], counters=run["counters"],
                               nonfinite=run["nonfinite"], accuracy=run["accuracy"],
                               seconds=time.monotonic() - start)


def _verdict(passed):
    return "PASS" if passed else "FAIL"


def format_report(result):
    """The demo's printout: set-up, one row per step, the three checks and the overall verdict."""
    p = result.params
    shards = [len(shard) for shard in np.array_split(np.arange(300), result.leaves)]
    hyper = ", ".join(f"{key}={value}" for key, value in HYPER.items() if key != "decoupled")
    lines = [
        f"model: NumPy MLP 2-{result.hidden}-{result.hidden}-3 (tanh), {result.size} parameters, spiral data "
        f"(300 points), seed {result.seed}; shards of {'/'.join(map(str, shards))} points, one per leaf",
        f"network: gcu_cluster, {result.leaves} leaves and the GCU on a {p['nodes']}-port switch, "
        f"{p['partitions']} partitions x {p['chunks']} lines of 14 binary32; Adam ({hyper}) in the GCU",
        "reference: torch.optim.Adam (foreach=False) on the mean of the leaves' gradients, same initial "
        "parameters",
        "",
        f"{'step':>5}  {'loss RTL':>10}  {'loss torch':>10}  {'|difference|':>12}  {'max|p - p_torch|':>16}  "
        f"{'cycles':>6}  fetched == golden",
    ]
    for step in range(result.steps):
        exact = "".join("1" if ok else "0" for ok in result.bit_exact[step])
        lines.append(f"{step + 1:>5}  {result.loss[step]:>10.6f}  {result.loss_torch[step]:>10.6f}  "
                     f"{abs(result.loss[step] - result.loss_torch[step]):>12.3e}  "
                     f"{result.param_deviation[step]:>16.3e}  {result.cycles[step]:>6}  "
                     f"{'yes' if all(result.bit_exact[step]) else 'NO'} ({exact})")
    lines.append(f"{'final':>5}  {result.loss[-1]:>10.6f}  {result.loss_torch[-1]:>10.6f}  "
                 f"{abs(result.loss[-1] - result.loss_torch[-1]):>12.3e}")
    lines.append("")
    lines.append("(loss at step k is the full-batch loss before the k-th update, at leaf 0's parameters; "
                 "'fetched == golden' has a digit per leaf)")
    checks = result.checks
    exact_steps = sum(all(step) for step in result.bit_exact)
    lines.append(f"check (a) {_verdict(checks['a'])}: every leaf's fetched parameters bit-exact with "
                 f"golden.collective.delayed_update_step at {exact_steps} of {result.steps} steps")
    lines.append(f"check (b) {_verdict(checks['b'])}: |loss_RTL - loss_torch| <= {LOSS_BOUND:g} * max(1, "
                 f"loss_torch) at every step: worst {result.loss_ratio:.2e} of the bound; max parameter "
                 f"deviation {max(result.param_deviation):.2e}")
    raised = {name: value for name, value in result.counters.items() if value}
    lines.append(f"check (c) {_verdict(checks['c'])}: GCU error counters "
                 f"{'all zero' if not raised else raised}, Adam non-finite flag {result.nonfinite}")
    lines.append(f"{_verdict(result.ok)}: final loss {result.loss[-1]:.6f} (accuracy {result.accuracy:.3f}) "
                 f"against torch's {result.loss_torch[-1]:.6f}; {np.mean(result.cycles):.0f} cycles per "
                 f"step; wall time {result.seconds:.0f} s")
    return "\n".join(lines)


COMMAND = ".venv/bin/python -m scripts.demo.allreduce"
# The runs docs/collective.md shows: the default demo, and 2 leaves for twice the steps.
DOC_RUNS = ({"leaves": 4, "steps": DEFAULT_STEPS}, {"leaves": 2, "steps": 2 * DEFAULT_STEPS})


def write_docs():
    """Run the demo (:data:`DOC_RUNS`) and write its tables into docs/collective.md."""
    from scripts.flow.docs import write_table

    results = [run_demo(**run) for run in DOC_RUNS]
    failed = [result.leaves for result in results if not result.ok]
    if failed:
        raise SystemExit(f"demo allreduce failed at {failed} leaves; tables not written")
    rows = [[r.leaves, r.steps, r.size, r.params["nodes"], r.params["partitions"] * r.params["chunks"],
             f"{np.mean(r.cycles):.0f}", f"{r.loss[0]:.4f}", f"{r.loss[-1]:.4f}", f"{r.loss_torch[-1]:.4f}",
             f"{max(abs(a - b) for a, b in zip(r.loss, r.loss_torch, strict=True)):.1e}",
             f"{r.loss_ratio:.1e}", f"{max(r.param_deviation):.1e}",
             f"{sum(all(step) for step in r.bit_exact)} of {r.steps}", f"{r.seconds:.0f}"]
            for r in results]
    write_table("collective.md", "collective-demo-allreduce",
                ["leaves", "steps", "parameters", "switch ports", "lines", "cycles per step", "loss, first",
                 "loss, final", "torch loss, final", "max loss difference", "of the bound",
                 "max parameter deviation", "steps bit-exact", "wall time s (build included if not cached)"],
                rows, COMMAND, disable_numparse=True)
    first = results[0]
    steps = [[step + 1 if step < first.steps else "final", f"{first.loss[step]:.6f}",
              f"{first.loss_torch[step]:.6f}", f"{abs(first.loss[step] - first.loss_torch[step]):.1e}",
              f"{first.param_deviation[step]:.1e}" if step < first.steps else ""]
             for step in range(first.steps + 1)]
    write_table("collective.md", "collective-demo-allreduce-steps",
                ["step", f"loss, {first.leaves} leaves through the GCU", "loss, torch.optim.Adam",
                 "loss difference", "max parameter deviation after the step"], steps, COMMAND,
                disable_numparse=True)


if __name__ == "__main__":
    # Through the module's own name: the simulation unpickles training_program by its module's name,
    # and this run's __main__ is not the simulator's.
    from scripts.demo import allreduce

    allreduce.write_docs()
