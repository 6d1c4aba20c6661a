"""Scatter rate of ``topk_scatter`` against the lane count, and measured fused-mode DRAM traffic.

Run: ``.venv/bin/python -m testbenches.compress.bench_compress`` (``--quick`` for L = 1 and 4 only,
docs left unchanged). Each scatter point runs the session ``compress.scatter_throughput`` of the
host device :mod:`scripts.sim.devices.compress` on Verilator: one chunk of pairs at full rate, no
stalls, cycles counted in simulation (no wall clock); the output is checked bit-exact as always.
The fused-mode traffic rows run the session ``compress.decompressor_traffic`` of the same
device on ``topk_axi_decompressor``: the pair stream is read from cocotbext-axi's ``AxiRam`` and
every AXI beat is counted. The paper-mode rows (``--paper`` runs only those) run the session
``compress_dram.traffic`` of :mod:`scripts.sim.devices.compress_dram` on ``topk_dram_scatter``:
zero fill and read-modify-write scatter into a dense region of an ``AxiRam``, every AXI beat
counted, the region checked bit for bit. The other DRAM rows are the model
:mod:`golden.compress.traffic`.

The rows go to ``docs/data/compress-*.json`` and the ``compress-scatter``, ``compress-dram-scatter``
and ``compress-traffic`` tables of ``docs/compress.md`` (:func:`scripts.flow.docs.write_table`);
``--paper`` keeps the measured fused rows of ``docs/data/compress-traffic.json``.
"""

import argparse
import json
import logging

from golden.compress import dram_traffic
from scripts.flow.docs import DATA, write_table
from scripts.sim.devices.compress import AXI_PARAMS, run_decompressor_traffic, run_scatter_throughput
from scripts.sim.devices.compress_dram import dram_scatter_config, run_dram_scatter_traffic

DOC = "compress.md"
CHUNK_SIZE = 8192
KINDS = ("random", "shuffled", "consecutive", "same_bank", "same_index")
LANES = (1, 4, 8, 16)
COMMAND = ".venv/bin/python -m testbenches.compress.bench_compress"


def engine_params(lanes):
    banks = max(2, 2 * lanes)
    return {"lanes": lanes, "banks": banks, "chunk_size": CHUNK_SIZE, "out_lanes": min(16, banks),
            "value_format": "f32", "bank_writes": 3, "queue_depth": 8}


SCATTER_HEADERS = ["L", "banks", "pattern", "pairs", "steady cycles", "steady pairs/cycle", "per lane",
                   "incl. latency pairs/cycle"]


def scatter_rows(lanes_list):
    rows = []
    for lanes in lanes_list:
        params = engine_params(lanes)
        for kind in KINDS:
            pairs = CHUNK_SIZE // params["banks"] if kind == "same_bank" else CHUNK_SIZE // 2
            if kind == "same_index":
                pairs = min(pairs, 512)
            result = run_scatter_throughput(params, kind, pairs)
            rate = result["steady_rate"]
            rows.append([lanes, params["banks"], kind, result["pairs"], result["steady_cycles"],
                         f"{rate:.2f}", f"{rate / lanes:.2f}", f"{result['total_rate']:.2f}"])
            print(rows[-1], flush=True)
    return rows


TRAFFIC_CHUNKS = 16  # chunks of AXI_PARAMS["chunk_size"] in the measured shard


def measured_fused_rows():
    """Rows of the fused mode measured by counting AXI beats (``traffic`` session), with the model beside."""
    results = run_decompressor_traffic(AXI_PARAMS, TRAFFIC_CHUNKS)
    rows = []
    for r in results:
        model = dram_traffic("fused", ratio=r["pairs"] / r["size"], param_copy_bytes=4,
                             chunk_size=r["chunk_size"])
        state = model.state_read + model.state_write
        measured = (r["read_bytes"] + r["write_bytes"]) / r["size"]
        # Dense-gradient bytes: the test asserts that every read beat lies in the pair stream, so
        # only writes could be dense gradient.
        rows.append([f"fused, chunk {r['chunk_size']}",
                     f"RTL, AXI beats counted ({r['size']} elements, {r['pairs']} pairs; model "
                     f"{model.pair_read:.4f})", f"{r['ratio']:g}", f"{r['write_bytes'] / r['size']:.3f}",
                     f"{r['read_bytes'] / r['size']:.4f}", f"{state:.0f} (model)", f"{state + measured:.3f}"])
        print(rows[-1], flush=True)
    return rows


DRAM_SIZE = 16384      # elements of the dense region per paper-mode run
DRAM_LANES = (1, 4, 8, 16)
UPDATER_READ_BACK = 4  # f32 dense gradient bytes the updater reads back per parameter (model)


def dram_scatter_params(lanes):
    """The paper-mode bench configuration: 512-bit dense port (SmartSSD), f32 pairs, 16 RMWs in flight."""
    return dram_scatter_config(lanes, 512, "f32")


def measure_dram_scatter(lanes, size=DRAM_SIZE):
    """The ``compress_dram.traffic`` session on ``topk_dram_scatter`` with ``lanes``: its results."""
    return run_dram_scatter_traffic(dram_scatter_params(lanes), size)


