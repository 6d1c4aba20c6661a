"""DPT's Tables 3 and 4 next to NearTrain's cycle model and equation 3 sweep, as Markdown tables.

Usage::

    .venv/bin/python scripts/flow/partition_sweep.py [--layers] [--breakdown] [schedule options]

The assumptions are in :mod:`golden.systolic.partition`; ``--help`` lists the options. With the
default model options, the tables of docs/systolic.md (``partition-table3``,
``partition-table4``, ``partition-utilisation`` and, with ``--breakdown``,
``partition-breakdown``) are written through :func:`scripts.flow.docs.write_table`, and the plot
``docs/systolic_utilisation.png`` (MAC utilisation of the training passes against the array's size,
square arrays and DPT's) through :func:`scripts.flow.figures.docs_plot`; other options only print.
"""

import argparse

from tabulate import tabulate

from golden.systolic.cycles import DATAFLOWS
from golden.systolic.dpt_tables import TABLE3_RESNET50, TABLE3_RESNET50_FIT, TABLE4_RESNET50
from golden.systolic.networks import resnet50
from golden.systolic.partition import TEST_CASES, ArraySchedule, SystemModel, baseline_cycles, partition_sweep

BATCHES = (32, 64, 128, 256, 512)
SSD_COUNTS = (2, 4)
CIRCLED = {1: "①", 2: "②", 3: "③"}
COMMAND = ".venv/bin/python scripts/flow/partition_sweep.py"
PLOT = "systolic_utilisation.png"
PLOT_SIDES = (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)  # the square arrays of the plot
PASSES = ("FP", "BP", "WU", "mini-batch")


def table3(network, system):
    """NPU-only cycles on a 96 x 96 array against DPT's Table 3.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    system : golden.systolic.partition.SystemModel

    Returns
    -------
    tuple
        ``(headers, rows, colalign)``.
    """
    per_sample, constant = TABLE3_RESNET50_FIT
    rows = []
    for batch in BATCHES:
        ours = baseline_cycles(network, npu_array=(96, 96), batch=batch, system=system)
        fit = per_sample * batch + constant
        rows.append([batch, f"{TABLE3_RESNET50[batch]:,}", f"{fit:,}", f"{ours:,.0f}", f"{ours / fit:.3f}"])
    headers = ["B", "DPT Table 3", "DPT fit 1,811,912 B + 948,602", "NearTrain model", "model / fit"]
    return headers, rows, ("right",) * 5


def table4(network, system):
    """Improvement (partition index) per test case, smartSSD count and batch.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    system : golden.systolic.partition.SystemModel

    Returns
    -------
    tuple
        ``(headers, rows, colalign)``.
    """
    columns = [f"({ssds}, {batch})" for batch in BATCHES for ssds in SSD_COUNTS]
    rows = []
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
        rows += [[label, "DPT", *paper], ["", "model", *ours]]
    return ["case (SSD, NPU)", "source", *columns], rows, ("left", "left") + ("right",) * len(columns)


def breakdown(network, system, *, case=1, ssds=4, batch=512):
    """Equation 3's terms at index 0 and at the best index for one configuration.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    system : golden.systolic.partition.SystemModel
    case, ssds, batch : int

    Returns
    -------
    tuple
        ``(headers, rows, colalign)``.
    """
    ssd_array, npu_array = TEST_CASES[case]
    result = partition_sweep(network, ssd_array=ssd_array, npu_array=npu_array, ssds=ssds, batch=batch,
                             system=system)
    best = result.best_index
    rows = [[name, f"{values[0]:,.0f}", f"{values[best]:,.0f}"] for name, values in result.terms.items()]
    rows.append(["**total**", f"{result.latency[0]:,.0f}", f"{result.latency[best]:,.0f}"])
    headers = [f"term (case {CIRCLED[case]}, {ssds} SSDs, B = {batch})", "i = 0 (baseline)",
               f"i = {best} (best)"]
    return headers, rows, ("left", "right", "right")


def layer_table(network, schedule, arrays=((96, 96), (32, 16)), batch=32):
    """MAC utilisation of every ResNet-50 training GEMM on the given arrays.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    schedule : golden.systolic.partition.ArraySchedule
    arrays : tuple of (rows, cols)
    batch : int
        Samples of the weight-gradient GEMM.

    Returns
    -------
    tuple
        ``(headers, rows, colalign)``.
    """
    columns = [f"{pass_name} {rows}x{cols}" for rows, cols in arrays for pass_name in ("FP", "BP", "WU")]
    table = []
    for index, entry in enumerate(network.layers):
        layer = entry.layer
        shapes = (layer.forward_gemm(1), layer.backward_data_gemm(1), layer.weight_grad_gemm(batch))
        cells = [f"{100 * schedule.terms(shape, rows, cols).utilisation:.0f}%"
                 for rows, cols in arrays for shape in shapes]
        table.append([index, layer.name, str(tuple(shapes[0])), *cells])
    colalign = ("right", "left", "left") + ("right",) * len(columns)
    return ["#", "layer", "FP (M, K, N)", *columns], table, colalign


DPT_ARRAYS = tuple(sorted({array for pair in TEST_CASES.values() for array in pair} | {(96, 96)}))


