"""The one entry point from a pytest runner to a cocotb simulation on Verilator.

:func:`run_cocotb` takes a block (a registered name or a component class) and its
parameters, elaborates it to Verilog, and runs a cocotb test module against it through
cocotb's own runner (:mod:`cocotb_tools.runner`) and Verilator:

* the Verilog is deterministic and its top-level module is always ``top``;
* each block and parameter set gets one folder under ``build/sim/<block>/``, shared by every
  test module that simulates it (the Verilator build does not depend on the test module);
* the Verilog is rewritten only when its text changes, and Verilator skips an identical
  run (``--skip-identical``), so the C++ build is reused while sources and parameters are
  unchanged; Verilator's own runtime objects are compiled once per toolchain and linked
  from a cache (:func:`_runtime_make_args`);
* a lock file per build folder makes concurrent pytest-xdist workers safe;
* the build's and the simulation's output go to ``build.log`` and ``sim.log`` in the build
  folder, and a failure copies the end of the log to stderr.

Data crosses into the simulation and back only through :mod:`.channel` (``job=`` in, the
returned :class:`Simulation`'s ``reply`` out). Inside the cocotb module,
:func:`component_from_env` rebuilds the same component (it is constructed, not elaborated
again: only the runner elaborates) so that a testbench can read payload layouts and the
latency from the Python object rather than from Amaranth's internal signal names.

Every failure (a cocotb test failed, no test executed, a selected name did not run, the
build broke) raises :class:`SimulationError`, with the module, the selection, the build
folder and the reproduction knobs in its one-line message.
"""

import fcntl
import hashlib
import importlib.metadata
import os
import pathlib
import re
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from typing import Any, NamedTuple

from cocotb_tools.runner import Verilator

from rtl.elaborate import TOP_NAME, to_verilog
from rtl.registry import get_block

from ..flow.cache import BUILD
from ..flow.elaboration import registered_verilog
from . import channel, knobs
from .verilator import LINT_FLAGS, environment_with_verilator

__all__ = ["BUILD_ROOT", "run_cocotb", "Simulation", "prune_builds", "component_from_env", "params_from_env",
           "selection_filter", "count_results", "check_results", "SimulationError", "tests_executed"]

BUILD_ROOT = BUILD


class Simulation(NamedTuple):
    """What :func:`run_cocotb` returns."""

    #: Outcome per cocotb test that ran ("passed", "failed" or "skipped").
    outcomes: dict
    #: What the simulation handed back through :func:`.channel.reply` (``None`` if nothing).
    reply: Any


def _resolve(block, params):
    """Return (reference string for the cocotb side, constructor, full parameter dict)."""
    if isinstance(block, str):
        registered = get_block(block)
        return block, registered.component, registered.resolve(params)
    reference = f"{block.__module__}:{block.__qualname__}"
    return reference, block, dict(params or {})


def _elaborate(reference, constructor, params):
    """The design's Verilog: a registered block's from :mod:`scripts.flow.elaboration`, a class's afresh."""
    if ":" in reference:
        return to_verilog(constructor(**params), name=TOP_NAME)
    return registered_verilog(reference, params, lambda: constructor(**params))


def _print_tail(log, lines=60):
    """Copy the end of a failed run's log to stderr (pytest shows it in the failure's report)."""
    if log.is_file():
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        print(f"--- the last {len(tail)} lines of {log} ---", *tail, sep="\n", file=sys.stderr)


def _slug(params):
    text = "-".join(f"{key}={value}" for key, value in sorted(params.items()))
    text = re.sub(r"[^A-Za-z0-9=.,_-]+", "_", text)
    return text[:80] or "default"


def _runtime_cache_dir():
    """Where the compiled Verilator runtime (``verilated*.o``) of this toolchain and flag set is kept.

    Those objects depend only on Verilator's own sources and the compile flags, never on the
    design, yet they are most of a small design's C++ build. The key covers the Verilator
    and cocotb versions, the flags and whether waves are traced.
    """
    versions = [importlib.metadata.version(name) for name in ("verilator", "cocotb")]
    text = f"{versions} {LINT_FLAGS} {knobs.waves()}"
    return BUILD_ROOT / "sim" / "_verilator_runtime" / hashlib.sha256(text.encode()).hexdigest()[:12]


