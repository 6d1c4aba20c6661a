"""DPT's Table 4 for ResNet-50 and Faster R-CNN: the paper, the analytic sweep and the trace model.

Usage::

    .venv/bin/python scripts/flow/partition_trace.py [--print-only]

The analytic model is :mod:`golden.systolic.partition` (equation 3 with ``max(GEMM, DRAM)`` per
pass), the trace model :mod:`golden.systolic.trace_model` (4 KB SSD blocks, DRAM bus beats, a
simulated forward pipeline); the networks are :func:`golden.systolic.networks.resnet50` and
:func:`golden.systolic.networks_detection.faster_rcnn`. It writes the tables ``partition-trace-table3``,
``partition-trace-table4`` and ``partition-trace-matches`` of docs/systolic.md through
:func:`scripts.flow.docs.write_table`.
"""

import argparse

from tabulate import tabulate

from golden.systolic.dpt_tables import (
    TABLE3_FASTER_RCNN_FIT,
    TABLE3_RESNET50_FIT,
    TABLE4_FASTER_RCNN,
    TABLE4_RESNET50,
)
from golden.systolic.networks import resnet50
from golden.systolic.networks_detection import faster_rcnn
from golden.systolic.partition import TEST_CASES, partition_sweep
from golden.systolic.trace_model import trace_sweep

BATCHES = (32, 64, 128, 256, 512)
SSD_COUNTS = (2, 4)
CIRCLED = {1: "①", 2: "②", 3: "③"}
COMMAND = ".venv/bin/python scripts/flow/partition_trace.py"
MODELS = (("analytic", partition_sweep), ("trace", trace_sweep))
# Table 4's cells, in the paper's column order within each test case.
CELLS = [(case, ssds, batch) for case in TEST_CASES for batch in BATCHES for ssds in SSD_COUNTS]


def networks():
    """The two networks of DPT's Table 4 with their Table 3 fit and Table 4 cells.

    Returns
    -------
    list of tuple
        ``(network, (cycles per sample, constant), {(case, ssds, batch): (percent, index)})``.
    """
    return [(resnet50(), TABLE3_RESNET50_FIT, TABLE4_RESNET50),
            (faster_rcnn(), TABLE3_FASTER_RCNN_FIT, TABLE4_FASTER_RCNN)]


def sweep_all(network):
    """Best index and improvement of both models in every Table 4 cell.

    Parameters
    ----------
    network : golden.systolic.networks.Network

    Returns
    -------
    dict
        ``{model name: {(case, ssds, batch): (percent, index)}}``; also ``"baseline"``: the
        trace model's NPU-only latency on the 96 x 96 array (case ②) per batch.
    """
    results = {name: {} for name, _ in MODELS}
    results["baseline"] = {}
    for case, ssds, batch in CELLS:
        ssd_array, npu_array = TEST_CASES[case]
        for name, sweep in MODELS:
            result = sweep(network, ssd_array=ssd_array, npu_array=npu_array, ssds=ssds, batch=batch)
            results[name][(case, ssds, batch)] = (100 * result.improvement, result.best_index)
            if name == "trace" and case == 2:
                results["baseline"][batch] = float(result.latency[0])
    return results


def tables(runs):
    """The three tables of docs/systolic.md this script writes.

    Parameters
    ----------
    runs : list of tuple
        ``(network, Table 3 fit, Table 4 cells, sweep_all(network))`` per network.

    Returns
    -------
    list of tuple
        ``(name, title, (headers, rows, colalign))``.
    """
    return [
        ("partition-trace-table3", "NPU-only baseline on 96x96 against DPT's Table 3 lines", _table3(runs)),
        ("partition-trace-table4", "Table 4: DPT, analytic model, trace model", _table4(runs)),
        ("partition-trace-matches", "Cells matched (of 30 per network)", _matches(runs)),
    ]


def _table3(runs):
    """NPU-only cycles per sample and the constant on 96 x 96: DPT's Table 3 line and the trace model."""
    rows = []
    for network, (per_sample, constant), _, results in runs:
        baseline = results["baseline"]
        ours = (baseline[64] - baseline[32]) / 32
        rows.append([network.name, len(network.layers), f"{per_sample:,}", f"{ours:,.0f}",
                     f"{ours / per_sample:.3f}", f"{constant:,}", f"{baseline[32] - 32 * ours:,.0f}"])
    headers = ["network", "layers", "DPT cycles / sample", "trace model", "ratio", "DPT constant",
               "trace constant"]
    return headers, rows, ("left",) + ("right",) * 6


def _table4(runs):
    """Improvement (partition index) per case, smartSSD count and batch: DPT, then each model."""
    rows = []
    for network, _, paper, results in runs:
        for case, (ssd_array, npu_array) in TEST_CASES.items():
            label = f"{CIRCLED[case]} ({ssd_array[0]}x{ssd_array[1]}, {npu_array[0]}x{npu_array[1]})"
            sources = (("DPT", paper), *((name, results[name]) for name, _ in MODELS))
            for position, (source, cells) in enumerate(sources):
                first = position == 0
                rows.append([network.name if first and case == 1 else "", label if first else "", source,
                             *(f"{cells[key][0]:.1f}% ({cells[key][1]})" for key in CELLS if key[0] == case)])
    columns = [f"({ssds}, {batch})" for case, ssds, batch in CELLS if case == 1]
    return ["network", "case (SSD, NPU)", "source", *columns], rows, ("left",) * 3 + ("right",) * len(columns)


def _matches(runs):
    """Cells where a model's index equals DPT's or is within one, and its improvement within 2 points."""
    rows = []
    for network, _, paper, results in runs:
        for name, _ in MODELS:
            cells = results[name]
            index = sum(cells[key][1] == paper[key][1] for key in paper)
            near = sum(abs(cells[key][1] - paper[key][1]) <= 1 for key in paper)
            close = sum(abs(cells[key][0] - paper[key][0]) <= 2 for key in paper)
            rows.append([network.name, name, *(f"{count} / {len(paper)}" for count in (index, near, close))])
    headers = ["network", "model", "index = DPT's", "index within 1", "improvement within 2 points"]
    return headers, rows, ("left", "left", "right", "right", "right")


def _runs():
    """Both networks with their DPT tables and :func:`sweep_all` results."""
    return [(network, fit, paper, sweep_all(network)) for network, fit, paper in networks()]


def main(argv=None):
    """Print the tables and, unless ``--print-only``, write them to docs/systolic.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print-only", action="store_true", help="leave docs/systolic.md unchanged")
    args = parser.parse_args(argv)
    runs = _runs()
    sections = tables(runs)
    for _name, title, (headers, rows, colalign) in sections:
        print(f"### {title}\n")
        print(tabulate(rows, headers=headers, tablefmt="github", colalign=colalign, disable_numparse=True))
        print()
    if args.print_only:
        return
    from scripts.flow.docs import write_table

    for name, _title, (headers, rows, colalign) in sections:
        write_table("systolic.md", name, headers, rows, COMMAND, colalign=colalign, disable_numparse=True)
    print("wrote docs/systolic.md (" + ", ".join(name for name, _, _ in sections) + ")")


if __name__ == "__main__":
    main()
