"""The ``optim-sweep`` table of docs/optim.md (:mod:`scripts.flow.sweep_table`): rows from a sweep CSV.

The efficiency columns are checked against figures computed here from the CSV and the
measured throughput rows, a failed point must say so in its row, and the table must end
with Smart-Infinity's Table III row. The script's own errors are one line with status 2.
"""

import csv

import pytest

from boards.references import SMART_INFINITY
from scripts.flow import sweep_table


def _points():
    return [
        {"lanes": "1", "status": "ok", "reason": "", "LUT": "20000", "FF": "21000", "CARRY": "2000",
         "DSP48E2": "10", "BRAM": "71.0", "URAM": "0", "mapper": "abc9", "cached": "1", "seconds": "1"},
        {"lanes": "16", "status": "ok", "reason": "", "LUT": "220000", "FF": "150000", "CARRY": "20000",
         "DSP48E2": "160", "BRAM": "117.0", "URAM": "0", "mapper": "abc", "cached": "0", "seconds": "9"},
        {"lanes": "3", "status": "failed", "reason": "SynthesisError: out of memory", "LUT": "", "FF": "",
         "CARRY": "", "DSP48E2": "", "BRAM": "", "URAM": "", "mapper": "", "cached": "0", "seconds": "1"},
    ]


def test_rows_divide_the_measured_rate_by_luts_and_dsps():
    rates = sweep_table._measured_rates()
    rows = sweep_table.sweep_rows(_points(), lambda point: f"lanes={point['lanes']}")
    by_name = {row[0]: row for row in rows}
    for lanes, luts, dsps in ((1, 20000, 10), (16, 220000, 160)):
        row = by_name[f"lanes={lanes}"]
        assert row[4] == f"{dsps:,}"
        assert float(row[-3]) == pytest.approx(rates[lanes], abs=0.005)
        assert float(row[-2]) == pytest.approx(1000 * rates[lanes] / luts, abs=1e-4)
        assert float(row[-1]) == pytest.approx(rates[lanes] / dsps, abs=1e-4)
    assert by_name["lanes=3"][-1].startswith("failed: SynthesisError")
    reference = rows[-1]
    assert reference[0].startswith("Smart-Infinity")
    dsp = round(SMART_INFINITY["DSP48E2"][0] * SMART_INFINITY["DSP48E2"][1])
    assert reference[4] == f"about {dsp}"
    assert float(reference[-1]) == pytest.approx(65536 / 30720 / dsp, abs=1e-4)


def test_measured_rates_cover_the_default_lanes():
    assert set(sweep_table._measured_rates()) >= {1, 2, 4, 8, 16}


def test_bad_input_is_one_line_with_status_2(tmp_path, capsys):
    path = tmp_path / "sweep.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["width", "status"])
        writer.writerow(["8", "ok"])
    assert sweep_table.main([str(path), "make sweep"]) == 2
    assert sweep_table.main([str(tmp_path / "missing.csv"), "make sweep"]) == 2
    assert sweep_table.main([]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and "not a sweep over lanes" in errors[0]


def test_the_plot_draws_every_stored_row_that_has_figures(tmp_path, monkeypatch):
    """The plot is drawn from the stored table alone (``--plot``): one point per row with figures."""
    import json

    from scripts.flow import figures

    monkeypatch.setattr(figures, "DOCS", tmp_path)
    points = sweep_table.plot_sweep()
    assert (tmp_path / sweep_table.PLOT).stat().st_size > 0
    rows = json.loads((sweep_table.DATA / "optim-sweep.json").read_text())["rows"]
    assert set(points) == {row[0] for row in rows if row[1] != "-"}
    luts, rate = points[rows[0][0]]
    assert luts == pytest.approx(float(rows[0][1].replace(",", "")) / 1000) and rate == float(rows[0][8])
