"""How NearTrain runs Verilator: the one list of warning waivers, shared by the
simulations (``scripts.sim.runner``) and ``make lint``.

Verilator treats warnings as fatal. Every other warning stays fatal; only these are
waived, because they describe the shape of Amaranth's generated Verilog rather than a
design problem:

``WIDTHEXPAND``, ``WIDTHTRUNC``
    Amaranth extends and truncates operands explicitly in its own IR with the exact
    semantics of the Python expression; the Verilog it prints relies on Verilog's
    implicit context-sized extension of constants and intermediate results.
``UNUSEDSIGNAL``
    Amaranth emits every named intermediate signal and whole-vector wires of which only
    some bits are read (for example the parts of a struct payload a block ignores).
``PROCASSINIT``
    Amaranth declares each register with its reset value as an initialiser
    (``reg x = 1'h0;``) and also assigns it in an ``always`` block, which is how it
    keeps the power-on value for FPGA flows.
``ASCRANGE``
    Amaranth prints zero-width intermediate values (an empty slice, the address of a
    one-entry memory) as ``[-1:0]`` wires; they carry no bits and nothing reads them.
``DECLFILENAME``
    The top-level module is always ``top``; files are named after the block.
"""

import os
import pathlib
import shutil
import sys

__all__ = ["WAIVERS", "LINT_FLAGS", "verilator_executable"]

WAIVERS = ("WIDTHEXPAND", "WIDTHTRUNC", "UNUSEDSIGNAL", "PROCASSINIT", "ASCRANGE", "DECLFILENAME")

LINT_FLAGS = ("-Wall",) + tuple(f"-Wno-{name}" for name in WAIVERS)


def verilator_executable():
    """Path of the ``verilator`` launcher (written into the venv by ``scripts/install_verilator.py``)."""
    candidate = pathlib.Path(sys.executable).parent / "verilator"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("verilator")
    if found is None:
        raise RuntimeError("no verilator command: run `make` (it installs the launcher into .venv/bin)")
    return found


def environment_with_verilator(env=None):
    """A copy of ``env`` (default: ``os.environ``) with the venv's ``bin`` first on PATH."""
    env = dict(os.environ if env is None else env)
    bin_dir = str(pathlib.Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env