# The model's own C++ is built at -O0 unless the caller (``model_opt``, e.g. the long cluster
# runs) or NEARTRAIN_MODEL_OPT, which overrides both, says otherwise: cocotb spends far more per
# cycle in Python than the model does in C++, and -Os compiles a large design ten to twenty times
# slower. The Verilator runtime (OPT_GLOBAL) keeps its optimisation; it is compiled once and cached.
_MODEL_OPT = os.environ.get("NEARTRAIN_MODEL_OPT")
# The model's C++ files are compiled as one translation unit (Verilator's __ALL.cpp), never one
# file at a time: a test suite already runs one simulation per core, and the per-file build
# compiles the precompiled header twice (fast and slow) and parses the headers once per file.
# Measured on a 2-core machine: the 2-leaf GCU cluster's C++ in 6.4 s instead of 11.1 s, the
# 3-lane SGD kernel's in 8.5 s instead of 11.3 s; 34 of the 146 builds of a cold `make test` were
# split, for 677 of its 1,133 s of C++ compilation.
_ONE_UNIT_ARG = "VM_PARALLEL_BUILDS=0"


def _make_args(model_opt=None):
    opt = _MODEL_OPT or model_opt or "-O0"
    return [_ONE_UNIT_ARG, f"OPT_FAST={opt}", f"OPT_SLOW={opt}"]
_RUNTIME_GLOB = "verilated*.o"


def _runtime_make_args():
    """Make arguments that link the cached runtime objects instead of compiling them again.

    Verilator's makefile rebuilds its runtime whenever the freshly generated ``Vtop.mk``
    is newer, so copies would be rebuilt too; emptying ``VM_GLOBAL_FAST`` and naming the
    cached objects in ``LIBS`` (which the link line appends) links them as they are.
    """
    cache = _runtime_cache_dir()
    objects = sorted(cache.glob(_RUNTIME_GLOB)) if cache.is_dir() else []
    if not objects:
        return []
    return ["VM_GLOBAL_FAST=", "VM_GLOBAL_SLOW=", "LIBS=" + " ".join(str(path) for path in objects)]


def _save_runtime(build_dir):
    cache = _runtime_cache_dir()
    objects = sorted(build_dir.glob(_RUNTIME_GLOB))
    # Only a runtime that linked into a simulator is known to be complete.
    if cache.is_dir() or not objects or not (build_dir / TOP_NAME).exists():
        return
    cache.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(dir=cache.parent))
    for path in objects:
        shutil.copyfile(path, staging / path.name)
    try:
        staging.rename(cache)
    except OSError:  # another worker saved it first
        shutil.rmtree(staging, ignore_errors=True)


# cocotb's runner makes every signal of the design public (`--public-flat-rw`), which keeps
# Verilator from optimising any of them away and multiplies the C++ it writes: the 4-lane Adam
# updater came to 72.8 MB of C++ (9.0 MB with only the top module public) and most of a cold
# `make test` was spent compiling it. A test reaches the top module's ports and wires; only a
# test that looks inside a submodule asks for the whole design (`run_cocotb(..., internals=True)`).
_TOP_PUBLIC = """`verilator_config
public_flat_rw -module "{top}" -var "*"
"""


class _VerilatorRunner(Verilator):
    """cocotb's Verilator runner with NearTrain's make arguments on its ``make`` step.

    They set the model's optimisation level, compile the model as one C++ unit and link the
    cached Verilator runtime (:func:`_runtime_make_args`).
    Unless ``public_config`` is None, the model makes public only what that Verilator
    configuration file names, instead of every signal.
    """

    def __init__(self, make_args, public_config=None):
        super().__init__()
        self._make_args = list(make_args)
        self._public_config = public_config

    def _build_command(self):
        commands = super()._build_command()
        verilate = list(commands[0])
        if self._public_config is not None:
            verilate.remove("--public-flat-rw")
            verilate.append(str(self._public_config))
        return [verilate, *commands[1:-1], list(commands[-1]) + self._make_args]


