"""Scatter rate of ``topk_scatter`` against the lane count, and measured fused-mode DRAM traffic.

Run: ``.venv/bin/python -m scripts.bench_compress`` (``--quick`` for L = 1 and 4 only, docs left
unchanged). Each scatter point runs the cocotb test ``throughput`` on Verilator: one chunk of pairs
at full rate, no stalls, cycles counted in simulation (no wall clock); the output is checked
bit-exact as always. The fused-mode traffic rows run the cocotb test ``traffic`` of
``topk_axi_decompressor``: the pair stream is read from cocotbext-axi's ``AxiRam`` and every AXI
beat is counted. The paper-mode rows (``--paper`` runs only those) run the cocotb test ``measure_traffic`` of
``topk_dram_scatter``: zero fill and read-modify-write scatter into a dense region of an ``AxiRam``,
every AXI beat counted, the region checked bit for bit. The other DRAM rows are the model
:mod:`golden.compress.traffic`.
"""

import argparse
import json
import logging
import pathlib
import tempfile

from golden.compress import dram_traffic
from testbenches.compress.test_rtl_decompressor import AXI_PARAMS
from testbenches.harness import run_cocotb

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODULE = "testbenches.compress.cocotb_scatter_engine"
CHUNK_SIZE = 8192
KINDS = ("random", "shuffled", "consecutive", "same_bank", "same_index")
LANES = (1, 4, 8, 16)
COMMAND = ".venv/bin/python -m scripts.bench_compress"


def engine_params(lanes):
    banks = max(2, 2 * lanes)
    return {"lanes": lanes, "banks": banks, "chunk_size": CHUNK_SIZE, "out_lanes": min(16, banks),
            "value_format": "f32", "bank_writes": 3, "queue_depth": 8}


def measure(params, kind, pairs):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run_cocotb("topk_scatter", MODULE, params=params, testcase="throughput",
                   extra_env={"NEARTRAIN_BENCH_OUT": out.name, "NEARTRAIN_BENCH_KIND": kind,
                              "NEARTRAIN_VECTORS": str(pairs)})
        return json.loads(pathlib.Path(out.name).read_text())


def scatter_table(lanes_list):
    lines = ["| L | banks | pattern | pairs | steady cycles | steady pairs/cycle | per lane | "
             "incl. latency pairs/cycle |", "|---:|---:|---|---:|---:|---:|---:|---:|"]
    for lanes in lanes_list:
        params = engine_params(lanes)
        for kind in KINDS:
            pairs = CHUNK_SIZE // params["banks"] if kind == "same_bank" else CHUNK_SIZE // 2
            if kind == "same_index":
                pairs = min(pairs, 512)
            result = measure(params, kind, pairs)
            rate = result["steady_rate"]
            lines.append(f"| {lanes} | {params['banks']} | {kind} | {result['pairs']} | "
                         f"{result['steady_cycles']} | {rate:.2f} | {rate / lanes:.2f} | "
                         f"{result['total_rate']:.2f} |")
            print(lines[-1], flush=True)
    return lines


TRAFFIC_CHUNKS = 16  # chunks of AXI_PARAMS["chunk_size"] in the measured shard


def measured_fused_rows():
    """Rows of the fused mode measured by counting AXI beats (``traffic`` test), with the model beside."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run_cocotb("topk_axi_decompressor", "testbenches.compress.cocotb_axi_decompressor", params=AXI_PARAMS,
                   testcase="traffic", extra_env={"NEARTRAIN_BENCH_OUT": out.name,
                                                  "NEARTRAIN_VECTORS": str(TRAFFIC_CHUNKS)})
        results = json.loads(pathlib.Path(out.name).read_text())
    lines = []
    for r in results:
        model = dram_traffic("fused", ratio=r["pairs"] / r["size"], param_copy_bytes=4,
                             chunk_size=r["chunk_size"])
        state = model.state_read + model.state_write
        measured = (r["read_bytes"] + r["write_bytes"]) / r["size"]
        # Dense-gradient bytes: the test asserts that every read beat lies in the pair stream, so
        # only writes could be dense gradient.
        lines.append(f"| fused, chunk {r['chunk_size']} | RTL, AXI beats counted ({r['size']} elements, "
                     f"{r['pairs']} pairs; model {model.pair_read:.4f}) | {r['ratio']} | "
                     f"{r['write_bytes'] / r['size']:.3f} | {r['read_bytes'] / r['size']:.4f} | "
                     f"{state:.0f} (model) | {state + measured:.3f} |")
        print(lines[-1], flush=True)
    return lines


DRAM_MODULE = "testbenches.compress.cocotb_dram_scatter"
DRAM_SIZE = 16384      # elements of the dense region per paper-mode run
DRAM_LANES = (1, 4, 8, 16)
UPDATER_READ_BACK = 4  # f32 dense gradient bytes the updater reads back per parameter (model)


def dram_scatter_params(lanes):
    """The paper-mode bench configuration: 512-bit dense port (SmartSSD), f32 pairs, 16 RMWs in flight."""
    from testbenches.compress.test_rtl_dram_scatter import dram_scatter

    return dram_scatter(lanes, 512, "f32")


def measure_dram_scatter(lanes, size=DRAM_SIZE):
    """Run the ``measure_traffic`` test of ``topk_dram_scatter`` with ``lanes``; return its results."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run_cocotb("topk_dram_scatter", DRAM_MODULE, params=dram_scatter_params(lanes),
                   testcase="measure_traffic",
                   extra_env={"NEARTRAIN_BENCH_OUT": out.name, "NEARTRAIN_VECTORS": str(size)})
        return json.loads(pathlib.Path(out.name).read_text())


