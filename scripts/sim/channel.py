"""The one channel between a caller of :func:`~scripts.sim.runner.run_cocotb` and its simulation.

A simulation runs in another process (Verilator's, with cocotb inside). Everything the caller
hands it, and everything it hands back, crosses here and nowhere else:

* the caller passes ``job=`` (any picklable object: a shape, a workload, a session's inputs);
  the runner pickles it with the block's name and parameters into ``job.pickle`` in the build
  folder and names that folder in the one variable ``NEARTRAIN_SIM_CHANNEL``;
* inside the simulation, :func:`job` returns it (``None`` when the caller gave none),
  :func:`block` and :func:`params` say what is simulated, and :func:`reply` pickles one result
  (a bench's figures, a session's outputs) into ``reply.pickle``;
* the runner returns that reply to the caller as ``Simulation.reply`` and deletes both files.

The build folder is locked for the whole run, so concurrent runs never share a channel. The
user's knobs (``NEARTRAIN_SEED``, ``NEARTRAIN_VECTORS``, ``WAVES``, see :mod:`.knobs`) stay
environment variables: they are set by people, not passed by code.
"""

import os
import pathlib
import pickle

__all__ = ["VARIABLE", "open_channel", "close_channel", "has_job", "job", "block", "params", "reply"]

VARIABLE = "NEARTRAIN_SIM_CHANNEL"
_JOB = "job.pickle"
_REPLY = "reply.pickle"


def open_channel(folder, *, block, params, job=None):
    """Caller side: write the job for a run in ``folder``; returns the environment entry."""
    folder = pathlib.Path(folder)
    (folder / _REPLY).unlink(missing_ok=True)
    with open(folder / _JOB, "wb") as out:
        pickle.dump({"block": block, "params": params, "job": job}, out)
    return {VARIABLE: str(folder)}


def close_channel(folder):
    """Caller side: the simulation's reply (``None`` if it gave none); removes both files."""
    folder = pathlib.Path(folder)
    path = folder / _REPLY
    value = None
    if path.exists():
        with open(path, "rb") as source:
            value = pickle.load(source)
    path.unlink(missing_ok=True)
    (folder / _JOB).unlink(missing_ok=True)
    return value


def _folder():
    try:
        return pathlib.Path(os.environ[VARIABLE])
    except KeyError:
        raise RuntimeError(f"{VARIABLE} is not set: this runs only inside a simulation started by "
                           "scripts.sim.runner.run_cocotb") from None


def _read():
    with open(_folder() / _JOB, "rb") as source:
        return pickle.load(source)


def has_job():
    """True inside a simulation whose caller passed a job (for ``@cocotb.test(skip=not has_job())``)."""
    return VARIABLE in os.environ and job() is not None


def job():
    """Simulation side: the object the caller passed as ``job=`` (``None`` if none)."""
    return _read()["job"]


def block():
    """Simulation side: the simulated block, a registry name or ``module:Class``."""
    return _read()["block"]


def params():
    """Simulation side: the constructor parameters the runner elaborated the block with."""
    return dict(_read()["params"])


def reply(value):
    """Simulation side: hand ``value`` back to the caller (the last call wins)."""
    with open(_folder() / _REPLY, "wb") as out:
        pickle.dump(value, out)
