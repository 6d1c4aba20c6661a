"""Systolic arrays: resources (Yosys, xcup), cycles and MAC utilisation; prints Markdown tables.

Run ``.venv/bin/python -m scripts.bench_systolic <part>``, part one of:

``synth``
    Resources of one PE of each kind and element, and of small whole arrays, through
    ``scripts.synth.synthesize`` (``synth_xilinx -family xcup -flatten``), plus the DPT sizes
    extrapolated as ``rows x cols`` PEs and the measured edge logic of a 4 x 4 array.
``rtl``
    Large GEMMs through :class:`rtl.systolic.tiled_gemm.TiledGemm` in cocotb on Verilator: measured
    compute cycles next to the cycle model, and MAC utilisation (slow: minutes per GEMM); with
    ``--resnet50``, a ResNet-50 layer's GEMMs instead (conv2_1a forward and weight gradient, one sample).
``model``
    Utilisation of large GEMMs and of the ResNet-50 training GEMMs from
    :func:`golden.systolic.gemm_cycle_terms`. The cycle model equals the RTL's count on every shape
    the tests run (``testbenches/systolic/test_rtl_*.py`` assert it), so it stands in for
    simulations that would take hours.

Results are also written as JSON under ``build/bench/``.
"""

import argparse
import json
import pathlib

from golden.systolic import gemm_cycle_terms
from golden.systolic.networks import resnet50

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "bench"
OS, WS = "output_stationary", "weight_stationary"

ELEMENTS = ("f32", "f16", "bf16", "int8")


def _latencies(element):
    """(multiplier, adder) latency of the RTL PE's units, read from rtl/systolic/arithmetic.py."""
    from rtl.systolic.arithmetic import arithmetic

    unit = arithmetic(element)
    return unit.multiply_latency, unit.add_latency


def schedule(element, dataflow, slots):
    """The cycle-model keyword arguments of an RTL array (the L and A its docstring gives)."""
    multiply, add = _latencies(element)
    if dataflow == OS:
        return {"tile": slots, "mac_latency": multiply + add + 2, "acc_latency": add}
    return {"mac_latency": multiply + add}


