"""Parameter sweeps: synthesise every point of a cartesian product and compare with a budget.

The client elaborates each point (elaboration is cached in ``build/elaboration/``) and looks
its Verilog up in the synthesis cache (:func:`scripts.flow.synth.cached_resources`, keyed by the
Verilog and the Yosys version). Every point not found there becomes one task,
:func:`synthesise_point`, keyed by that same content hash, run either in this process, one
after another (``workers=1``), or on ``dask.distributed``: a ``LocalCluster`` of ``workers``
processes, or an existing cluster at ``scheduler`` (see :mod:`scripts.flow.sweep_cluster`). A
worker looks in its own cache first; the client files what comes back into its own cache
under the same key, so a point that a cluster computed is served locally next time.

A point that fails to elaborate or to synthesise is recorded as ``failed`` with a one-line
reason (and, for a Yosys failure, the path of its log here); the other points go on.
"""

import csv
import itertools
import os
import pathlib
import sys
import time
from dataclasses import dataclass, field

from tqdm import tqdm

from scripts.cli.param_text import parse_param

__all__ = ["parse_vary", "sweep_points", "run_sweep", "write_csv", "plot_resources", "fit_report",
           "format_fit_report", "one_line", "synthesise_point", "SweepResult"]


def parse_vary(block, texts):
    """Turn ``["key=v1,v2", ...]`` into ``[(key, [value, ...]), ...]``, each value validated.

    Raises
    ------
    ValueError
        On a malformed assignment, an unknown or repeated key, or a value the parameter
        rejects when parsed (type, range or choice).
    """
    varied = []
    for text in texts:
        key, separator, values = text.partition("=")
        key = key.strip()
        if not separator or not key or not values.strip():
            raise ValueError(f"--vary expects key=v1,v2,..., not {text!r}")
        if key in (name for name, _ in varied):
            raise ValueError(f"--vary names {key!r} twice")
        param = block.param(key)
        varied.append((key, [parse_param(param, value.strip()) for value in values.split(",")]))
    if not varied:
        raise ValueError("give at least one --vary key=v1,v2,...")
    return varied


def sweep_points(varied, fixed=None):
    """Every combination of the varied values, in order, each merged over ``fixed``."""
    names = [name for name, _ in varied]
    return [{**(fixed or {}), **dict(zip(names, values, strict=True))}
            for values in itertools.product(*(values for _, values in varied))]