DRAM_HEADERS = ["L", "ratio", "pairs", "zero-fill + scatter cycles", "scatter cycles",
                "pairs/cycle (scatter)", "dense read beats", "dense write beats", "pair read beats"]


def dram_rate_rows(results_by_lanes):
    """Scatter rate of the paper mode against L: pairs per cycle from the first RMW read to ``done``."""
    rows = []
    for lanes, results in results_by_lanes.items():
        for r in results:
            rate = r["pairs"] / r["scatter_cycles"] if r["scatter_cycles"] else 0.0
            rows.append([lanes, f"{r['ratio']:g}", r["pairs"], r["cycles"], r["scatter_cycles"],
                         f"{rate:.2f}", r["dense_reads"], r["dense_writes"], r["pair_reads"]])
            print(rows[-1], flush=True)
    return rows


def measured_paper_rows(results):
    """Paper-mode rows of the traffic table: measured AXI beats, plus the modelled read-back and state."""
    rows = []
    for r in results:
        if r["ratio"] not in (0.001, 0.01, 0.1):
            continue
        size = r["size"]
        model = dram_traffic("zero_fill_scatter", ratio=r["pairs"] / size, param_copy_bytes=4,
                             scatter_access_bytes=r["beat_bytes"])
        state = model.state_read + model.state_write
        dense = (r["dense_reads"] + r["dense_writes"]) * r["beat_bytes"] / size + UPDATER_READ_BACK
        pairs = r["pair_reads"] * r["pair_beat_bytes"] / size
        rows.append([f"zero_fill_scatter, {r['beat_bytes']}-byte RMW per pair",
                     f"RTL, AXI beats counted ({size} elements, {r['pairs']} pairs; model "
                     f"{model.dense_gradient:.3f})", f"{r['ratio']:g}", f"{dense:.3f}", f"{pairs:.4f}",
                     f"{state:.0f} (model)", f"{state + dense + pairs:.3f}"])
        print(rows[-1], flush=True)
    return rows


TRAFFIC_HEADERS = ["mode", "source", "ratio", "dense-gradient bytes", "pair + header bytes", "state bytes",
                   "total bytes/param"]


def traffic_rows(measured=()):
    """DRAM bytes per parameter from the golden traffic model (Adam, 4-byte parameter copy)."""
    rows = []
    for label, source, options in (
            ("dense", "model", {}), ("zero_fill_scatter", "model", {}),
            ("zero_fill_scatter, 64-byte RMW per pair", "model", {"scatter_access_bytes": 64}),
            ("fused, chunk 1024", "model; RTL moves 0 dense bytes", {"chunk_size": 1024})):
        mode = label.split(",")[0]
        for ratio in ((0.01,) if mode == "dense" else (0.001, 0.01, 0.1)):
            t = dram_traffic(mode, ratio=ratio, param_copy_bytes=4, **options)
            rows.append([label, source, "-" if mode == "dense" else f"{ratio:g}", f"{t.dense_gradient:.3f}",
                         f"{t.pair_read:.4f}", round(t.state_read + t.state_write), f"{t.total:.3f}"])
    return rows + [list(row) for row in measured]


def documented_fused_rows():
    """The measured fused rows of the committed traffic table (``docs/data/compress-traffic.json``)."""
    spec = json.loads((DATA / "compress-traffic.json").read_text())
    return [row for row in spec["rows"]
            if row[0].startswith("fused, chunk") and "AXI beats counted" in row[1]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="L = 1 and 4 only, docs left unchanged")
    parser.add_argument("--paper", action="store_true",
                        help="paper mode only (topk_dram_scatter); keeps the table's other measured rows")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    lanes_list = DRAM_LANES[:2] if args.quick else DRAM_LANES
    dram = {lanes: measure_dram_scatter(lanes) for lanes in lanes_list}
    rates = dram_rate_rows(dram)
    paper = measured_paper_rows(dram[4])
    if args.paper:
        # The measured fused rows stay as they are (they are not re-measured here).
        fused = documented_fused_rows()
    else:
        scatter = scatter_rows(LANES[:2] if args.quick else LANES)
        fused = measured_fused_rows()
    traffic = traffic_rows([*paper, *fused])
    if args.quick:
        return
    options = {"disable_numparse": True}
    if not args.paper:
        write_table(DOC, "compress-scatter", SCATTER_HEADERS, scatter, COMMAND,
                    colalign=("right", "right", "left") + ("right",) * 5, **options)
    command = COMMAND + (" --paper" if args.paper else "")
    write_table(DOC, "compress-dram-scatter", DRAM_HEADERS, rates, command, colalign=("right",) * 9,
                **options)
    # --paper keeps the fused rows, so the traffic table is still what the whole command measures.
    write_table(DOC, "compress-traffic", TRAFFIC_HEADERS, traffic, COMMAND,
                colalign=("left", "left") + ("right",) * 5, **options)
    print(f"updated docs/{DOC}")


if __name__ == "__main__":
    main()
