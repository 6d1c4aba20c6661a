"""Print DPT's Tables 3 and 4 next to NearTrain's cycle model and equation 3 sweep, as Markdown.

Usage::

    .venv/bin/python scripts/partition_sweep.py [--layers] [--breakdown] [schedule options]

The assumptions are in :mod:`golden.systolic.partition`; ``--help`` lists the options.
"""

import argparse

from golden.systolic.cycles import DATAFLOWS
from golden.systolic.dpt_tables import TABLE3_RESNET50, TABLE3_RESNET50_FIT, TABLE4_RESNET50
from golden.systolic.networks import resnet50
from golden.systolic.partition import TEST_CASES, ArraySchedule, SystemModel, baseline_cycles, partition_sweep

BATCHES = (32, 64, 128, 256, 512)
SSD_COUNTS = (2, 4)
CIRCLED = {1: "①", 2: "②", 3: "③"}


def table3(network, system):
    """Markdown rows: NPU-only cycles on a 96 x 96 array against DPT's Table 3.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    system : golden.systolic.partition.SystemModel

    Returns
    -------
    list of str
    """
    per_sample, constant = TABLE3_RESNET50_FIT
    lines = ["| B | DPT Table 3 | DPT fit 1,811,912 B + 948,602 | NearTrain model | model / fit |",
             "|---:|---:|---:|---:|---:|"]
    for batch in BATCHES:
        ours = baseline_cycles(network, npu_array=(96, 96), batch=batch, system=system)
        fit = per_sample * batch + constant
        lines.append(f"| {batch} | {TABLE3_RESNET50[batch]:,} | {fit:,} | {ours:,.0f} | {ours / fit:.3f} |")
    return lines


def table4(network, system):
    """Markdown rows: improvement (partition index) per test case, smartSSD count and batch.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    system : golden.systolic.partition.SystemModel

    Returns
    -------
    list of str
    """
    header = [f"({ssds}, {batch})" for batch in BATCHES for ssds in SSD_COUNTS]
    lines = ["| case (SSD, NPU) | source | " + " | ".join(header) + " |",
             "|---|---|" + "---:|" * len(header)]
    for case, (ssd_array, npu_array) in TEST_CASES.items():
        label = f"{CIRCLED[case]} ({ssd_array[0]}x{ssd_array[1]}, {npu_array[0]}x{npu_array[1]})"
        paper, ours = [], []
        for batch in BATCHES:
            for ssds in SSD_COUNTS:
                percent, index = TABLE4_RESNET50[(case, ssds, batch)]
                paper.append(f"{percent:.1f}% ({index})")
                result = partition_sweep(network, ssd_array=ssd_array, npu_array=npu_array, ssds=ssds,
                                         batch=batch, system=system)
                ours.append(f"{100 * result.improvement:.1f}% ({result.best_index})")
        lines.append(f"| {label} | DPT | " + " | ".join(paper) + " |")
        lines.append("| | model | " + " | ".join(ours) + " |")
    return lines


def breakdown(network, system, *, case=1, ssds=4, batch=512):
    """Markdown rows: equation 3's terms at index 0 and at the best index for one configuration.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    system : golden.systolic.partition.SystemModel
    case, ssds, batch : int

    Returns
    -------
    list of str
    """
    ssd_array, npu_array = TEST_CASES[case]
    result = partition_sweep(network, ssd_array=ssd_array, npu_array=npu_array, ssds=ssds, batch=batch,
                             system=system)
    best = result.best_index
    lines = [f"| term (case {CIRCLED[case]}, {ssds} SSDs, B = {batch}) | i = 0 (baseline) "
             f"| i = {best} (best) |", "|---|---:|---:|"]
    for name, values in result.terms.items():
        lines.append(f"| {name} | {values[0]:,.0f} | {values[best]:,.0f} |")
    lines.append(f"| **total** | {result.latency[0]:,.0f} | {result.latency[best]:,.0f} |")
    return lines


