"""Measurements of the DLRM blocks for ``docs/dlrm.md``.

Parts (each writes its tables there):

* ``hitrate``: the golden LRU's hit rate against cache size on each Table 5.1 dataset's
  synthetic Zipf trace, and the plot ``docs/dlrm_hitrate.png``;
* ``savings``: HBM lookups per batch with no dedupe and no cache, with dedupe, and with dedupe
  and the cache, per batch size (golden models);
* ``batching``: plain batching against the graph algorithm's (Algorithm 1, with and without its
  waiting-time refresh) on each dataset's trace: the LRU hit rate, the rows a mini-batch asks
  for after dedupe and after dedupe and the cache, and the longest wait (golden models);
* ``throughput``: lookups per cycle of the RTL cache at hit and on Zipf traces of three miss
  rates, with the MSHR count swept (cocotb);
* ``bag``: lookups per cycle of the RTL embedding-bag kernel on one Zipf batch, against the cache's
  MSHRs and the dedupe unit's segment size (cocotb);
* ``area``: Yosys resources on ``xcup`` and ``ecp5`` of each block at its defaults and the
  ECP5 Fmax of its bitstream (nextpnr, ULX3S 85F).

Run as ``.venv/bin/python -m testbenches.dlrm.bench_dlrm <part>``.
"""

import argparse
import logging

import numpy as np

from golden.dlrm import DATASETS, LruCache, graph_batches, hit_rate, lookup_trace
from scripts.flow.docs import write_table
from scripts.flow.figures import docs_plot
from scripts.sim.devices.dlrm import run_throughput
from scripts.sim.devices.dlrm_bag import BENCH_SHAPE
from scripts.sim.devices.dlrm_bag import run_throughput as run_bag_throughput

DOC = "dlrm.md"
COMMAND = ".venv/bin/python -m testbenches.dlrm.bench_dlrm"
ALPHA = 1.05
SEED = 1
SAMPLES = 20_000  # per dataset: 420 k to 520 k lookups
WAYS = 8
CACHE_ROWS = (1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18)
BATCHES = (128, 512, 2048, 8192)
SAVINGS_DATASET = "criteo-kaggle"
SAVINGS_CACHE_ROWS = 1 << 16
MINI_BATCH = 128  # samples
POOL = 1024  # samples pre-loaded for the graph algorithm to choose from (its batch_size)
THRESHOLDS = (32, 1024)  # popular rows the samples are ranked by (its Hyperedge_Threshold n)
MAX_WAIT = 16  # mini-batches a sample may wait before the pool is drained (Section 5.4.2)
BATCHING_CACHE_ROWS = (1 << 10, 1 << 16)
AREA_POINTS = ("embedding_cache", "dedupe_unit", "loss_reduction")
THROUGHPUT_SHAPE = {"sets": 16, "ways": 4}  # dim 16: one line per row
THROUGHPUT_ZIPF_ROWS = (3900, 520, 130)  # Zipf traces of about 8, 18 and 52 % hits on that cache
MSHR_SWEEP = (1, 2, 4, 8, 16)
# The embedding-bag kernel's points: (mshrs, dedupe capacity, dedupe positions) on BENCH_SHAPE.
BAG_POINTS = ((1, 16, 64), (8, 16, 64), (8, 64, 256))


def _trace(name):
    return lookup_trace(name, samples=SAMPLES, alpha=ALPHA, seed=SEED).ravel()


