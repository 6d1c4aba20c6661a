"""``neartrain results`` into docs/results.md: a run of some blocks replaces only their rows."""

import json

from rtl.registry import blocks
from scripts.flow import docs, results_table

TABLES = ("results-blocks", "results-critical-paths", "results-kernel", "results-setup", "board-budgets",
          "results-timing-summary")


def test_a_partial_run_keeps_the_other_blocks_rows_in_registry_order(tmp_path, monkeypatch):
    from boards import boards

    monkeypatch.setattr(docs, "DOCS", tmp_path)
    monkeypatch.setattr(docs, "DATA", tmp_path / "data")
    monkeypatch.setattr(docs, "README", tmp_path / "no-readme-here.md")
    (tmp_path / results_table.RESULTS_DOC).write_text(
        "".join(f"<!-- generated: {name} -->\n<!-- /generated: {name} -->\n" for name in TABLES))
    outcome = {}

    def measure(block, overrides, **_):  # no tool runs: the row says what this fake decided
        return {"params": overrides, "fmax": None, "ecp5": {"pending": True},
                "xcup": {"error": outcome[block.name]}}

    monkeypatch.setattr(results_table, "measure_block", measure)
    first, second, third = list(blocks())[:3]
    board = boards()["ulx3s-85f"]

    def write(only):
        results_table.write_results(tmp_path / results_table.RESULTS_DOC, board=board, frequency_mhz=125,
                                    with_fmax=False, only=only)
        return json.loads((tmp_path / "data" / "results-blocks.json").read_text())

    outcome.update({first: "one", third: "three"})
    write([third, first])
    outcome.update({second: "two", third: "three again"})
    spec = write([third, second])
    cells = [(row[0], row[2]) for row in spec["rows"]]
    assert cells == [(first, "failed: one"), (second, "failed: two"), (third, "failed: three again")], cells
    assert spec["command"] == "neartrain results --board ulx3s-85f --freq 125 --no-fmax"
    assert not [problem for problem in docs.check() if "index" not in problem]  # no index in tmp_path


def test_the_mapper_column_names_the_ecp5_fallback_where_it_differs():
    from boards.targets import RESOURCE_COLUMNS

    block = next(iter(blocks().values()))
    resources = {column: 1 for target in ("xcup", "ecp5") for column in RESOURCE_COLUMNS[target]}
    rows = [{"params": {}, "fmax": None, "xcup": {**resources, "mapper": "abc9"},
             "ecp5": {**resources, "mapper": ecp5}} for ecp5 in ("abc9", "abc")]
    headers, table, _ = results_table.block_table([(block, rows)])
    column = headers.index("mapper")
    assert [row[column] for row in table] == ["abc9", "abc9 (ecp5: abc)"]


def test_the_blocks_routed_with_router2_are_registered_blocks():
    registered = blocks()
    assert set(results_table.KERNELS) <= set(results_table.ROUTER2_BLOCKS)
    assert [name for name in results_table.ROUTER2_BLOCKS if name not in registered] == []