def layer_table(network, schedule, arrays=((96, 96), (32, 16)), batch=32):
    """Markdown rows: MAC utilisation of every ResNet-50 training GEMM on the given arrays.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    schedule : golden.systolic.partition.ArraySchedule
    arrays : tuple of (rows, cols)
    batch : int
        Samples of the weight-gradient GEMM.

    Returns
    -------
    list of str
    """
    columns = [f"{pass_name} {rows}x{cols}" for rows, cols in arrays for pass_name in ("FP", "BP", "WU")]
    lines = ["| # | layer | FP (M, K, N) | " + " | ".join(columns) + " |",
             "|---:|---|---|" + "---:|" * len(columns)]
    for index, entry in enumerate(network.layers):
        layer = entry.layer
        shapes = (layer.forward_gemm(1), layer.backward_data_gemm(1), layer.weight_grad_gemm(batch))
        cells = []
        for rows, cols in arrays:
            for shape in shapes:
                cells.append(f"{100 * schedule.terms(shape, rows, cols).utilisation:.0f}%")
        lines.append(f"| {index} | {layer.name} | {tuple(shapes[0])} | " + " | ".join(cells) + " |")
    return lines


def utilisation_summary(network, schedule, batch=32):
    """Markdown rows: MAC-weighted utilisation of each training pass on every DPT array size.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    schedule : golden.systolic.partition.ArraySchedule
    batch : int
        Samples of the weight-gradient GEMM (forward and backward are per sample, as in equation 3).

    Returns
    -------
    list of str
    """
    arrays = sorted({array for pair in TEST_CASES.values() for array in pair} | {(96, 96)})
    lines = ["| array | FP (per sample) | BP (per sample, eq. 2 mapping) | WU (B samples) | mini-batch |",
             "|---|---:|---:|---:|---:|"]
    for rows, cols in arrays:
        macs, cycles = [], []
        for pass_shape in ("forward_gemm", "backward_data_gemm", "weight_grad_gemm"):
            samples = batch if pass_shape == "weight_grad_gemm" else 1
            shapes = [getattr(entry.layer, pass_shape)(samples) for entry in network.layers]
            if pass_shape == "backward_data_gemm":
                shapes = shapes[1:]  # no input gradient for the image
            macs.append(sum(m * k * n for m, k, n in shapes))
            cycles.append(sum(schedule.cycles(shape, rows, cols) for shape in shapes))
        cells = [f"{100 * m / (rows * cols * c):.1f}%" for m, c in zip(macs, cycles, strict=True)]
        # A mini-batch runs the per-sample forward and backward GEMMs B times and the weight update once.
        weights = (batch, batch, 1)
        batch_macs = sum(w * m for w, m in zip(weights, macs, strict=True))
        batch_cycles = sum(w * c for w, c in zip(weights, cycles, strict=True))
        cells.append(f"{100 * batch_macs / (rows * cols * batch_cycles):.1f}%")
        lines.append(f"| {rows}x{cols} | " + " | ".join(cells) + " |")
    return lines


def main(argv=None):
    """Parse the options and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataflow", default="output_stationary", choices=DATAFLOWS)
    parser.add_argument("--tile", type=int, default=1)
    parser.add_argument("--mac-latency", type=int, default=1)
    parser.add_argument("--acc-latency", type=int, default=1)
    parser.add_argument("--no-overlap", action="store_true", help="serial tiles (no drain / load overlap)")
    parser.add_argument("--per-sample-wu", action="store_true",
                        help="weight gradients over every sample instead of batch-reduced feature maps")
    parser.add_argument("--resnet-v1", action="store_true",
                        help="stride on the first 1x1 conv (original ResNet)")
    parser.add_argument("--layers", action="store_true", help="also print per-layer utilisation")
    parser.add_argument("--breakdown", action="store_true", help="also print equation 3's terms for one case")
    args = parser.parse_args(argv)
    schedule = ArraySchedule(args.dataflow, args.tile, args.mac_latency, args.acc_latency,
                             not args.no_overlap)
    system = SystemModel(schedule=schedule, reduce_before_weight_update=not args.per_sample_wu)
    network = resnet50(stride_on_3x3=not args.resnet_v1)
    sections = [
        ("Table 3: ResNet-50 cycles per mini-batch, 96x96 NPU only", table3(network, system)),
        ("Table 4: improvement over the NPU-only baseline (partition index)", table4(network, system)),
        ("MAC utilisation of the ResNet-50 training GEMMs (B = 32)", utilisation_summary(network, schedule)),
    ]
    if args.breakdown:
        sections.append(("Equation 3 terms (cycles)", breakdown(network, system)))
    if args.layers:
        sections.append(("MAC utilisation per ResNet-50 layer", layer_table(network, schedule)))
    for title, lines in sections:
        print(f"### {title}\n")
        print("\n".join(lines))
        print()


if __name__ == "__main__":
    main()
