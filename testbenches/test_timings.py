"""The README's timing table: what it shows of a run's output, and the rows a partial measurement keeps."""

import json

from scripts.flow import docs, timings

STEPS = [f"step {i}: {i}.0 s" for i in range(20)]
RUN_OUTPUT = "\n".join(["pip noise"] * 30 + STEPS + ["run: total 190 s", ""])
TEST_OUTPUT = "\n".join(["....."] * 5 + ["===== slowest 30 durations =====", "87.6s call a", "74.0s call b",
                                         "73.9s call c", "70.1s call d", "1642 passed in 1556.67s (0:25:56)"])


def test_the_run_sample_is_the_tail_of_its_steps():
    sample = timings.output_sample("run", RUN_OUTPUT)
    assert len(sample) == timings._RUN_TAIL and sample[-1] == "run: total 190 s" and "pip noise" not in sample


def test_the_test_sample_is_the_three_slowest_and_the_count():
    assert timings.output_sample("test", TEST_OUTPUT) == [
        "===== slowest 30 durations =====", "87.6s call a", "74.0s call b", "73.9s call c", "...",
        "1642 passed in 1556.67s (0:25:56)"]


def test_a_partial_measurement_keeps_the_other_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(docs, "DATA", tmp_path)
    stored = [["make run", "cold", "9 min 00 s", "1.0", 2, "d"],
              ["make test", "warm", "26 min 00 s", "1.9", 2, "d"]]
    spec = {"name": timings.TABLE, "doc": timings.DOC, "command": "c", "headers": timings.HEADERS,
            "rows": stored}
    (tmp_path / f"{timings.TABLE}.json").write_text(json.dumps(spec))
    assert timings.kept_rows({("make run", "cold")}) == [stored[1]]


def test_here_measures_only_warm_runs(capsys):
    import pytest

    with pytest.raises(SystemExit) as stop:
        timings.main(["--here", "--states", "cold"])
    assert stop.value.code == 2 and "--here measures only warm runs" in capsys.readouterr().err