def dram_rate_table(results_by_lanes):
    """Scatter rate of the paper mode against L: pairs per cycle from the first RMW read to ``done``."""
    lines = ["| L | ratio | pairs | zero-fill + scatter cycles | scatter cycles | pairs/cycle (scatter) | "
             "dense read beats | dense write beats | pair read beats |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for lanes, results in results_by_lanes.items():
        for r in results:
            rate = r["pairs"] / r["scatter_cycles"] if r["scatter_cycles"] else 0.0
            lines.append(f"| {lanes} | {r['ratio']} | {r['pairs']} | {r['cycles']} | {r['scatter_cycles']} | "
                         f"{rate:.2f} | {r['dense_reads']} | {r['dense_writes']} | {r['pair_reads']} |")
            print(lines[-1], flush=True)
    return lines


def measured_paper_rows(results):
    """Paper-mode rows of the traffic table: measured AXI beats, plus the modelled read-back and state."""
    lines = []
    for r in results:
        if r["ratio"] not in (0.001, 0.01, 0.1):
            continue
        size = r["size"]
        model = dram_traffic("zero_fill_scatter", ratio=r["pairs"] / size, param_copy_bytes=4,
                             scatter_access_bytes=r["beat_bytes"])
        state = model.state_read + model.state_write
        dense = (r["dense_reads"] + r["dense_writes"]) * r["beat_bytes"] / size + UPDATER_READ_BACK
        pairs = r["pair_reads"] * r["pair_beat_bytes"] / size
        lines.append(f"| zero_fill_scatter, {r['beat_bytes']}-byte RMW per pair | RTL, AXI beats counted "
                     f"({size} elements, {r['pairs']} pairs; model {model.dense_gradient:.3f}) | "
                     f"{r['ratio']} | {dense:.3f} | {pairs:.4f} | {state:.0f} (model) | "
                     f"{state + dense + pairs:.3f} |")
        print(lines[-1], flush=True)
    return lines


def traffic_table(measured=()):
    """DRAM bytes per parameter from the golden traffic model (Adam, 4-byte parameter copy)."""
    lines = ["| mode | source | ratio | dense-gradient bytes | pair + header bytes | state bytes | "
             "total bytes/param |", "|---|---|---:|---:|---:|---:|---:|"]
    rows = [("dense", "model", {}), ("zero_fill_scatter", "model", {}),
            ("zero_fill_scatter, 64-byte RMW per pair", "model", {"scatter_access_bytes": 64}),
            ("fused, chunk 1024", "model; RTL moves 0 dense bytes", {"chunk_size": 1024})]
    for label, source, options in rows:
        mode = label.split(",")[0]
        for ratio in ((0.01,) if mode == "dense" else (0.001, 0.01, 0.1)):
            t = dram_traffic(mode, ratio=ratio, param_copy_bytes=4, **options)
            lines.append(f"| {label} | {source} | {'-' if mode == 'dense' else ratio} | "
                         f"{t.dense_gradient:.3f} | {t.pair_read:.4f} | {t.state_read + t.state_write:.0f} | "
                         f"{t.total:.3f} |")
    return lines + list(measured)


def replace_section(text, name, lines):
    """Put ``lines`` between the ``<!-- name -->`` and ``<!-- /name -->`` markers of ``text``."""
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end) if end in rest else ("", "", rest)
    return head + start + "\n" + "\n".join(lines) + "\n" + end + tail


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="L = 1 and 4 only, docs left unchanged")
    parser.add_argument("--paper", action="store_true",
                        help="paper mode only (topk_dram_scatter); keeps the doc's other measured rows")
    args = parser.parse_args()
    logging.disable(logging.INFO)
    doc = ROOT / "docs" / "compress.md"
    lanes_list = DRAM_LANES[:2] if args.quick else DRAM_LANES
    dram = {lanes: measure_dram_scatter(lanes) for lanes in lanes_list}
    rates = dram_rate_table(dram)
    paper = measured_paper_rows(dram[4])
    if args.paper:
        # The fused rows already in the doc stay as they are (they are not re-measured here).
        fused = [line for line in doc.read_text().splitlines()
                 if line.startswith("| fused, chunk") and "AXI beats counted" in line]
    else:
        scatter = scatter_table(LANES[:2] if args.quick else LANES)
        fused = measured_fused_rows()
    traffic = traffic_table([*paper, *fused])
    print("\n".join(traffic))
    if not args.quick:
        text = doc.read_text()
        if not args.paper:
            text = replace_section(text, "scatter-table", scatter)
        text = replace_section(text, "dram-scatter-table", rates)
        doc.write_text(replace_section(text, "traffic-table", traffic))
        print(f"updated {doc}")


if __name__ == "__main__":
    main()