def one_line(error):
    """``"ErrorType: first line of the message"``, at most 200 characters, for a CSV cell."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:200]


def synthesise_point(verilog_text, target, use_cache=True):
    """The task of one point: synthesise ``verilog_text``, from this host's cache when it can.

    Runs wherever the point is scheduled (this process or a Dask worker); it needs the
    project and its pinned Yosys installed there, not the client's ``build/``.

    Returns
    -------
    dict
        ``resources`` (see :func:`scripts.flow.synth.synthesize_verilog`), ``tools`` (the versions
        that made them), ``cached`` (found in this host's cache) and ``seconds``.

    Raises
    ------
    scripts.flow.synth.SynthesisError
        When Yosys fails; it carries the log's text back to the client.
    """
    from scripts.flow.synth import cached_resources, synthesize_verilog, tool_versions

    started = time.monotonic()
    resources = cached_resources(verilog_text, target) if use_cache else None
    cached = resources is not None
    if not cached:
        resources = synthesize_verilog(verilog_text, target, use_cache=False)
    return {"resources": resources, "tools": tool_versions(), "cached": cached,
            "seconds": round(time.monotonic() - started, 2)}


def _label(params, names):
    return " ".join(f"{name}={params[name]}" for name in names)


@dataclass
class SweepResult:
    """What a sweep measured.

    Attributes
    ----------
    block, target : str
    varied : list of (name, values)
    points : list of dict
        In cartesian order: ``params``, ``status``, ``reason``, ``resources``, ``cached``, ``seconds``.
    """

    block: str
    target: str
    varied: list
    points: list = field(default_factory=list)

    @property
    def names(self):
        return [name for name, _ in self.varied]

    @property
    def cached(self):
        return sum(point["cached"] for point in self.points)

    @property
    def failed(self):
        return [point for point in self.points if point["status"] != "ok"]


class _Serial:
    """Runs the points' tasks in this process, one after another, when asked for results."""

    def __init__(self, function):
        self.function = function
        self.jobs = []

    def submit(self, key, *args):
        self.jobs.append((key, args))

    def results(self):
        for key, args in self.jobs:
            try:
                yield key, self.function(*args)
            except Exception as error:  # noqa: BLE001 - a tool failure fails this point only
                yield key, error

    def cancel(self):
        self.jobs.clear()

    def close(self):
        pass


class _Progress:
    """The progress bar (points finished) with the counts of cached and failed points, and a line each."""

    def __init__(self, result, stream):
        self.result = result
        self.stream = stream
        self.bar = tqdm(total=len(result.points), file=stream, unit="point", desc=f"sweep {result.block}",
                        dynamic_ncols=True, mininterval=0)
        self.bar.set_postfix_str("cached 0, failed 0")

    def record(self, index, outcome):
        self.result.points[index] = outcome
        state = "cached" if outcome["cached"] and outcome["status"] == "ok" else outcome["status"]
        detail = f" ({outcome['reason']})" if outcome["reason"] else ""
        self.bar.write(f"{_label(outcome['params'], self.result.names)}: {state}, {outcome['seconds']:.1f} s"
                       f"{detail}", file=self.stream)
        done = [point for point in self.result.points if point is not None]
        self.bar.set_postfix_str(f"cached {sum(point['cached'] for point in done)}, "
                                 f"failed {sum(point['status'] != 'ok' for point in done)}", refresh=False)
        self.bar.update()


def _elaborate(block, params):
    from scripts.flow.elaboration import registered_verilog

    return registered_verilog(block.name, block.resolve(params), lambda: block.build(params))


def _failure(error, verilog_text, target):
    """The reason of a point whose task failed; a Yosys log that came from elsewhere is kept here."""
    from scripts.flow.synth import CACHE, SynthesisError, cache_key

    if not isinstance(error, SynthesisError):
        return "synthesis: " + one_line(error)
    kept = CACHE.path(target, cache_key(verilog_text, target), "-failed.log")
    if error.log and not kept.exists():
        CACHE.folder.mkdir(parents=True, exist_ok=True)
        kept.write_text(error.log)
    return f"synthesis: SynthesisError: yosys failed for target {target}; log: {kept}"


def run_sweep(block, varied, *, target, fixed=None, workers=None, scheduler=None, client=None, stream=None,
              use_cache=True):
    """Synthesise every point of ``varied`` (see :func:`parse_vary`), here or on a Dask cluster.

    Parameters
    ----------
    block : rtl.registry.Block
    varied : list of (name, values)
    target : str
        ``"xcup"`` or ``"ecp5"``.
    fixed : dict, optional
        Parameters held at one value for the whole sweep.
    workers : int, optional
        1 runs the points in this process, without Dask; more starts a ``LocalCluster`` of that
        many single-threaded worker processes. Defaults to the number of cores.
    scheduler : str, optional
        Address of an existing Dask scheduler (``tcp://host:port``) to submit the points to.
    client : distributed.Client, optional
        An open client to use (and leave open) instead.
    stream : file, optional
        Where the progress lines go (default: standard error).
    use_cache : bool
        False synthesises every point again (and rewrites its cache entry).

    Returns
    -------
    SweepResult

    Raises
    ------
    ConnectionError
        When the scheduler cannot be reached.
    """
    from boards.targets import TARGETS
    from rtl.registry import check_choice, check_int
    from scripts.flow.synth import cache_key, cached_resources, store_resources

    check_choice("target", target, TARGETS)
    if workers is not None:
        check_int("workers", workers, 1)
    points = sweep_points(varied, fixed)
    result = SweepResult(block.name, target, varied, [None] * len(points))
    workers = workers or os.cpu_count() or 1
    if scheduler is None and client is None and (workers == 1 or len(points) == 1):
        runner = _Serial(synthesise_point)
    else:
        from scripts.flow.sweep_cluster import DaskRunner

        runner = DaskRunner(synthesise_point, workers=min(workers, len(points)), scheduler=scheduler,
                            client=client)
    progress = _Progress(result, stream or sys.stderr)
    waiting = {}  # task key -> (Verilog, indices of the points that elaborate to it)
    try:
        with progress.bar:
            for index, params in enumerate(points):
                started = time.monotonic()
                outcome = {"params": params, "status": "failed", "reason": "", "resources": {},
                           "cached": False, "seconds": 0.0}
                try:
                    verilog_text = _elaborate(block, params)
                except Exception as error:  # noqa: BLE001 - any elaboration error fails this point only
                    outcome["reason"] = "elaboration: " + one_line(error)
                    progress.record(index, outcome)
                    continue
                if use_cache and (resources := cached_resources(verilog_text, target)) is not None:
                    outcome.update(status="ok", resources=resources, cached=True,
                                   seconds=round(time.monotonic() - started, 2))
                    progress.record(index, outcome)
                    continue
                key = f"synth-{target}-{cache_key(verilog_text, target)}"
                if key not in waiting:
                    waiting[key] = (verilog_text, [])
                    runner.submit(key, verilog_text, target, use_cache)
                waiting[key][1].append(index)
            for key, answer in runner.results():
                verilog_text, indices = waiting.pop(key)
                for index in indices:
                    outcome = {"params": points[index], "status": "failed", "reason": "", "resources": {},
                               "cached": False, "seconds": 0.0}
                    if isinstance(answer, BaseException):
                        outcome["reason"] = _failure(answer, verilog_text, target)
                    else:
                        store_resources(verilog_text, target, answer["resources"], tools=answer["tools"])
                        outcome.update(status="ok", resources=answer["resources"], cached=answer["cached"],
                                       seconds=answer["seconds"])
                    progress.record(index, outcome)
    except KeyboardInterrupt:
        runner.cancel()
        raise
    finally:
        runner.close()
    return result


def write_csv(result, path):
    """One row per point: varied parameters, status, reason, resource columns, mapper, cached."""
    from boards.targets import RESOURCE_COLUMNS

    columns = RESOURCE_COLUMNS[result.target]
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*result.names, "status", "reason", *columns, "mapper", "cached", "seconds"])
        for point in result.points:
            resources = point["resources"]
            writer.writerow([*(point["params"][name] for name in result.names),
                             point["status"], point["reason"],
                             *(resources.get(column, "") for column in columns), resources.get("mapper", ""),
                             int(point["cached"]), point["seconds"]])
    return pathlib.Path(path)


