"""The runner itself: a cocotb run that executes no test, or not the ones it names, must fail."""

import pathlib
import re

import cocotb
import pytest

from scripts.sim.runner import SimulationError, check_results, prune_builds, run_cocotb, selection_filter

MODULE = "testbenches.bus.test_skid_buffer"
# The same block and parameters as test_skid_buffer.py's smallest skid buffer: the build is shared.
SMALL = {"width": 1}
FEW = {"NEARTRAIN_VECTORS": "50"}


def _xml(tmp_path, *cases):
    body = "".join(f'<testcase classname="m" name="{name}">{inner}</testcase>' for name, inner in cases)
    path = tmp_path / "results.xml"
    path.write_text(f'<testsuites><testsuite name="all">{body}</testsuite></testsuites>')
    return path


def _forget_empty_results(failure):
    """Remove the results.xml of a deliberately empty run, so that CI's scan of build/ (which
    fails on any results.xml without a test case) sees only real runs."""
    folder = re.search(r"\(build folder (.+)\)$", str(failure.value)).group(1)
    results = pathlib.Path(folder) / "results.xml"
    if results.exists() and "<testcase" not in results.read_text():
        results.unlink()


def test_unknown_selection_fails():
    expected = r"no cocotb test executed \(selection: no_such_test"
    with pytest.raises(SimulationError, match=expected) as failure:
        run_cocotb("skid_buffer", MODULE, params=SMALL, testcase="no_such_test", extra_env=FEW)
    _forget_empty_results(failure)


def test_one_unknown_name_among_known_ones_fails():
    with pytest.raises(SimulationError, match="the selection names no_such_test, which did not run"):
        run_cocotb("skid_buffer", MODULE, params=SMALL, extra_env=FEW,
                   testcase=["throughput_without_stalls", "no_such_test"])


def test_bare_name_runs_every_parametrized_variant():
    outcomes = run_cocotb("skid_buffer", MODULE, params=SMALL, testcase="stream_order_under_stalls",
                          extra_env=FEW).outcomes
    assert sorted(outcomes) == sorted(
        f"stream_order_under_stalls/idle={idle}/backpressure={backpressure}"
        for idle in (False, True) for backpressure in (False, True))
    assert set(outcomes.values()) == {"passed"}


def test_filter_matches_variants_but_not_longer_names():
    pattern = re.compile(selection_filter(("bench",)))
    assert pattern.search("testbenches.x.bench")
    assert pattern.search("testbenches.x.bench/lanes=4/mode='a'")
    assert not pattern.search("testbenches.x.bench_fast")
    assert not pattern.search("testbenches.x.my_bench")
    assert not pattern.search("testbenches.bench.other")
    assert selection_filter(()) is None


def test_results_with_no_testcase_fail(tmp_path):
    with pytest.raises(SimulationError, match="no cocotb test executed"):
        check_results(_xml(tmp_path), ())


def test_results_with_only_skipped_tests_fail(tmp_path):
    with pytest.raises(SimulationError, match="1 skipped"):
        check_results(_xml(tmp_path, ("a", "<skipped/>")), ())


def test_results_missing_a_selected_name_fail(tmp_path):
    path = _xml(tmp_path, ("a/x=1", ""), ("b", "<skipped/>"))
    assert check_results(path, ("a",)) == {"a/x=1": "passed", "b": "skipped"}
    with pytest.raises(SimulationError, match="the selection names b, which did not run"):
        check_results(path, ("a", "b"))


def test_results_with_a_failed_test_fail(tmp_path):
    path = _xml(tmp_path, ("a", ""), ("b/x=1", "<failure/>"))
    with pytest.raises(SimulationError, match=r"failed: b/x=1 \(1 of 2 tests\)"):
        check_results(path, ())


@cocotb.test()
async def deliberately_fails(dut):
    """Fails, so that the runner's report of a failed cocotb test is itself tested."""
    assert int(dut.rst.value) == int(dut.rst.value) + 1, "this test fails on purpose"


def test_a_failed_cocotb_test_fails_the_run():
    with pytest.raises(SimulationError, match="failed: deliberately_fails"):
        run_cocotb("skid_buffer", __name__, params=SMALL, testcase="deliberately_fails", extra_env=FEW)


def test_missing_results_file_fails(tmp_path):
    with pytest.raises(SimulationError, match="no results file"):
        check_results(tmp_path / "results.xml", ())


def test_prune_builds_deletes_least_recently_used_first(tmp_path):
    import fcntl
    import os

    for age, name in enumerate(["newest", "middle", "oldest", "busy"]):
        folder = tmp_path / "cocotb_x" / name
        folder.mkdir(parents=True)
        (folder / "model.bin").write_bytes(b"x" * 1000)
        (folder / ".lock").write_text("")
        os.utime(folder / ".lock", (1e9 - 100 * age, 1e9 - 100 * age))
    (tmp_path / "_verilator_runtime" / "k").mkdir(parents=True)
    (tmp_path / "_verilator_runtime" / "k" / "verilated.o").write_bytes(b"x" * 5000)
    with open(tmp_path / "cocotb_x" / "busy" / ".lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        # 4000 bytes of builds against a 2500-byte cap: the busy (oldest) one stays, then the
        # oldest idle ones go until the cap holds.
        assert prune_builds(tmp_path, cap_bytes=2500) == 2
    assert sorted(p.name for p in (tmp_path / "cocotb_x").iterdir()) == ["busy", "newest"]
    assert (tmp_path / "_verilator_runtime" / "k" / "verilated.o").exists()
    assert prune_builds(tmp_path, cap_bytes=10_000) == 0


def test_prune_builds_skips_folders_being_made_or_already_gone(tmp_path, monkeypatch):
    import os

    from scripts.sim import runner

    for age, name in enumerate(["new", "old", "gone"]):
        folder = tmp_path / "block" / name
        folder.mkdir(parents=True)
        (folder / "model.bin").write_bytes(b"x" * 1000)
        (folder / ".lock").write_text("")
        os.utime(folder / ".lock", (1e9 - 100 * age, 1e9 - 100 * age))
    making = tmp_path / "block" / "making"  # mkdir'ed by a run that has not opened its lock yet
    making.mkdir()
    (making / "model.bin").write_bytes(b"x" * 1000)
    sizes = runner._folder_size

    def size_then_vanish(folder):
        # Another worker deletes "gone" (the oldest) after this one has listed it.
        size = sizes(folder)
        if folder.name == "gone":
            import shutil
            shutil.rmtree(folder)
        return size

    monkeypatch.setattr(runner, "_folder_size", size_then_vanish)
    assert prune_builds(tmp_path, cap_bytes=2500) == 1
    assert sorted(p.name for p in (tmp_path / "block").iterdir()) == ["making", "new"]


def test_a_simulation_replies_through_the_channel():
    reply = run_cocotb("skid_buffer", MODULE, params=SMALL, testcase="throughput_without_stalls",
                       extra_env=FEW).reply
    assert reply["transfers"] == 50 and reply["cycles"] >= 50


def test_channel_round_trip(tmp_path, monkeypatch):
    from scripts.sim import channel

    assert not channel.has_job()  # outside a simulation
    environment = channel.open_channel(tmp_path, block="skid_buffer", params={"width": 1}, job=[1, "a"])
    monkeypatch.setenv(*next(iter(environment.items())))
    assert channel.has_job() and channel.job() == [1, "a"]
    assert channel.block() == "skid_buffer" and channel.params() == {"width": 1}
    channel.reply({"x": 2})
    assert channel.close_channel(tmp_path) == {"x": 2}
    assert list(tmp_path.iterdir()) == []