def test_results_json_prints_the_tables_it_writes(tmp_path, monkeypatch, capsys):
    """``neartrain results --json``: the page is written and its tables come out as JSON."""
    from scripts.cli.main import main

    def measure(block, overrides, **_):  # no tool runs: the row says what this fake decided
        return {"params": overrides, "fmax": None, "ecp5": {"pending": True}, "xcup": {"error": "fake"}}

    monkeypatch.setattr(results_table, "measure_block", measure)
    page = tmp_path / "page.md"
    assert main(["results", "--no-fmax", "--blocks", "skid_buffer", "-o", str(page), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["page"] == str(page) and page.exists()
    rows = report["tables"]["results-blocks"]["rows"]
    assert [row[0] for row in rows] == ["skid_buffer"] and "failed: fake" in rows[0]


def test_the_timing_summary_counts_the_documented_rows():
    """The pass count in docs/results.md is the one the documented Fmax column gives (not stale)."""
    stored = json.loads((docs.DATA / "results-blocks.json").read_text())
    headers, rows, _ = results_table.timing_summary_table(stored["rows"], frequency_mhz=125)
    summary = json.loads((docs.DATA / "results-timing-summary.json").read_text())
    assert summary["rows"] == rows, f"stale: run {results_table.SUMMARY_COMMAND}"


def test_the_timing_summary_reads_fails_and_stops():
    rows = [["a", "defaults", "130.00"], ["b", "defaults", "99.00 (fails)"],
            ["c", "defaults", "120.00 (fails) (classic ABC)"], ["d", "defaults", "does not route (...)"],
            ["e", "defaults", "140.00; 110.00 (fails)"]]
    _, summary, _ = results_table.timing_summary_table(rows, frequency_mhz=125)
    assert dict(summary) == {"rows in the table": 5, "rows that place and route (an Fmax)": 4,
                             "of those, meeting 125 MHz": "1 (25.0 %)", "of those, below 100 MHz": 1,
                             "rows too large, not placed or not routed": 1}


def _routed(achieved, seed=1, clock=125):
    return {"seed": seed, "critical_path": {"from": f"seed{seed}", "to": "o"},
            "fmax": {"clk": {"achieved": achieved, "constraint": clock, "pass": achieved >= clock}}}


def test_a_row_near_the_clock_is_routed_with_a_second_seed_and_the_lower_counts(monkeypatch):
    """Seed 2 runs for a seed-1 Fmax within 10 % of the clock, and the cell's first figure,
    which the pass count reads, is the lower; a row far from the clock runs seed 1 only."""
    from scripts.flow import bitstream

    class Block:
        name = "some_block"

        @staticmethod
        def build(overrides):
            return None

    runs = []

    def measure(component, *, seed=1, **kwargs):
        runs.append(seed)
        return figures[seed]

    monkeypatch.setattr(bitstream, "measure_bitstream", measure)
    monkeypatch.setattr("scripts.flow.synth.synthesize", lambda component, target: {"mapper": "abc9"})
    monkeypatch.setattr(results_table, "too_large", lambda resources, board: None)
    for figures, expected_runs, cell, passes in (
            ({1: _routed(130.0), 2: _routed(121.5, seed=2)}, [1, 2],
             "121.50 (fails) (seed 1: 130.00, seed 2: 121.50)", False),
            ({1: _routed(118.0), 2: _routed(126.0, seed=2)}, [1, 2],
             "118.00 (fails) (seed 1: 118.00, seed 2: 126.00)", False),
            ({1: _routed(133.0), 2: _routed(128.0, seed=2)}, [1, 2],
             "128.00 (seed 1: 133.00, seed 2: 128.00)", True),
            ({1: _routed(150.0)}, [1], "150.00", True),
            ({1: _routed(90.0)}, [1], "90.00 (fails)", False)):
        runs.clear()
        row = results_table.measure_block(Block, {}, board=None, frequency_mhz=125, with_fmax=True)
        assert runs == expected_runs
        assert results_table._fmax_cell(row["fmax"]) == cell
        slowest = min(figures, key=lambda seed: figures[seed]["fmax"]["clk"]["achieved"])
        assert row["fmax"]["critical_path"]["from"] == f"seed{slowest}"  # the slower seed's path
        _, summary, _ = results_table.timing_summary_table([["b", "defaults", cell]], frequency_mhz=125)
        assert dict(summary)["of those, meeting 125 MHz"] == ("1 (100.0 %)" if passes else "0 (0.0 %)")


def test_results_jobs_measure_in_worker_processes_and_keep_the_order(tmp_path):
    """``neartrain results --jobs 2``: the rows come back from worker processes (which look each
    block up by name) in the order of a one-job run. ``--cache-only`` runs no tool, so the rows
    are whatever this checkout's caches hold, the same both ways."""
    from scripts.cli.main import main

    names = ["fp_add", "skid_buffer", "memory_port"]  # fp_add and memory_port have two configurations
    tables = {}
    for jobs in ("1", "2"):
        page = tmp_path / f"jobs{jobs}.md"
        assert main(["results", "--cache-only", "--blocks", *names, "-o", str(page), "--jobs", jobs]) == 0
        tables[jobs] = page.read_text()
    assert tables["1"] == tables["2"]
    rows = [line.split("|")[1:3] for line in tables["2"].splitlines()
            if line.startswith("| ") and line.split("|")[1].strip() in names]
    assert [(name.strip(), params.strip()) for name, params in rows][:5] == [
        ("fp_add", "defaults"), ("fp_add", "fmt=bf16"), ("skid_buffer", "defaults"),
        ("memory_port", "defaults"), ("memory_port", "data_width=128")]


def test_results_jobs_must_be_at_least_one(capsys):
    from scripts.cli.main import main

    assert main(["results", "--jobs", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--jobs" in err and "must be a whole number >= 1" in err
