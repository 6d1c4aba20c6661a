"""Scatter rate of ``topk_scatter`` against the lane count, and measured fused-mode DRAM traffic.

Run: ``.venv/bin/python -m scripts.bench_compress`` (``--quick`` for L = 1 and 4 only, docs left
unchanged). Each scatter point runs the cocotb test ``throughput`` on Verilator: one chunk of pairs
at full rate, no stalls, cycles counted in simulation (no wall clock); the output is checked
bit-exact as always. The fused-mode traffic rows run the cocotb test ``traffic`` of
``topk_axi_decompressor``: the pair stream is read from cocotbext-axi's ``AxiRam`` and every AXI
beat is counted. The other DRAM rows are the model :mod:`golden.compress.traffic`.
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
    args = parser.parse_args()
    logging.disable(logging.INFO)
    scatter = scatter_table(LANES[:2] if args.quick else LANES)
    traffic = traffic_table(measured_fused_rows())
    print("\n".join(traffic))
    if not args.quick:
        doc = ROOT / "docs" / "compress.md"
        text = replace_section(doc.read_text(), "scatter-table", scatter)
        doc.write_text(replace_section(text, "traffic-table", traffic))
        print(f"updated {doc}")


if __name__ == "__main__":
    main()