# How many cocotb tests the runs of this process executed (skipped ones excluded), for reports
# such as `make run`'s that must say what they checked.
_EXECUTED = [0]


def tests_executed():
    """The number of cocotb tests executed by :func:`run_cocotb` in this process so far."""
    return _EXECUTED[0]


# build/sim is pruned to knobs.sim_cap_bytes() (least recently used builds first), once per process.
_PRUNED = [False]


def _folder_size(folder):
    """Bytes in ``folder``; what another process deletes meanwhile counts as gone."""
    total = 0
    try:
        for entry in folder.rglob("*"):
            try:
                if entry.is_file() and not entry.is_symlink():
                    total += entry.stat().st_size
            except FileNotFoundError:
                pass
    except FileNotFoundError:
        pass
    return total


def _last_use(folder):
    """The time of ``folder``'s lock file, or None when it has none (yet, or any more)."""
    try:
        return (folder / ".lock").stat().st_mtime
    except FileNotFoundError:
        return None


def prune_builds(root=None, cap_bytes=None):
    """Delete the least recently used Verilator builds under ``root`` until it holds ``cap_bytes``.

    A build's last use is the time of its ``.lock`` file, which every run touches. Builds in
    use (locked by another process) and the cached Verilator runtime are never deleted, nor is
    a folder without a lock file: it is being created. Several processes may prune at once (the
    pytest-xdist workers each prune at their first run), so a folder another one deleted first is
    skipped. The cap is ``NEARTRAIN_SIM_CAP_GB`` gigabytes (default 8, see
    :func:`.knobs.sim_cap_bytes`); without it build/sim once grew to 58 GB and filled the disk. A
    cap of 0 or less is refused (:class:`.knobs.KnobError`): it would delete every unlocked build.
    Returns the number of builds deleted.
    """
    root = pathlib.Path(root) if root is not None else BUILD_ROOT / "sim"
    cap_bytes = knobs.sim_cap_bytes() if cap_bytes is None else cap_bytes
    if not cap_bytes > 0:
        raise knobs.KnobError(f"the build cap must be > 0 bytes, not {cap_bytes!r}")
    builds = [folder for module in root.iterdir() if module.is_dir() and module.name != "_verilator_runtime"
              for folder in module.iterdir() if folder.is_dir()] if root.is_dir() else []
    used = {folder: _last_use(folder) for folder in builds}
    sizes = {folder: _folder_size(folder) for folder in builds}
    total, deleted = sum(sizes.values()), 0
    for folder in sorted((folder for folder in builds if used[folder] is not None), key=used.get):
        if total <= cap_bytes:
            break
        try:
            lock = open(folder / ".lock")  # never created here: a vanished folder stays vanished
        except FileNotFoundError:
            total -= sizes[folder]  # another process pruned it
            continue
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            shutil.rmtree(folder, ignore_errors=True)
        total -= sizes[folder]
        deleted += 1
    return deleted


class SimulationError(AssertionError):
    """A cocotb simulation failed, or executed no test of its selection."""


def _selection(testcase):
    """The selected test names as a tuple (empty: the whole module)."""
    if testcase is None:
        return ()
    names = (testcase,) if isinstance(testcase, str) else tuple(testcase)
    if not names or not all(isinstance(name, str) and name for name in names):
        raise ValueError(f"testcase must be a test name or a list of names, not {testcase!r}")
    return names


