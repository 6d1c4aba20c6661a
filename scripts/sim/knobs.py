"""The environment knobs every randomised test reads.

``NEARTRAIN_SEED``
    Seed of every random generator (default 1). A failing test prints it, so
    ``NEARTRAIN_SEED=<n> make test`` reproduces the failure.
``NEARTRAIN_VECTORS``
    Overrides the number of random vectors (or transfers, or elements) a test uses.
    Each test names its own default, sized for the fast suite.
``WAVES``
    ``WAVES=1`` makes the cocotb runs write VCD waves (``dump.vcd``) into their build folder.

Two more knobs are read by :mod:`.runner` when it builds: ``NEARTRAIN_SIM_CAP_GB`` (the size
``build/sim`` is pruned to, default 8) and ``NEARTRAIN_MODEL_OPT`` (the model's C++ optimisation,
default ``-O0``). Data passed by code never travels in the environment: see :mod:`.channel`.
"""

import os

import numpy as np

__all__ = ["seed", "vectors", "rng", "describe", "waves"]


def _env_int(name, default):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text, 0)
    except ValueError:
        raise ValueError(f"{name} must be an integer, not {text!r}") from None
    if value < 0:
        raise ValueError(f"{name} must be >= 0, not {value}")
    return value


def seed():
    """The seed from ``NEARTRAIN_SEED`` (default 1)."""
    return _env_int("NEARTRAIN_SEED", 1)


def vectors(default):
    """The vector count: ``NEARTRAIN_VECTORS`` if set, else the test's ``default``."""
    return _env_int("NEARTRAIN_VECTORS", default)


def rng(salt=0):
    """A NumPy generator seeded from ``NEARTRAIN_SEED``.

    ``salt`` separates the streams of independent generators in one test (for example
    the data and the stall pattern) so that changing one does not shift the other.
    """
    return np.random.default_rng([seed(), salt])


def describe(default_vectors=None):
    """The line a failing test prints to be reproduced: ``NEARTRAIN_SEED=.. NEARTRAIN_VECTORS=..``."""
    count = os.environ.get("NEARTRAIN_VECTORS", "").strip() or (
        "default" if default_vectors is None else str(default_vectors))
    return f"NEARTRAIN_SEED={seed()} NEARTRAIN_VECTORS={count}"


def waves():
    """True when ``WAVES=1``."""
    return os.environ.get("WAVES", "0").strip() not in ("", "0")
