"""The ``model`` part of :mod:`testbenches.systolic.bench_systolic`: utilisation from the cycle model."""

from golden.systolic import gemm_cycle_terms
from golden.systolic.networks import resnet50
from testbenches.systolic.bench_systolic_common import COMMAND, OS, WS, print_table, schedule, write_json

__all__ = ["model", "MODEL_ARRAYS", "LARGE_GEMMS"]

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
    rows = []
    for name, r, c, element, dataflow, slots in MODEL_ARRAYS:
        cells = []
        for shape in LARGE_GEMMS:
            terms = gemm_cycle_terms(*shape, rows=r, cols=c, dataflow=dataflow,
                                     **schedule(element, dataflow, slots))
            cells.append(terms.utilisation)
            results["large"].append({"array": name, "shape": shape, "cycles": terms.total,
                                     "utilisation": terms.utilisation})
        rows.append([name, *(f"{u:.1%}" for u in cells)])
    command = f"{COMMAND} model" + (f" --batch {args.batch}" if args.batch != 32 else "")
    print_table(["array", *(f"{m} x {k} x {n}" for m, k, n in LARGE_GEMMS)], rows,
                ("left",) + ("right",) * len(LARGE_GEMMS), name="systolic-model-large", command=command)

    network = resnet50()
    for transpose in (False, True):
        how = ("each GEMM run as C or as C^T = B^T A^T, whichever takes fewer cycles" if transpose
               else "each GEMM as written")
        print(f"\nResNet-50 training GEMMs, batch {args.batch}, {how} (MACs / (PEs x cycles)):\n")
        rows = []
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
            rows.append([name, *(f"{utilisation[key]:.1%}"
                                 for key in ("forward", "backward", "weight", "all"))])
        table = "systolic-model-resnet50" + ("-transposed" if transpose else "")
        print_table(["array", "forward", "backward data", "weight gradient", "all passes"], rows,
                    ("left",) + ("right",) * 4, name=table if args.batch == 32 else None, command=command)
    write_json("systolic_model.json", results)
