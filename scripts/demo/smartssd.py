"""``neartrain demo smartssd``: train a small PyTorch model with Smart-Infinity on N simulated SmartSSDs.

The model is an MLP defined here (2-64-64-3, ``tanh``, 4,547 parameters) on the spiral data of
:func:`scripts.demo.model.spiral` (nothing is downloaded), trained full batch with AdamW by
:class:`scripts.sim.devices.smartssd_torch.SmartInfinityOptimizer`: each step flattens the
gradient, optionally compresses it with Top-K and error feedback, cuts it over ``devices`` even
shards and updates each shard on its SmartSSD, on the Verilated kernels (``backend="rtl"``, every
device's outputs checked bit for bit against the golden models) or on the golden models. Beside it
the same model, from the same initial weights, is trained by ``torch.optim.AdamW`` (``foreach=False``,
dense gradients), and the two loss curves are printed side by side with each step's bytes on every link.

Use :func:`run_demo` from Python and :func:`format_report` to print it.
"""

import dataclasses
import time

import numpy as np

from scripts.demo.model import spiral

__all__ = ["DEFAULT_STEPS", "MAX_STEPS", "MAX_DEVICES", "HIDDEN", "HYPER", "SmartSSDDemoResult",
           "check_arguments", "run_demo", "format_report"]

DEFAULT_STEPS = 20
MAX_STEPS = 500
MAX_DEVICES = 64
HIDDEN = 64
# AdamW's hyper-parameters, for both optimizers (the rate that trains the spiral in tens of steps).
HYPER = {"lr": 0.02, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_arguments(*, devices=4, topk=None, backend="rtl", steps=DEFAULT_STEPS, seed=1, error_feedback=True):
    """Raise ValueError naming the first bad argument (torch missing included)."""
    from scripts.sim.devices.smartssd import BACKENDS

    if not _is_int(devices) or not 1 <= devices <= MAX_DEVICES:
        raise ValueError(f"devices must be an integer in [1, {MAX_DEVICES}], not {devices!r}")
    if topk is not None and (isinstance(topk, bool) or not isinstance(topk, float | int)
                             or not 0 < topk <= 1):
        raise ValueError(f"top-k ratio must be in (0, 1], not {topk!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if not _is_int(steps) or not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"steps must be an integer in [1, {MAX_STEPS}], not {steps!r}")
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, not {seed!r}")
    try:
        import torch  # noqa: F401
    except ImportError as error:
        raise ValueError(f"demo smartssd needs torch (pip install -e '.[torch]'): {error}") from None


def _model(seed):
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(2, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, HIDDEN),
                               torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 3))


@dataclasses.dataclass
class SmartSSDDemoResult:
    """Everything :func:`format_report` prints: per step the losses (before the step; one more, the
    final, after the last) and the :class:`~scripts.sim.devices.smartssd.StepReport`."""

    devices: int
    topk: float
    backend: str
    steps: int
    seed: int
    size: int
    loss: list
    loss_adamw: list
    reports: list
    seconds: float

    @property
    def bit_exact(self):
        """rtl: every device's every step equals golden; golden: trivially (it is the reference)."""
        return all(report.bit_exact is None or all(report.bit_exact) for report in self.reports)


def run_demo(*, devices=4, topk=None, backend="rtl", steps=DEFAULT_STEPS, seed=1, error_feedback=True):
    """Train with :class:`SmartInfinityOptimizer` and ``torch.optim.AdamW``; a :class:`SmartSSDDemoResult`."""
    check_arguments(devices=devices, topk=topk, backend=backend, steps=steps, seed=seed,
                    error_feedback=error_feedback)
    import torch

    from scripts.sim.devices.smartssd_torch import SmartInfinityOptimizer

    x, y = (torch.from_numpy(a) for a in spiral(seed=seed))
    ours, reference = _model(seed), _model(seed)
    optimizer = SmartInfinityOptimizer(ours.parameters(), "adamw", devices=devices, topk=topk,
                                       error_feedback=error_feedback, backend=backend, **HYPER)
    adamw = torch.optim.AdamW(reference.parameters(), foreach=False, **HYPER)
    loss_fn = torch.nn.CrossEntropyLoss()
    losses, reference_losses = [], []
    start = time.monotonic()
    try:
        for _ in range(steps):
            for model, stepper, curve in ((ours, optimizer, losses), (reference, adamw, reference_losses)):
                stepper.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                stepper.step()
                curve.append(float(loss.detach()))
    finally:
        optimizer.close()
    with torch.no_grad():
        losses.append(float(loss_fn(ours(x), y)))
        reference_losses.append(float(loss_fn(reference(x), y)))
    return SmartSSDDemoResult(devices=devices, topk=topk, backend=backend, steps=steps, seed=seed,
                              size=optimizer.array.param.size, loss=losses, loss_adamw=reference_losses,
                              reports=optimizer.reports, seconds=time.monotonic() - start)