def selection_filter(names):
    """The ``COCOTB_TEST_FILTER`` regex that selects exactly the cocotb tests ``names``.

    cocotb searches the filter in ``module.test``, and names a parametrized test
    ``test/arg=value/...``; so each name is escaped, anchored after the module's dot, and
    may be followed by its parameter suffix (a bare name selects all of its variants, and
    ``"bench"`` does not select ``"bench_fast"``).
    """
    if not names:
        return None
    alternatives = "|".join(re.escape(name) for name in names)
    return rf"(^|\.)({alternatives})(/.*)?$"


def count_results(results_xml):
    """Per cocotb test name (the parameter suffix kept), whether it ran: ``{name: "passed"|...}``.

    The outcome is ``"failed"``, ``"skipped"`` or ``"passed"``, read from cocotb's xUnit file.
    """
    outcomes = {}
    for case in ET.parse(results_xml).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        outcomes[case.get("name")] = outcome
    return outcomes


def check_results(results_xml, names):
    """Raise unless every test in ``results_xml`` passed, and the run executed one for every selected name.

    Returns the outcomes (see :func:`count_results`). A failed test is a failure; so is a run
    that executed nothing, or none of one selected name: a vacuous pass hides whatever it was
    meant to check.
    """
    if not pathlib.Path(results_xml).is_file():
        raise SimulationError(f"cocotb left no results file ({results_xml}); the simulation died")
    outcomes = count_results(results_xml)
    failed = [name for name, outcome in outcomes.items() if outcome == "failed"]
    if failed:
        raise SimulationError(f"failed: {', '.join(failed)} ({len(failed)} of {len(outcomes)} tests)")
    executed = [name for name, outcome in outcomes.items() if outcome != "skipped"]
    if not executed:
        chosen = "every test" if not names else ", ".join(names)
        raise SimulationError(f"no cocotb test executed (selection: {chosen}; "
                              f"{len(outcomes)} skipped); a run that tests nothing cannot pass")
    missing = [name for name in names if not any(run.split("/", 1)[0] == name for run in executed)]
    if missing:
        raise SimulationError(f"the selection names {', '.join(missing)}, which did not run "
                              f"(ran: {', '.join(sorted(executed))})")
    return outcomes


