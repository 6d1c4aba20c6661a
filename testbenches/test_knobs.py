"""The environment knobs (``scripts/sim/knobs.py``): checked once, at start-up, in one line.

A bad ``NEARTRAIN_SEED`` / ``NEARTRAIN_VECTORS`` / ``NEARTRAIN_SIM_CAP_GB`` must stop a pytest
session before any test runs, with one line naming the variable and its value and a non-zero
exit; a test whose work cannot grow clamps ``NEARTRAIN_VECTORS`` to its limit and says so; a
missing oracle fails on CI instead of skipping.
"""

import os
import subprocess
import sys
import warnings

import pytest

from scripts.sim import knobs
from scripts.sim.runner import prune_builds

KNOBS = ("NEARTRAIN_SEED", "NEARTRAIN_VECTORS", "NEARTRAIN_SIM_CAP_GB", "CI")
# A cheap test of this file (it sets its own knob), run by the sub-sessions below: it passes
# when the session starts, so a bad knob's session must never get to it.
PROBE = f"{__file__}::test_sim_cap"

BAD = [("NEARTRAIN_VECTORS", "0"), ("NEARTRAIN_VECTORS", "abc"), ("NEARTRAIN_SEED", "abc"),
       ("NEARTRAIN_SEED", "-1"), ("NEARTRAIN_SIM_CAP_GB", "0"), ("NEARTRAIN_SIM_CAP_GB", "-1")]
GOOD = {"NEARTRAIN_SEED": "0", "NEARTRAIN_VECTORS": "2000", "NEARTRAIN_SIM_CAP_GB": "0.5"}


def _sessions(*knob_sets):
    """The (exit status, non-blank output lines) of one pytest session per knob set, run at once."""
    runs = []
    for knob_values in knob_sets:
        env = {name: value for name, value in os.environ.items() if name not in KNOBS}
        env.update(knob_values)
        runs.append(subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p",
                                      "no:cacheprovider", PROBE], env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    return [(run.returncode, [line for line in out.splitlines() if line.strip()])
            for run, (out, _) in ((run, run.communicate(timeout=300)) for run in runs)]


def test_bad_knobs_stop_the_session_in_one_line():
    *bad, good = _sessions(*({name: value} for name, value in BAD), GOOD)
    for (name, value), (status, lines) in zip(BAD, bad, strict=True):
        assert status != 0 and len(lines) == 1, (name, value, status, lines)
        assert name in lines[0] and repr(value) in lines[0], lines
    status, lines = good
    assert status == 0 and "1 passed" in lines[-1], lines


@pytest.mark.parametrize("name,value", BAD + [
    ("NEARTRAIN_VECTORS", "-3"), ("NEARTRAIN_VECTORS", "2.5"), ("NEARTRAIN_VECTORS", "1e3"),
    ("NEARTRAIN_SEED", "0.5"), ("NEARTRAIN_SIM_CAP_GB", "nan"), ("NEARTRAIN_SIM_CAP_GB", "lots"),
])
def test_check_refuses(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(knobs.KnobError, match=f"^{name} must be .*, not '{value}'$"):
        knobs.check()


def test_vectors_default_override_and_clamp(monkeypatch):
    monkeypatch.delenv("NEARTRAIN_VECTORS", raising=False)
    assert knobs.vectors(7) == 7
    monkeypatch.setenv("NEARTRAIN_VECTORS", "2000")
    assert knobs.vectors(7) == 2000
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert knobs.vectors(7, limit=2000) == 2000  # at the limit: no note
    with pytest.warns(knobs.VectorsClamped, match="NEARTRAIN_VECTORS=2000 .* clamped to its limit of 50"):
        assert knobs.vectors(7, limit=50) == 50
    with pytest.raises(ValueError, match="default vector count 60"):
        knobs.vectors(60, limit=50)


def test_sim_cap(monkeypatch):
    monkeypatch.delenv("NEARTRAIN_SIM_CAP_GB", raising=False)
    assert knobs.sim_cap_bytes() == 8e9
    monkeypatch.setenv("NEARTRAIN_SIM_CAP_GB", "0.25")
    assert knobs.sim_cap_bytes() == 0.25e9


@pytest.mark.parametrize("cap", ["0", "-2"])
def test_a_cap_of_zero_or_less_deletes_no_build(tmp_path, monkeypatch, cap):
    folder = tmp_path / "block" / "idle"
    folder.mkdir(parents=True)
    (folder / "model.bin").write_bytes(b"x" * 1000)
    (folder / ".lock").write_text("")
    monkeypatch.setenv("NEARTRAIN_SIM_CAP_GB", cap)
    with pytest.raises(knobs.KnobError, match=f"NEARTRAIN_SIM_CAP_GB .* not '{cap}'"):
        prune_builds(tmp_path)
    with pytest.raises(knobs.KnobError):
        prune_builds(tmp_path, cap_bytes=0)
    assert (folder / "model.bin").exists()


@pytest.mark.parametrize("ci,outcome", [("true", pytest.fail.Exception), ("1", pytest.fail.Exception),
                                        ("", pytest.skip.Exception), ("0", pytest.skip.Exception),
                                        ("false", pytest.skip.Exception)])
def test_missing_oracle_fails_on_ci_and_skips_elsewhere(monkeypatch, ci, outcome):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="neartrain_no_such_oracle") as raised:
        knobs.oracle("neartrain_no_such_oracle", "the test oracle")
    assert "\n" not in str(raised.value)


def test_present_oracle_is_imported(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert knobs.oracle("json", "the standard library") is sys.modules["json"]
