"""``neartrain results -o PATH`` with a path it cannot write: one line, exit status 2, and before any
block is measured (the page is written only at the end of a run that can take hours; before, a bad
path ended that run with a traceback)."""

import pytest

from scripts.cli import main


@pytest.mark.parametrize("kind", ["under_a_file", "a_folder"])
def test_results_refuses_a_bad_output_path(tmp_path, capsys, kind):
    blocker = tmp_path / "file"
    blocker.write_text("")
    output = blocker / "results.md" if kind == "under_a_file" else tmp_path
    assert main(["results", "--cache-only", "--blocks", "skid_buffer", "-o", str(output)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    named = output.parent if kind == "under_a_file" else output
    assert len(lines) == 1 and lines[0].startswith("neartrain: error: ") and str(named) in lines[0], lines
    assert "results:" not in captured.err + captured.out, "a bad path must be refused before measuring"
