"""Run nextpnr and stop it when its log shows that the design will not fit or will not route.

:mod:`scripts.flow.bitstream` puts this file in front of ``nextpnr-ecp5`` (through Amaranth's
``NEXTPNR_ECP5`` variable), so that a block that cannot be placed and routed ends with a
verdict the build cache keeps, instead of running for hours or being stopped by hand:

- **too large**: the device utilisation nextpnr prints after packing uses more of a cell type
  than the device has. nextpnr itself goes on into its placer, where no placement can succeed.
- **does not place**: nextpnr's placer gives up ("Unable to find legal placement for all
  cells"), which it does on a design at the device's utilisation limit.
- **does not route**: router2's count of overused wires either rose in :data:`RISES_IN_A_ROW`
  iterations in a row and stands at least :data:`RISE_FLOOR` wires above its lowest count, or
  has not gone below its lowest count for :data:`STALL_ITERATIONS` iterations while that lowest
  count is :data:`STALL_FLOOR` wires or more. In the 12 router2 runs of this project that
  converged (up to 207 iterations), the count never rose in more than 2 iterations in a row,
  and while it was above 200 wires every iteration set a new lowest count; in the three runs
  stopped by hand it rose 4, 5 and 19 times in a row, from thousands of wires, and went on
  rising. The floors keep the last, noisy iterations of a converging run (a handful of wires
  going 1, 2, 3) from counting.

nextpnr is deterministic for a given seed, so the verdict is the one a rerun would reach.

Usage: ``python nextpnr_watch.py VERDICT_JSON NEXTPNR [ARGUMENT ...]``, where the arguments
name the log file (``--log FILE``, as Amaranth's build script does): the watcher follows that
file, since Amaranth's ``--quiet`` keeps the log off stderr. On a verdict, nextpnr is stopped,
``VERDICT_JSON`` receives it and the exit status is :data:`EXIT_VERDICT`; otherwise the exit
status is nextpnr's.

This file imports only the standard library: it runs as a script, outside the project.
"""

import json
import re
import subprocess
import sys
import time

__all__ = ["RouteWatch", "packing_utilisation", "RISES_IN_A_ROW", "RISE_FLOOR", "STALL_ITERATIONS",
           "STALL_FLOOR", "EXIT_VERDICT", "main"]

RISES_IN_A_ROW = 4
RISE_FLOOR = 100
STALL_ITERATIONS = 8
STALL_FLOOR = 1000
EXIT_VERDICT = 3

_NO_PLACEMENT = "ERROR: Unable to find legal placement"
_UTILISATION = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%")
_ROUTER2_ITERATION = re.compile(r"^Info:\s+iter=(\d+) wires=\d+ overused=(\d+)")


class _UtilisationTable:
    """The device utilisation table nextpnr prints once, after packing, read one log line at a time."""

    def __init__(self):
        self.cells = {}  # {cell type: (used, available)}
        self._state = "before"

    def feed(self, line):
        """Take one line of the log; return the ``(cell, used, available)`` row it holds, or None."""
        if self._state == "before" and line.startswith("Info: Device utilisation:"):
            self._state = "inside"
        elif self._state == "inside":
            if match := _UTILISATION.match(line):
                row = match.group(1), int(match.group(2)), int(match.group(3))
                self.cells[row[0]] = row[1:]
                return row
            self._state = "after"  # the blank line after the table
        return None


def packing_utilisation(log):
    """``{cell type: (used, available)}`` from the device utilisation table of a nextpnr log.

    nextpnr prints the table once, after packing; a run stopped later still has it.
    """
    table = _UtilisationTable()
    for line in log.splitlines():
        table.feed(line)
    return table.cells


class RouteWatch:
    """Reads nextpnr's log line by line and gives a verdict once the rules above reach one.

    Attributes
    ----------
    verdict : dict or None
        ``{"too_large": {"cell", "used", "available"}}``, ``{"unplaceable": {"message"}}``
        (nextpnr's error) or ``{"unroutable": {"rule", "iteration", "overused", "lowest",
        "lowest_iteration", "rises"}}`` (``rule``: ``"rising"`` or ``"stalled"``); None while
        nextpnr may still succeed.
    """

    def __init__(self):
        self.verdict = None
        self._utilisation = _UtilisationTable()
        self._previous = None
        self._rises = 0
        self._lowest = None

    def feed(self, line):
        """Take one line of the log; return :attr:`verdict`."""
        if self.verdict is not None:
            return self.verdict
        if line.startswith(_NO_PLACEMENT):
            self.verdict = {"unplaceable": {"message": line.removeprefix("ERROR: ").strip()}}
        elif (row := self._utilisation.feed(line)) and row[1] > row[2]:
            cell, used, available = row
            self.verdict = {"too_large": {"cell": cell, "used": used, "available": available}}
        if match := _ROUTER2_ITERATION.match(line):
            self._router2_iteration(int(match.group(1)), int(match.group(2)))
        return self.verdict

    def _router2_iteration(self, iteration, overused):
        self._rises = self._rises + 1 if self._previous is not None and overused > self._previous else 0
        self._previous = overused
        if self._lowest is None or overused < self._lowest[1]:
            self._lowest = (iteration, overused)
        rising = self._rises >= RISES_IN_A_ROW and overused - self._lowest[1] >= RISE_FLOOR
        stalled = iteration - self._lowest[0] >= STALL_ITERATIONS and self._lowest[1] >= STALL_FLOOR
        if rising or stalled:
            self.verdict = {"unroutable": {"rule": "rising" if rising else "stalled", "iteration": iteration,
                                           "overused": overused, "lowest": self._lowest[1],
                                           "lowest_iteration": self._lowest[0], "rises": self._rises}}


def _log_lines(process, log_path, poll_seconds):
    """The lines of the file nextpnr logs into, as it writes them, until it exits.

    Amaranth runs nextpnr with ``--quiet``, which keeps the "Info" lines off stderr; they go
    to the ``--log`` file only.
    """
    position, partial = 0, ""
    while True:
        finished = process.poll() is not None
        try:
            with open(log_path, errors="replace") as file:
                file.seek(position)
                text = file.read()
                position = file.tell()
        except FileNotFoundError:
            text = ""
        *lines, partial = (partial + text).split("\n")
        yield from (line + "\n" for line in lines)
        if finished:
            if partial:
                yield partial
            return
        time.sleep(poll_seconds)


def main(argv, *, poll_seconds=1.0):
    """Run ``argv[1:]`` (nextpnr and its arguments), write a verdict into ``argv[0]``."""
    verdict_path, command = argv[0], argv[1:]
    if "--log" not in command[:-1]:
        raise SystemExit("nextpnr_watch: the nextpnr command has no --log FILE to follow")
    log_path = command[command.index("--log") + 1]
    watch = RouteWatch()
    process = subprocess.Popen(command)
    for line in _log_lines(process, log_path, poll_seconds):
        if watch.feed(line) is not None:
            process.terminate()
            process.wait()
            with open(verdict_path, "w") as file:
                json.dump(watch.verdict, file)
            return EXIT_VERDICT
    return process.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
