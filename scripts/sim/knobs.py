"""The environment knobs every randomised test reads, each checked once.

``NEARTRAIN_SEED``
    Seed of every random generator: an integer >= 0 (default 1). A failing test prints it, so
    ``NEARTRAIN_SEED=<n> make test`` reproduces the failure.
``NEARTRAIN_VECTORS``
    Overrides the number of random vectors (or transfers, or elements) a test uses: an integer
    >= 1. Each test names its own default, sized for the fast suite. A test whose work cannot
    grow past some count (a demo's step limit, a memory's size) clamps to it and says so with a
    :class:`VectorsClamped` warning, rather than failing.
``NEARTRAIN_SIM_CAP_GB``
    The size, in gigabytes (a number > 0, default 8), that :mod:`.runner` prunes ``build/sim`` to.
``WAVES``
    ``WAVES=1`` makes the cocotb runs write VCD waves (``dump.vcd``) into their build folder.
``CI``
    Set (to anything but ``0`` or ``false``) on a CI machine: an oracle a test needs
    (:func:`oracle`) must then be installed, so its tests fail rather than skip.

The test session calls :func:`check` at start-up (``testbenches/conftest.py``), so a bad value
stops it with one line naming the variable, before any test runs. One more knob is read by
:mod:`.runner` when it builds: ``NEARTRAIN_MODEL_OPT`` (the model's C++ optimisation, default
``-O0``). Data passed by code never travels in the environment: see :mod:`.channel`.
"""

import math
import os
import warnings

import numpy as np

__all__ = ["KnobError", "VectorsClamped", "check", "seed", "vectors", "rng", "describe", "waves",
           "sim_cap_bytes", "on_ci", "oracle"]


class KnobError(ValueError):
    """An environment knob holds a value NearTrain cannot use; the message is one line."""


class VectorsClamped(UserWarning):
    """``NEARTRAIN_VECTORS`` asked a test for more than its work can scale to; it used its limit."""


def _env_int(name, default, minimum):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text, 10)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise KnobError(f"{name} must be an integer >= {minimum}, not {text!r}")
    return value


def check():
    """Check every knob once; raise :class:`KnobError` (one line) naming the first bad one."""
    seed()
    vectors(1)
    sim_cap_bytes()


def seed():
    """The seed from ``NEARTRAIN_SEED`` (default 1)."""
    return _env_int("NEARTRAIN_SEED", 1, 0)


def vectors(default, limit=None):
    """The vector count: ``NEARTRAIN_VECTORS`` if set, else the test's ``default``.

    Parameters
    ----------
    default : int
        The test's own count, sized for the fast suite.
    limit : int, optional
        The most the test's work can take (a demo's step limit, the rows of a memory, a run
        that would take hours). A larger ``NEARTRAIN_VECTORS`` is clamped to it, with a
        one-line :class:`VectorsClamped` warning naming both counts, so that the test still
        runs instead of failing.
    """
    count = _env_int("NEARTRAIN_VECTORS", default, 1)
    if limit is not None and not 1 <= default <= limit:
        raise ValueError(f"a test's default vector count {default} must be in [1, limit={limit}]")
    if limit is not None and count > limit:
        warnings.warn(VectorsClamped(f"NEARTRAIN_VECTORS={count} is more than this test can take: "
                                     f"clamped to its limit of {limit}"), stacklevel=2)
        return limit
    return count


def rng(salt=0):
    """A NumPy generator seeded from ``NEARTRAIN_SEED``.

    ``salt`` separates the streams of independent generators in one test (for example
    the data and the stall pattern) so that changing one does not shift the other.
    """
    return np.random.default_rng([seed(), salt])


def describe(default_vectors=None):
    """The line a failing test prints to be reproduced: ``NEARTRAIN_SEED=.. NEARTRAIN_VECTORS=..``."""
    # Read as text, not checked: the line must be printable whatever the environment holds.
    count = os.environ.get("NEARTRAIN_VECTORS", "").strip() or (
        "default" if default_vectors is None else str(default_vectors))
    return f"NEARTRAIN_SEED={os.environ.get('NEARTRAIN_SEED', '').strip() or 1} NEARTRAIN_VECTORS={count}"


def waves():
    """True when ``WAVES=1``."""
    return os.environ.get("WAVES", "0").strip() not in ("", "0")


def sim_cap_bytes(default_gb=8):
    """The size :mod:`.runner` prunes ``build/sim`` to, in bytes, from ``NEARTRAIN_SIM_CAP_GB``.

    The cap must be a number > 0 (``inf``: never prune): a cap of 0 or less would delete every
    build that is not in use.
    """
    name = "NEARTRAIN_SIM_CAP_GB"
    text = os.environ.get(name, "").strip()
    if not text:
        return default_gb * 1e9
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:  # also refuses nan
        raise KnobError(f"{name} must be a number of gigabytes > 0, not {text!r}")
    return value * 1e9


def on_ci():
    """True on a CI machine: ``CI`` is set to anything but empty, ``0`` or ``false``."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def oracle(name, reason):
    """Import the optional oracle module ``name`` (e.g. ``"torch"``) for a test.

    Without it the test skips with ``reason``, except on CI (:func:`on_ci`), where the oracle is
    part of the checks and its absence fails the test with one line. Only for third-party oracles:
    the project's own modules are imported plainly, so that their ImportError is a failure.
    """
    import pytest

    try:
        return pytest.importorskip(name, reason=f"{name} cannot be imported: {reason}")
    except pytest.skip.Exception as skipped:
        if on_ci():
            pytest.fail(f"CI is set and the oracle {name} cannot be imported; {reason}", pytrace=False)
        raise skipped