def run_cocotb(block, module, *, params=None, testcase=None, job=None, extra_env=None,
               timescale="1ns/1ps", internals=False, model_opt=None):
    """Elaborate ``block`` with ``params`` and run the cocotb tests in ``module`` on it.

    Parameters
    ----------
    block : str or type
        A registered block name, or a ``wiring.Component`` subclass.
    module : str
        Dotted name of the cocotb test module, e.g. ``"testbenches.bus.test_skid_buffer"``.
    params : dict, optional
        Constructor keyword arguments; registered blocks are validated and defaulted.
    testcase : str or list of str, optional
        Run only the cocotb tests of these exact names, each with all its parametrized
        variants (see :func:`selection_filter`). Every name must run at least one test.
    job : object, optional
        Anything picklable the simulation reads with :func:`.channel.job`.
    extra_env : dict, optional
        Overrides of the user's knobs for this run (``NEARTRAIN_VECTORS``, ``NEARTRAIN_SEED``);
        data goes through ``job``, not here.
    internals : bool, optional
        Make every signal of the design reachable from the test (``dut.block.<submodule>``).
        By default only the top module's ports and wires are, which builds a far smaller model.
    model_opt : str, optional
        The model's C++ optimisation (``"-O2"``): slower to build, faster to run; -O0 by default
        (``NEARTRAIN_MODEL_OPT`` overrides both).

    Returns
    -------
    Simulation
        The outcome per cocotb test that ran (see :func:`count_results`) and the reply.

    Raises
    ------
    SimulationError
        When any cocotb test fails, or when the run executed no test, or none of a selected
        name; the message names the module and the selection and carries the reproduction knobs.
    """
    names = _selection(testcase)
    reference, constructor, params = _resolve(block, params)
    verilog_text = _elaborate(reference, constructor, params)

    if not _PRUNED[0]:
        prune_builds()  # raises on a bad cap, at every run until the cap is fixed
        _PRUNED[0] = True
    make_args = _make_args(model_opt)
    flags = " ".join(LINT_FLAGS + tuple(make_args)) + (" internals" if internals else " top-public")
    digest = hashlib.sha256((verilog_text + flags).encode()).hexdigest()[:10]
    name = reference.rsplit(":", 1)[-1]
    build_dir = BUILD_ROOT / "sim" / name / f"{name}-{_slug(params)}-{digest}"
    build_dir.mkdir(parents=True, exist_ok=True)

    env = environment_with_verilator()
    env.update(extra_env or {})
    # One results file per build folder, at a fixed name (the folder lock serialises its users),
    # so that every run leaves its evidence and a stale file is never read as this run's.
    results_xml = build_dir / "results.xml"

    with open(build_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.utime(build_dir / ".lock")  # the build's last use, for prune_builds
        verilog_path = build_dir / f"{TOP_NAME}.v"
        if not verilog_path.exists() or verilog_path.read_text() != verilog_text:
            verilog_path.write_text(verilog_text)
        results_xml.unlink(missing_ok=True)
        env.update(channel.open_channel(build_dir, block=reference, params=params, job=job))
        where = f"cocotb {module} on {name} {params}"
        saved_environ = dict(os.environ)
        # cocotb's runner copies os.environ into the simulation over its own extra_env,
        # so the knobs must be in os.environ itself while it runs.
        os.environ.clear()
        os.environ.update(env)
        log = build_dir / "build.log"
        try:
            public_config = None
            if not internals:
                public_config = build_dir / "top_public.vlt"
                public_config.write_text(_TOP_PUBLIC.format(top=TOP_NAME))
            runner = _VerilatorRunner(make_args + _runtime_make_args(), public_config)
            waves = knobs.waves()
            runner.build(sources=[verilog_path], hdl_toplevel=TOP_NAME, build_dir=build_dir, log_file=log,
                         build_args=list(LINT_FLAGS), timescale=tuple(timescale.split("/")), waves=waves)
            log = build_dir / "sim.log"
            runner.test(test_module=module, hdl_toplevel=TOP_NAME, test_filter=selection_filter(names),
                        build_dir=build_dir, test_dir=build_dir, results_xml=str(results_xml), waves=waves,
                        log_file=log)
            outcomes = check_results(results_xml, names)
            _EXECUTED[0] += sum(outcome != "skipped" for outcome in outcomes.values())
            return Simulation(outcomes, channel.close_channel(build_dir))
        except (SystemExit, RuntimeError, SimulationError) as failure:
            # cocotb's runner raises RuntimeError for a broken build or simulator, and SystemExit
            # (under pytest) for a failed test; check_results names the failed tests.
            if results_xml.is_file() and not isinstance(failure, SimulationError):
                try:
                    check_results(results_xml, names)
                except SimulationError as named:
                    failure = named
            _print_tail(log)
            raise SimulationError(f"{where}: {failure}; reproduce with "
                                  f"{knobs.describe()} (build folder {build_dir})") from None
        finally:
            os.environ.clear()
            os.environ.update(saved_environ)
            _save_runtime(build_dir)


def params_from_env():
    """The parameter dict the runner passed to this simulation."""
    return channel.params()


def resolved_params_from_env():
    """The runner's parameters completed with the registry defaults (registry blocks only)."""
    return get_block(channel.block()).resolve(params_from_env())


def component_from_env(constructor=None):
    """Rebuild the component under simulation, for its layouts and declared latency.

    A registered block is looked up by name. A block the runner was given as a class (not
    registered, e.g. a board top or a test fixture) must be named here by the cocotb module,
    which imports it: the simulator never imports code by a name found in the environment.
    """
    reference = channel.block()
    params = params_from_env()
    if ":" in reference:
        if constructor is None or reference != f"{constructor.__module__}:{constructor.__qualname__}":
            raise ValueError(f"the simulated block is {reference}: pass that class to component_from_env")
        return constructor(**params)
    return get_block(reference).build(params)