def hitrate(args):
    curves = {}
    for name in DATASETS:
        trace = _trace(name)
        curves[name] = [hit_rate(trace, sets=rows // WAYS, ways=WAYS) for rows in CACHE_ROWS]
        print(name, curves[name], flush=True)
    rows = []
    for index, cache_rows in enumerate(CACHE_ROWS):
        megabytes = [cache_rows * spec.dim * 4 / 2 ** 20 for spec in DATASETS.values()]
        rows.append([cache_rows, ", ".join(f"{mb:g}" for mb in sorted(set(megabytes)))]
                    + [f"{100 * curves[name][index]:.1f}" for name in DATASETS])
    headers = ["cache rows", "MiB (dim 16, 64)"] + [f"{spec.name} hit %" for spec in DATASETS.values()]
    write_table(DOC, "dlrm-hitrate", headers, rows, f"{COMMAND} hitrate", disable_numparse=True)
    _plot(curves)


def _plot(curves):
    with docs_plot("dlrm_hitrate.png", xlabel=f"cache rows ({WAYS}-way LRU)", ylabel="hit rate, %",
                   title=f"Embedding cache, Zipf traces (alpha {ALPHA}, {SAMPLES:,} samples)",
                   log_x=True) as axis:
        for name, spec in DATASETS.items():
            axis.plot(CACHE_ROWS, [100 * rate for rate in curves[name]], marker="o",
                      label=f"{spec.name} ({spec.rows / 1e6:g} M rows)")


def savings(args):
    spec = DATASETS[SAVINGS_DATASET]
    trace = _trace(SAVINGS_DATASET).reshape(SAMPLES, spec.sparse)
    rows = []
    for batch in BATCHES:
        cache = LruCache(sets=SAVINGS_CACHE_ROWS // WAYS, ways=WAYS)
        batches = SAMPLES // batch
        lookups = unique = misses = 0
        for number in range(batches):
            part = trace[number * batch:(number + 1) * batch].ravel()
            # Dedupe first: the cache sees each row of the batch once, in order of first appearance.
            values, first = np.unique(part, return_index=True)
            ordered = values[np.argsort(first)]
            lookups += part.size
            unique += ordered.size
            misses += int((~cache.run(ordered)).sum())
        rows.append([batch, batches, f"{lookups / batches:.0f}", f"{unique / batches:.0f}",
                     f"{misses / batches:.0f}", f"{lookups / unique:.2f}", f"{lookups / max(misses, 1):.2f}"])
        print(rows[-1], flush=True)
    headers = ["batch (samples)", "batches", "HBM lookups, none", "with dedupe", "with dedupe + cache",
               "saved x (dedupe)", "saved x (dedupe + cache)"]
    write_table(DOC, "dlrm-savings", headers, rows, f"{COMMAND} savings", disable_numparse=True)


def _mini_batches(trace, order):
    """Each mini-batch's distinct rows, in order of first appearance (what dedupe issues)."""
    for start in range(0, len(order), MINI_BATCH):
        part = trace[order[start:start + MINI_BATCH]].ravel()
        values, first = np.unique(part, return_index=True)
        yield values[np.argsort(first)]


def batching(args):
    variants = {"plain": None, **{f"graph, n = {n}": {"threshold": n} for n in THRESHOLDS},
                f"graph, n = {THRESHOLDS[0]}, refresh after {MAX_WAIT}": {"threshold": THRESHOLDS[0],
                                                                           "max_wait": MAX_WAIT}}
    rows = []
    for name, spec in DATASETS.items():
        trace = _trace(name).reshape(SAMPLES, spec.sparse)
        for variant, options in variants.items():
            if options is None:
                order, waits = np.arange(SAMPLES), np.zeros(1, dtype=np.int64)
            else:
                order, waits = graph_batches(trace, mini_batch=MINI_BATCH, pool=POOL, **options)
            lookups = trace[order].ravel()
            rates = [hit_rate(lookups, sets=size // WAYS, ways=WAYS) for size in BATCHING_CACHE_ROWS]
            cache = LruCache(sets=BATCHING_CACHE_ROWS[-1] // WAYS, ways=WAYS)
            issued = misses = batches = 0
            for unique in _mini_batches(trace, order):
                batches += 1
                issued += unique.size
                misses += int((~cache.run(unique)).sum())
            rows.append([spec.name, variant] + [f"{100 * rate:.2f}" for rate in rates]
                        + [f"{issued / batches:.1f}", f"{misses / batches:.1f}", int(waits.max())])
            print(rows[-1], flush=True)
    sizes = [f"{size:,}" for size in BATCHING_CACHE_ROWS]
    headers = (["dataset", "batching"] + [f"hit % ({size} rows)" for size in sizes]
               + ["rows per mini-batch, dedupe", f"HBM reads per mini-batch, dedupe + {sizes[-1]}-row cache",
                  "longest wait (mini-batches)"])
    write_table(DOC, "dlrm-batching", headers, rows, f"{COMMAND} batching", disable_numparse=True)


def throughput(args):
    rows, blocking = [], {}
    for mshrs in args.mshrs:
        result = run_throughput(THROUGHPUT_SHAPE | {"mshrs": mshrs}, args.lookups, THROUGHPUT_ZIPF_ROWS)
        for name, point in result.items():
            rate = point["lookups"] / point["cycles"]
            blocking.setdefault(name, rate if mshrs == 1 else None)
            gain = f"{rate / blocking[name]:.2f}" if blocking[name] else "-"
            rows.append([mshrs, name, point["lookups"], point["cycles"], f"{rate:.3f}", gain,
                         f"{100 * point['hits'] / point['lookups']:.1f}"])
            print(rows[-1], flush=True)
    command = f"{COMMAND} throughput --lookups {args.lookups} --mshrs {' '.join(map(str, args.mshrs))}"
    headers = ["mshrs", "trace", "lookups", "cycles", "lookups per cycle", "x mshrs=1", "hit %"]
    write_table(DOC, "dlrm-throughput", headers, rows, command, disable_numparse=True)


def bag(args):
    rows = []
    for mshrs, capacity, positions in BAG_POINTS:
        shape = BENCH_SHAPE | {"mshrs": mshrs, "capacity": capacity, "positions": positions}
        point = run_bag_throughput(shape)
        asked = point["hits"] + point["misses"]
        rows.append([mshrs, capacity, positions, point["lookups"], point["cycles"],
                     f"{point['lookups'] / point['cycles']:.3f}", f"{100 * point['hits'] / asked:.1f}",
                     f"{100 * point['duplicates'] / point['lookups']:.1f}"])
        print(rows[-1], flush=True)
    headers = ["mshrs", "dedupe capacity", "dedupe positions", "lookups", "cycles", "lookups per cycle",
               "cache hit %", "deduped %"]
    write_table(DOC, "dlrm-bag-throughput", headers, rows, f"{COMMAND} bag", disable_numparse=True)


def area(args):
    from boards import reference_board
    from boards.targets import RESOURCE_COLUMNS
    from rtl.registry import get_block
    from scripts.flow.bitstream import measure_bitstream
    from scripts.flow.docs import kept_rows
    from scripts.flow.synth import synthesize

    headers = (["block"] + [f"xcup {column}" for column in RESOURCE_COLUMNS["xcup"]]
               + [f"ECP5 {column}" for column in RESOURCE_COLUMNS["ecp5"]] + ["ECP5 Fmax MHz"])
    chosen = args.blocks or AREA_POINTS
    def block_of(row):  # rows are "<block> (<parameters>)"
        return row[0].split(" (")[0]

    rows = kept_rows("dlrm-area", headers, lambda row: block_of(row) not in chosen)
    for name in chosen:
        block = get_block(name)
        params = block.resolve({})
        xcup = synthesize(block.build({}), "xcup")
        ecp5 = synthesize(block.build({}), "ecp5")
        fmax = "not run"
        if not args.no_fmax and name not in args.skip_fmax:
            try:
                summary = measure_bitstream(block.build({}), board=reference_board("ecp5"))
                fmax = f"{min(clock['achieved'] for clock in summary['fmax'].values()):.1f}"
            except Exception as error:  # noqa: BLE001 - reported in the table
                fmax = f"failed: {str(error).splitlines()[0]}"
        described = ", ".join(f"{key}={value}" for key, value in params.items())
        rows.append([f"{name} ({described})"] + [xcup[column] for column in RESOURCE_COLUMNS["xcup"]]
                    + [ecp5[column] for column in RESOURCE_COLUMNS["ecp5"]] + [fmax])
        print(rows[-1], flush=True)
    rows.sort(key=lambda row: AREA_POINTS.index(block_of(row)))
    skipped = "".join(f" --skip-fmax {name}" for name in args.skip_fmax)
    write_table(DOC, "dlrm-area", headers, rows,
                f"{COMMAND} area{skipped} (neartrain synth <block> --target xcup|ecp5; "
                "neartrain bitstream <block>)",
                disable_numparse=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bench_dlrm", description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    parts.add_parser("hitrate")
    parts.add_parser("savings")
    parts.add_parser("batching")
    p_throughput = parts.add_parser("throughput")
    p_throughput.add_argument("--lookups", type=int, default=4000)
    p_throughput.add_argument("--mshrs", type=int, nargs="+", default=list(MSHR_SWEEP),
                              help="MSHR counts to measure (1, the blocking cache, first)")
    parts.add_parser("bag")
    p_area = parts.add_parser("area")
    p_area.add_argument("--no-fmax", action="store_true")
    p_area.add_argument("--blocks", nargs="+", choices=AREA_POINTS, metavar="BLOCK",
                        help="measure only these blocks; the others keep their rows")
    p_area.add_argument("--skip-fmax", action="append", default=[], metavar="BLOCK",
                        help="no bitstream for this block (its place and route can take most of an hour)")
    args = parser.parse_args(argv)
    logging.disable(logging.INFO)
    {"hitrate": hitrate, "savings": savings, "batching": batching, "throughput": throughput,
     "bag": bag, "area": area}[args.part](args)


if __name__ == "__main__":
    main()
