"""Measured wall times of the README's two commands, cold and warm, with a sample of their output.

``python -m scripts.flow.timings [--targets run test] [--clone DIR]`` clones the repository's
committed ``HEAD`` into a fresh folder (nothing installed, nothing built: *cold*), runs each
``make <target>`` there, then runs it again in the same folder (*warm*: ``.venv/`` and the build
folders reused). It records the wall times, the exit status, the machine's CPU count and its mean
load average during each run (other jobs slow a 2-core machine down, and a reader must see that)
in the README's ``readme-timings`` table, and the tail of the warm runs' output in
``readme-run-output`` and ``readme-test-output``. A run that fails records nothing.

``--targets``, ``--states`` and ``--here`` measure a part and keep the stored rows of the rest,
so the parts can be measured at different times: ``--states cold`` only clones and runs once;
``--here --states warm`` times the command in this checkout, whose ``.venv/`` and build
folders already exist.
"""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

from . import docs

ROOT = pathlib.Path(__file__).resolve().parents[2]

DOC = "../README.md"  # write_table's documents are named relative to docs/
TABLE = "readme-timings"
HEADERS = ["command", "state", "wall time", "mean load average", "CPU cores", "measured on"]
COMMAND = "python -m scripts.flow.timings --targets run test"

# The lines of the last measured run's output shown in the README: make run's step lines and its
# total, and the summary of make test (its three slowest tests and the pass count).
_RUN_TAIL = 14


def _minutes(seconds):
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds:02d} s"


class _LoadSampler(threading.Thread):
    """Samples the 1-minute load average every ``period`` seconds until stopped."""

    def __init__(self, period=15.0):
        super().__init__(daemon=True)
        self.period, self.samples, self._stop_event = period, [], threading.Event()

    def run(self):
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop_event.wait(self.period):
                return

    def mean(self):
        self._stop_event.set()
        self.join()
        return sum(self.samples) / len(self.samples)


def measure(target, folder, log=None):
    """``(seconds, mean load average, output)`` of ``make <target>`` in ``folder``; raises on failure.

    The whole output is also written to ``log`` when given (the README shows only its tail).
    """
    sampler = _LoadSampler()
    sampler.start()
    start = time.monotonic()
    process = subprocess.run(["make", target], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"})
    seconds, load = time.monotonic() - start, sampler.mean()
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(process.stdout)
    if process.returncode != 0:
        tail = "\n".join(process.stdout.splitlines()[-20:])
        raise RuntimeError(f"make {target} in {folder} exited {process.returncode}:\n{tail}")
    return seconds, load, process.stdout


def output_sample(target, output):
    """The lines of ``make <target>``'s output the README shows."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    if target == "run":
        return lines[-_RUN_TAIL:]
    durations = next((i for i, line in enumerate(lines) if "slowest" in line and "durations" in line), None)
    head = lines[durations:durations + 4] if durations is not None else []
    return head + ["...", lines[-1]]


def kept_rows(measured):
    """The stored rows of the table that are not among ``measured`` ``(command, state)`` pairs."""
    return docs.kept_rows(TABLE, HEADERS, lambda row: (row[0], row[1]) not in measured)


def clone(folder):
    """A fresh clone of the committed HEAD in ``folder`` (which must not exist or be empty)."""
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(folder)], check=True)
    return folder


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.flow.timings",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="+", choices=("run", "test"), default=["run", "test"])
    parser.add_argument("--states", nargs="+", choices=("cold", "warm"), default=["cold", "warm"],
                        help="cold: in a fresh clone; warm: again in the same folder (default: both)")
    parser.add_argument("--clone", type=pathlib.Path, help="folder for the fresh clone (default: a new "
                        "temporary folder, removed afterwards)")
    parser.add_argument("--here", action="store_true", help="measure warm runs in this checkout, whose "
                        ".venv/ and build folders already exist, instead of a fresh clone")
    args = parser.parse_args(argv)
    if args.here and (args.states != ["warm"] or not (ROOT / ".venv").exists()):
        parser.error("--here measures only warm runs (--states warm) in a checkout that has run `make setup`")
    keep = None
    if args.here:
        folder = ROOT
        states = ["warm"]
    else:
        keep = tempfile.TemporaryDirectory(prefix="neartrain-timings-") if args.clone is None else None
        folder = clone(args.clone or pathlib.Path(keep.name) / "NearTrain")
        states = ["cold", "warm"] if "warm" in args.states else ["cold"]  # a warm run needs the cold one
    label = " ".join(["python -m scripts.flow.timings --targets {target}", "--here" * args.here,
                      f"--states {' '.join(args.states)}" * (args.states != ["cold", "warm"])]).split()
    day = time.strftime("%Y-%m-%d")
    rows, measured = [], set()
    try:
        for target in args.targets:
            for state in states:
                print(f"timings: make {target}, {state}, in {folder} ...", flush=True)
                log = folder / "build" / "timings" / f"make-{target}-{state}.log"
                seconds, load, output = measure(target, folder, log)
                print(f"timings: make {target}, {state}: {_minutes(seconds)} (mean load {load:.1f}); "
                      f"output in {log}", flush=True)
                if state in args.states:
                    rows.append([f"make {target}", state, _minutes(seconds), f"{load:.1f}",
                                 os.cpu_count(), day])
                    measured.add((f"make {target}", state))
            if (f"make {target}", states[-1]) in measured:  # the output of the last run measured
                sample = [[line] for line in output_sample(target, output)]
                try:
                    docs.write_table(DOC, f"readme-{target}-output", ["output"], sample,
                                     " ".join(label).format(target=target), code=True)
                except docs.DocsError as error:  # a first measurement: the block is added afterwards
                    print(f"timings: {error}; the lines are kept, add the block and run `neartrain docs`")
    finally:
        if keep is not None:
            keep.cleanup()
    # The stored rows of the others are read only now: a measurement of them may have ended meanwhile.
    rows += kept_rows(measured)
    order = {f"make {t}": i for i, t in enumerate(("run", "test"))}
    rows.sort(key=lambda row: (order[row[0]], row[1] != "cold"))
    docs.write_table(DOC, TABLE, HEADERS, rows, COMMAND, disable_numparse=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