def utilisation(network, schedule, rows, cols, batch=32):
    """MAC-weighted utilisation of each training pass on one array, and of a whole mini-batch.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    schedule : golden.systolic.partition.ArraySchedule
    rows, cols : int
    batch : int
        Samples of the weight-gradient GEMM (forward and backward are per sample, as in equation 3).

    Returns
    -------
    list of float
        Forward, backward-data, weight-update and mini-batch utilisation, each in [0, 1].
    """
    macs, cycles = [], []
    for pass_shape in ("forward_gemm", "backward_data_gemm", "weight_grad_gemm"):
        samples = batch if pass_shape == "weight_grad_gemm" else 1
        shapes = [getattr(entry.layer, pass_shape)(samples) for entry in network.layers]
        if pass_shape == "backward_data_gemm":
            shapes = shapes[1:]  # no input gradient for the image
        macs.append(sum(m * k * n for m, k, n in shapes))
        cycles.append(sum(schedule.cycles(shape, rows, cols) for shape in shapes))
    shares = [m / (rows * cols * c) for m, c in zip(macs, cycles, strict=True)]
    # A mini-batch runs the per-sample forward and backward GEMMs B times and the weight update once.
    weights = (batch, batch, 1)
    batch_macs = sum(w * m for w, m in zip(weights, macs, strict=True))
    batch_cycles = sum(w * c for w, c in zip(weights, cycles, strict=True))
    return [*shares, batch_macs / (rows * cols * batch_cycles)]


def utilisation_summary(network, schedule, batch=32):
    """MAC-weighted utilisation of each training pass on every DPT array size.

    Parameters
    ----------
    network : golden.systolic.networks.Network
    schedule : golden.systolic.partition.ArraySchedule
    batch : int
        Samples of the weight-gradient GEMM (forward and backward are per sample, as in equation 3).

    Returns
    -------
    tuple
        ``(headers, rows, colalign)``.
    """
    table = [[f"{rows}x{cols}", *(f"{100 * share:.1f}%"
                                  for share in utilisation(network, schedule, rows, cols, batch))]
             for rows, cols in DPT_ARRAYS]
    headers = ["array", "FP (per sample)", "BP (per sample, eq. 2 mapping)", "WU (B samples)", "mini-batch"]
    return headers, table, ("left",) + ("right",) * 4


def plot_utilisation(network, schedule, batch=32):
    """Draw ``docs/systolic_utilisation.png``: each pass's utilisation against the PEs of square arrays,
    and the mini-batch utilisation of DPT's arrays as points."""
    from scripts.flow.figures import docs_plot

    square = [utilisation(network, schedule, side, side, batch) for side in PLOT_SIDES]
    dpt = [utilisation(network, schedule, rows, cols, batch)[-1] for rows, cols in DPT_ARRAYS]
    with docs_plot(PLOT, xlabel="PEs (rows x cols), log scale", ylabel="MAC utilisation, %",
                   title=f"ResNet-50 training GEMMs (B = {batch}): MAC utilisation against size",
                   from_zero=True, log_x=True, legend_size=8) as axis:
        pes = [side * side for side in PLOT_SIDES]
        for index, name in enumerate(PASSES):
            axis.plot(pes, [100 * shares[index] for shares in square], marker="o", markersize=3,
                      label=f"{name}, n x n (n = {PLOT_SIDES[0]} .. {PLOT_SIDES[-1]})")
        axis.plot([rows * cols for rows, cols in DPT_ARRAYS], [100 * share for share in dpt],
                  linestyle="none", marker="s", color="black", label="mini-batch, DPT's arrays")
        for (rows, cols), share in zip(DPT_ARRAYS, dpt, strict=True):
            axis.annotate(f"{rows}x{cols}", (rows * cols, 100 * share), textcoords="offset points",
                          xytext=(4, -10), fontsize=7)


def main(argv=None):
    """Parse the options, print the tables and, with the default model, write them to docs/systolic.md."""
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
        ("partition-table3", "Table 3: ResNet-50 cycles per mini-batch, 96x96 NPU only",
         table3(network, system)),
        ("partition-table4", "Table 4: improvement over the NPU-only baseline (partition index)",
         table4(network, system)),
        ("partition-utilisation", "MAC utilisation of the ResNet-50 training GEMMs (B = 32)",
         utilisation_summary(network, schedule)),
    ]
    if args.breakdown:
        sections.append(("partition-breakdown", "Equation 3 terms (cycles)", breakdown(network, system)))
    if args.layers:
        sections.append((None, "MAC utilisation per ResNet-50 layer", layer_table(network, schedule)))
    for _name, title, (headers, rows, colalign) in sections:
        print(f"### {title}\n")
        print(tabulate(rows, headers=headers, tablefmt="github", colalign=colalign, disable_numparse=True))
        print()
    model_options = ("dataflow", "tile", "mac_latency", "acc_latency", "no_overlap", "per_sample_wu",
                     "resnet_v1")
    defaults = parser.parse_args([])
    if any(getattr(args, option) != getattr(defaults, option) for option in model_options):
        print("(model options differ from the defaults: docs/systolic.md left unchanged)")
        return
    from scripts.flow.docs import write_table

    for name, _title, (headers, rows, colalign) in sections:
        if name is not None:
            command = COMMAND + (" --breakdown" if name == "partition-breakdown" else "")
            write_table("systolic.md", name, headers, rows, command, colalign=colalign, disable_numparse=True)
    print("wrote docs/systolic.md (" + ", ".join(name for name, _, _ in sections if name) + ")")
    plot_utilisation(network, schedule)


if __name__ == "__main__":
    main()
