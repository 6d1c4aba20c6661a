"""``neartrain sweep``: CSV, plots, fit verdict, cache reuse, failing points, one-line errors."""

import csv

import pytest

from boards import Board, Clock
from rtl.elaborate import to_verilog
from rtl.registry import get_block
from scripts.cli import main
from scripts.flow.sweep import SweepResult, fit_report, format_fit_report, parse_vary

WIDTHS = (5, 7)


def _rows(folder):
    with open(folder / "sweep.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_sweep_writes_csv_plots_verdict_and_resumes_from_the_cache(tmp_path, capsys):
    from scripts.flow.synth import forget_resources

    block = get_block("skid_buffer")
    # Start from a cold cache for exactly these points, so the first run really synthesises.
    for width in WIDTHS:
        forget_resources(to_verilog(block.build({"width": width})), "ecp5")

    argv = ["sweep", "skid_buffer", "--vary", "width=" + ",".join(map(str, WIDTHS)), "--target", "ecp5",
            "--workers", "2", "-o", str(tmp_path)]
    assert main(argv) == 0
    first = capsys.readouterr()
    assert "2 points, 0 served from the cache, 0 failed" in first.out
    assert "largest point within every budget: width=7" in first.out
    assert "LUT4 is the closest to its budget" in first.out or "FF is the closest to its budget" in first.out
    assert "2/2" in first.err  # the progress bar
    rows = _rows(tmp_path)
    assert [row["width"] for row in rows] == ["5", "7"]
    assert all(row["status"] == "ok" and row["cached"] == "0" for row in rows)
    # A skid buffer holds two payloads plus two valid bits in flip-flops.
    assert [int(row["FF"]) for row in rows] == [2 * width + 2 for width in WIDTHS]
    for column in ("LUT4", "FF"):
        assert (tmp_path / f"{column}.png").stat().st_size > 1000
    # A skid buffer uses no multiplier and no block RAM at any width: no flat plot at zero.
    assert all(row["MULT18"] == row["EBR"] == "0" for row in rows)
    assert not (tmp_path / "MULT18.png").exists() and not (tmp_path / "EBR.png").exists()

    assert main(argv) == 0
    second = capsys.readouterr()
    assert "2 points, 2 served from the cache, 0 failed" in second.out
    again = _rows(tmp_path)
    assert all(row["cached"] == "1" for row in again)
    assert [row["LUT4"] for row in again] == [row["LUT4"] for row in rows]


def test_cached_resources_reads_what_synthesis_wrote():
    from scripts.flow.synth import cached_resources, synthesize_verilog

    # Not one of WIDTHS: under pytest-xdist this may run while the sweep test expects a cold cache.
    verilog = to_verilog(get_block("skid_buffer").build({"width": 6}))
    # Synthesise first: on a cold cache (a fresh CI machine) nothing has been written yet.
    synthesised = synthesize_verilog(verilog, "ecp5")
    assert cached_resources(verilog, "ecp5") == synthesised
    assert cached_resources(verilog + "// never synthesised\n", "ecp5") is None


def test_a_failing_point_is_marked_and_the_others_proceed(tmp_path, capsys):
    # input_width=48 passes the parameter range but not the converter's multiple-of-32 rule.
    argv = ["sweep", "width_converter", "--vary", "input_width=64,48", "--set", "output_width=32",
            "--set", "element_width=32", "--target", "ecp5", "--workers", "2", "-o", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = {row["input_width"]: row for row in _rows(tmp_path)}
    assert rows["64"]["status"] == "ok" and int(rows["64"]["FF"]) > 0
    assert rows["48"]["status"] == "failed"
    assert rows["48"]["reason"].startswith("elaboration: ValueError: input_width must be a multiple")
    assert rows["48"]["LUT4"] == ""
    assert "1 failed" in out and "FAILED input_width=48" in out


def _board(**budgets):
    return Board(name="tiny", title="tiny test board", device="none", target="ecp5", budgets=budgets,
                 sources={column: "test" for column in budgets}, clocks=(Clock("c", 1e8, "test"),),
                 memory="none")


def _result(uses):
    points = [{"params": {"lanes": lanes}, "status": "ok", "reason": "", "cached": False, "seconds": 0,
               "resources": {"LUT4": lut, "FF": ff, "MULT18": 0, "EBR": 0}} for lanes, lut, ff in uses]
    return SweepResult("adam_updater", "ecp5", [("lanes", [use[0] for use in uses])], points)


def test_fit_report_names_the_resource_that_runs_out_first():
    board = _board(LUT4=1000, FF=500, MULT18=4, EBR=4)
    result = _result([(1, 100, 90), (2, 200, 180), (4, 400, 360), (8, 800, 720)])
    report = fit_report(result, board)
    assert report["largest"] == "lanes=4"
    assert report["per_resource"]["LUT4"][1] == "lanes=8"
    assert report["per_resource"]["FF"][1] == "lanes=4"
    assert (report["limiting"], report["limiting_at"]) == ("FF", "lanes=8")
    assert report["limiting_share"] == pytest.approx(720 / 500)
    lines = format_fit_report(report, board)
    assert "FF runs out first: 144.00% of it at lanes=8" in lines[-1]


def test_parse_vary_validates_values():
    block = get_block("skid_buffer")
    assert parse_vary(block, ["width=8, 16"]) == [("width", [8, 16])]
    for bad, message in [("width=0", "width must be in 1..4096"), ("width", "--vary expects"),
                         ("depth=2", "has no parameter 'depth'")]:
        with pytest.raises(ValueError, match=message):
            parse_vary(block, [bad])
    with pytest.raises(ValueError, match="twice"):
        parse_vary(block, ["width=8", "width=9"])


_SKID = ["sweep", "skid_buffer", "--vary", "width=8"]


@pytest.mark.parametrize("argv, message", [
    (["sweep", "no_such_block", "--vary", "width=8", "--target", "xcup"], "unknown block 'no_such_block'"),
    ([*_SKID, "--target", "xcup", "--board", "nope"], "unknown board 'nope'"),
    ([*_SKID, "--target", "ecp5", "--board", "smartssd"], "is a xcup board"),
    (["sweep", "skid_buffer", "--vary", "width=8,x", "--target", "xcup"], "width must be an integer"),
    (["sweep", "skid_buffer", "--vary", "widht=8", "--target", "xcup"], "has no parameter 'widht'"),
    (["sweep", "skid_buffer", "--target", "xcup"], "at least one --vary"),
    (["sweep", "skid_buffer", "--vary", "width=8", "--target", "asic"], "invalid choice: 'asic'"),
    (["bitstream", "skid_buffer", "--board", "nope"], "unknown board 'nope'"),
    (["bitstream", "no_such_block"], "unknown block 'no_such_block'"),
    (["bitstream", "skid_buffer", "--board", "smartssd"], "has no open-toolchain flow"),
    (["bitstream", "skid_buffer", "--freq", "900"], "--freq: the ECP5 PLL output must be in"),
    (["results", "--blocks", "nope", "-o", "unused.md"], "unknown nope (blocks: "),
    (["results", "--families", "nope", "-o", "unused.md"], "unknown family nope"),
])
def test_user_errors_are_one_line_with_status_2(argv, message, tmp_path, capsys):
    if argv[0] == "sweep":
        argv = [*argv, "-o", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("neartrain: error: ")
    assert message in err


def test_sweep_json_gives_the_points(tmp_path, capsys):
    import json

    argv = ["sweep", "skid_buffer", "--vary", "width=4", "--target", "ecp5", "--workers", "1",
            "-o", str(tmp_path), "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["block"] == "skid_buffer" and report["failed"] == 0 and len(report["points"]) == 1
    point = report["points"][0]
    assert point["params"]["width"] == 4 and point["status"] == "ok"
    assert point["resources"]["FF"] == 2 * 4 + 2  # two payloads and two valid bits