def _verdict(report):
    if report.skipped:
        return "skipped"
    if report.bit_exact is None:
        return "golden"
    return "yes" if all(report.bit_exact) else "NO " + "".join("1" if ok else "0" for ok in report.bit_exact)


def format_report(result):
    """The demo's printout: set-up, one row per step, per-device bytes and the closing note."""
    from scripts.sim.devices.smartssd import DENSE_KERNEL, LINKS, TOPK_KERNEL

    kernel = (f"topk_updater {TOPK_KERNEL}" if result.topk is not None else f"adam_updater {DENSE_KERNEL}")
    gradient = f"Top-K {result.topk:g} with error feedback" if result.topk is not None else "dense"
    shard = result.size // result.devices
    lines = [
        f"model: torch MLP 2-{HIDDEN}-{HIDDEN}-3 (tanh), {result.size} parameters, spiral data (300 points), "
        f"full batch, seed {result.seed}",
        f"optimizer: AdamW {HYPER} on {result.devices} SmartSSDs (shards of {shard}-{shard + 1} parameters), "
        f"{gradient} gradients",
        "devices: " + (f"Verilated {kernel}, every device step checked bit for bit against golden"
                       if result.backend == "rtl" else "golden.optim and golden.compress NumPy models"),
        "reference: torch.optim.AdamW (foreach=False), same initial weights, dense gradients",
        "",
        f"{'step':>5}  {'loss':>9}  {'AdamW':>9}  {'sent':>6}  {'host->dev B':>11}  {'dev->host B':>11}  "
        f"{'ssd->fpga B':>11}  {'fpga->ssd B':>11}  bit-exact",
    ]
    for step, report in enumerate(result.reports):
        sums = [sum(report.links[link]) for link in LINKS]
        lines.append(f"{step + 1:>5}  {result.loss[step]:>9.6f}  {result.loss_adamw[step]:>9.6f}  "
                     f"{sum(report.sent):>6}  " + "  ".join(f"{value:>11}" for value in sums)
                     + f"  {_verdict(report)}")
    lines.append(f"{'final':>5}  {result.loss[-1]:>9.6f}  {result.loss_adamw[-1]:>9.6f}")
    lines.append("")
    lines.append("(loss at step k is before the k-th update; bytes summed over the devices; 'sent' is "
                 "gradient elements, pairs with Top-K)")
    ran = [report for report in result.reports if not report.skipped]
    for device in range(result.devices):
        per_link = ", ".join(f"{link} {sum(r.links[link][device] for r in ran)}" for link in LINKS)
        dram = ""
        if ran and ran[0].cycles:
            dram = (f", fpga_dram {sum(r.links['fpga_dram'][device] for r in ran)} (kernel AXI, measured), "
                    f"{np.mean([r.cycles[device] for r in ran]):.0f} cycles/step")
        lines.append(f"device {device}: bytes over {len(ran)} steps: {per_link}{dram}")
    exact = sum(1 for r in ran if r.bit_exact is not None and all(r.bit_exact))
    checked = f"{exact} of {len(ran)} steps bit-exact on every device" if result.backend == "rtl" else \
        "golden backend: no RTL to check"
    lines.append(f"{'PASS' if result.bit_exact else 'FAIL'}: {checked}; final loss {result.loss[-1]:.6f} "
                 f"against AdamW's {result.loss_adamw[-1]:.6f} "
                 f"({len(result.reports) - len(ran)} steps skipped); "
                 f"wall time {result.seconds:.0f} s")
    return "\n".join(lines)