# ---------------------------------------------------------------------------------------------
def synth(args):
    from rtl.systolic.os_array import OutputStationaryArray
    from rtl.systolic.os_pe import OutputStationaryPE
    from rtl.systolic.ws_array import WeightStationaryArray
    from rtl.systolic.ws_pe import WeightStationaryPE
    from scripts.synth import synthesize

    points = []
    for element in ELEMENTS:
        slots = _latencies(element)[1]
        points.append((f"OS PE, T={slots}", element, lambda e=element, t=slots: OutputStationaryPE(
            element=e, slots=t)))
        points.append(("WS PE", element, lambda e=element: WeightStationaryPE(element=e)))
    for element in args.array_elements:
        slots = _latencies(element)[1]
        for size in args.array_sizes:
            points.append((f"os_array {size}x{size}, T={slots}", element,
                           lambda e=element, s=size, t=slots: OutputStationaryArray(
                               rows=s, cols=s, element=e, slots=t, max_k=4096, max_tiles=4096)))
            points.append((f"ws_array {size}x{size}", element,
                           lambda e=element, s=size: WeightStationaryArray(
                               rows=s, cols=s, element=e, max_m=512, max_k=4096, max_tiles=4096)))
    rows = []
    print("| design | element | LUT | FF | CARRY | DSP48E2 | BRAM | mapper |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for name, element, build in points:
        result = synthesize(build(), "xcup")
        rows.append({"design": name, "element": element, **{k: v for k, v in result.items() if k != "cells"}})
        print(f"| {name} | {element} | {result['LUT']} | {result['FF']} | {result['CARRY']} | "
              f"{result['DSP48E2']} | {result['BRAM']} | {result['mapper']} |", flush=True)
    _write("systolic_synth.json", rows)
    print()
    print("Extrapolated (rows x cols x PE + the edge logic measured on the largest array above):")
    print("| array | element | LUT | FF | DSP48E2 | KU15P LUT (522,720) | KU15P DSP (1,968) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    by_name = {(row["design"], row["element"]): row for row in rows}
    size = max(args.array_sizes)
    for element in args.array_elements:
        slots = _latencies(element)[1]
        for kind, pe_name, array_name in (("OS", f"OS PE, T={slots}", f"os_array {size}x{size}, T={slots}"),
                                          ("WS", "WS PE", f"ws_array {size}x{size}")):
            pe, array = by_name[(pe_name, element)], by_name[(array_name, element)]
            for r, c in ((32, 16), (64, 32)):
                estimate = {key: r * c * pe[key] + max(array[key] - size * size * pe[key], 0)
                            for key in ("LUT", "FF", "DSP48E2")}
                print(f"| {kind} {r}x{c} | {element} | {estimate['LUT']:,} | {estimate['FF']:,} | "
                      f"{estimate['DSP48E2']:,} | {estimate['LUT'] / 522720:.0%} | "
                      f"{estimate['DSP48E2'] / 1968:.0%} |")


# ---------------------------------------------------------------------------------------------
RTL_POINTS = [
    ({"rows": 4, "cols": 4, "element": "f16", "slots": 6, "dataflow": OS}, (384, 64, 96)),
    ({"rows": 4, "cols": 4, "element": "f16", "dataflow": WS}, (384, 64, 96)),
    ({"rows": 8, "cols": 4, "element": "int8", "slots": 1, "dataflow": OS}, (512, 128, 64)),
]

# A real ResNet-50 layer: conv2_1a, the first 1 x 1 convolution of conv2_x (64 -> 64 channels on
# 56 x 56), one sample (golden.systolic.networks.resnet50(), layer 1): forward M = 56 * 56, K = N = 64;
# weight gradient M = 64, K = 56 * 56, N = 64.
RESNET50_POINTS = [
    ({"rows": 8, "cols": 4, "element": "int8", "slots": 1, "dataflow": OS}, (3136, 64, 64)),
    ({"rows": 8, "cols": 4, "element": "int8", "slots": 1, "dataflow": OS}, (64, 3136, 64)),
    ({"rows": 4, "cols": 4, "element": "f16", "slots": 6, "dataflow": OS}, (3136, 64, 64)),
]


def rtl(args):
    from testbenches.harness import run_cocotb

    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    print("| array | GEMM M x K x N | RTL cycles | model cycles | MAC utilisation |")
    print("|---|---|---:|---:|---:|")
    for params, shape in RESNET50_POINTS if args.resnet50 else RTL_POINTS:
        out = OUT / "systolic_rtl_point.json"
        full = {**params, "max_m": shape[0], "max_k": shape[1], "max_n": shape[2]}
        run_cocotb("tiled_gemm", "testbenches.systolic.cocotb_tiled_gemm", params=full, testcase="large_gemm",
                   extra_env={"NEARTRAIN_GEMM": ",".join(map(str, shape)), "NEARTRAIN_BENCH_OUT": str(out)})
        result = json.loads(out.read_text())
        results.append({"params": params, **result})
        name = f"{params['dataflow'][:1].upper()}S {params['rows']}x{params['cols']} {params['element']}" + (
            f" T={params['slots']}" if params["dataflow"] == OS else "")
        print(f"| {name} | {shape[0]} x {shape[1]} x {shape[2]} | {result['cycles']:,} | "
              f"{result['model']:,} | {result['utilisation']:.2%} |", flush=True)
    _write("systolic_rtl_resnet50.json" if args.resnet50 else "systolic_rtl.json", results)


# ---------------------------------------------------------------------------------------------
MODEL_ARRAYS = [
    ("OS 32x16 f16 T=6", 32, 16, "f16", OS, 6),
    ("OS 32x16 f16 T=8", 32, 16, "f16", OS, 8),
    ("WS 32x16 f16", 32, 16, "f16", WS, 1),
    ("OS 64x32 int8 T=1", 64, 32, "int8", OS, 1),
    ("WS 64x32 int8", 64, 32, "int8", WS, 1),
]
LARGE_GEMMS = [(1024, 1024, 1024), (4096, 1024, 1024), (2048, 4096, 512)]


def model(args):
    results = {"large": [], "resnet50": []}
    print("Large GEMMs (MAC utilisation from the cycle model):\n")
    print("| array | " + " | ".join(f"{m} x {k} x {n}" for m, k, n in LARGE_GEMMS) + " |")
    print("|---|" + "---:|" * len(LARGE_GEMMS))
    for name, r, c, element, dataflow, slots in MODEL_ARRAYS:
        cells = []
        for shape in LARGE_GEMMS:
            terms = gemm_cycle_terms(*shape, rows=r, cols=c, dataflow=dataflow,
                                     **schedule(element, dataflow, slots))
            cells.append(terms.utilisation)
            results["large"].append({"array": name, "shape": shape, "cycles": terms.total,
                                     "utilisation": terms.utilisation})
        print(f"| {name} | " + " | ".join(f"{u:.1%}" for u in cells) + " |")

    network = resnet50()
    for transpose in (False, True):
        how = ("each GEMM run as C or as C^T = B^T A^T, whichever takes fewer cycles" if transpose
               else "each GEMM as written")
        print(f"\nResNet-50 training GEMMs, batch {args.batch}, {how} (MACs / (PEs x cycles)):\n")
        print("| array | forward | backward data | weight gradient | all passes |")
        print("|---|---:|---:|---:|---:|")
        for name, r, c, element, dataflow, slots in MODEL_ARRAYS:
            totals = {"forward": [0, 0], "backward": [0, 0], "weight": [0, 0]}
            for index, entry in enumerate(network.layers):
                layer = entry.layer
                passes = {"forward": layer.forward_gemm(args.batch),
                          "weight": layer.weight_grad_gemm(args.batch)}
                if index:  # the first layer computes no input gradient
                    passes["backward"] = layer.backward_data_gemm(args.batch)
                for key, (m, k, n) in passes.items():
                    options = [(m, k, n), (n, k, m)] if transpose else [(m, k, n)]
                    terms = min((gemm_cycle_terms(*shape, rows=r, cols=c, dataflow=dataflow,
                                                  **schedule(element, dataflow, slots)) for shape in options),
                                key=lambda t: t.total)
                    totals[key][0] += terms.macs
                    totals[key][1] += terms.total
            macs = sum(v[0] for v in totals.values())
            cycles = sum(v[1] for v in totals.values())
            utilisation = {key: v[0] / (r * c * v[1]) for key, v in totals.items()}
            utilisation["all"] = macs / (r * c * cycles)
            results["resnet50"].append({"array": name, "batch": args.batch, "transpose": transpose,
                                        **utilisation, "cycles": cycles})
            print(f"| {name} | {utilisation['forward']:.1%} | {utilisation['backward']:.1%} | "
                  f"{utilisation['weight']:.1%} | {utilisation['all']:.1%} |")
    _write("systolic_model.json", results)


def _write(name, value):
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(json.dumps(value, indent=1, default=str))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="part", required=True)
    p_synth = sub.add_parser("synth", help="resources on xcup")
    p_synth.add_argument("--array-sizes", type=int, nargs="+", default=[2, 4])
    p_synth.add_argument("--array-elements", nargs="+", default=["f16"])
    p_rtl = sub.add_parser("rtl", help="large GEMMs in cocotb on Verilator (slow)")
    p_rtl.add_argument("--resnet50", action="store_true",
                       help="run the ResNet-50 layer GEMMs of RESNET50_POINTS instead (slower)")
    p_model = sub.add_parser("model", help="utilisation from the cycle model")
    p_model.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    {"synth": synth, "rtl": rtl, "model": model}[args.part](args)


if __name__ == "__main__":
    main()