def plot_resources(result, folder, board=None):
    """Write ``<resource>.png`` per resource column: use against the first varied parameter.

    Other varied parameters give one line each. The board's budget, when given, is a
    dashed horizontal line; a logarithmic axis keeps a small block visible under it. A resource
    that no point uses gets no plot (a flat line at zero says nothing; the CSV has the zeros).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from boards.targets import RESOURCE_COLUMNS

    axis_name, axis_values = result.varied[0]
    others = result.names[1:]
    numeric = all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in axis_values)
    positions = axis_values if numeric else list(range(len(axis_values)))
    written = []
    for column in RESOURCE_COLUMNS[result.target]:
        if not any(point["resources"].get(column) for point in result.points if point["status"] == "ok"):
            continue
        figure, axes = plt.subplots(figsize=(6, 4))
        series = {}
        for point in result.points:
            if point["status"] == "ok":
                key = _label(point["params"], others)
                x = positions[axis_values.index(point["params"][axis_name])]
                series.setdefault(key, []).append((x, point["resources"][column]))
        for key, xy in series.items():
            axes.plot(*zip(*sorted(xy), strict=True), marker="o", label=key or result.block)
        budget = board.budgets.get(column) if board is not None else None
        if budget:
            axes.axhline(budget, color="red", linestyle="--", label=f"{board.name} budget {budget:,}")
            axes.set_yscale("symlog", linthresh=1)
        if not numeric:
            axes.set_xticks(positions, [str(value) for value in axis_values])
        elif min(axis_values) > 0 and max(axis_values) >= 8 * min(axis_values):
            # Sizes are usually powers of two (lanes 1..16): even spacing reads better.
            axes.set_xscale("log", base=2)
        axes.set_xlabel(axis_name)
        axes.set_ylabel(column)
        axes.set_title(f"{result.block} on {result.target}: {column}")
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize="small")
        figure.tight_layout()
        path = pathlib.Path(folder) / f"{column}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        written.append(path)
    return written


def fit_report(result, board):
    """Which points fit the board, resource by resource, and which resource runs out first.

    Returns
    -------
    dict
        ``per_resource``: ``{column: (budget, largest fitting point label or None, use at it)}``;
        ``largest``: label of the last point (in sweep order) within every budget, or None;
        ``limiting``: the resource with the highest share of its budget at the first point
        that does not fit (or, if all fit, at the last point); ``limiting_share``, ``limiting_at``.
    """
    ok = [point for point in result.points if point["status"] == "ok"]
    names = result.names
    per_resource = {}
    for column, budget in board.budgets.items():
        fitting = [point for point in ok if point["resources"][column] <= budget]
        last = fitting[-1] if fitting else None
        per_resource[column] = (budget, _label(last["params"], names) if last else None,
                                last["resources"][column] if last else None)

    def fits(point):
        return all(point["resources"][column] <= budget for column, budget in board.budgets.items())

    fitting = [point for point in ok if fits(point)]
    beyond = [point for point in ok if not fits(point)]
    judged = beyond[0] if beyond else (ok[-1] if ok else None)
    limiting = share = None
    if judged is not None:
        limiting = max(board.budgets, key=lambda column: judged["resources"][column] / board.budgets[column])
        share = judged["resources"][limiting] / board.budgets[limiting]
    return {"per_resource": per_resource,
            "largest": _label(fitting[-1]["params"], names) if fitting else None,
            "limiting": limiting, "limiting_share": share,
            "limiting_at": _label(judged["params"], names) if judged else None,
            "all_fit": not beyond}


def format_fit_report(report, board):
    """The lines ``neartrain sweep`` prints after the table of points."""
    lines = [f"budget: {board.title}"]
    for column, (budget, label, used) in report["per_resource"].items():
        verdict = f"largest fitting point {label} ({used:g} = {100 * used / budget:.2f}%)" if label else \
            "no point fits"
        lines.append(f"  {column:<8} {budget:>10,}  {verdict}")
    if report["limiting"] is None:
        lines.append("no point synthesised")
        return lines
    lines.append(f"largest point within every budget: {report['largest'] or 'none'}")
    when = "runs out first" if not report["all_fit"] else "is the closest to its budget"
    lines.append(f"{report['limiting']} {when}: {100 * report['limiting_share']:.2f}% of it at "
                 f"{report['limiting_at']}")
    return lines
