"""The parts of :mod:`testbenches.systolic.bench_systolic` measured on the RTL: ``synth`` and ``rtl``.

``synth`` synthesises PEs and small arrays with Yosys; ``rtl`` runs large GEMMs through
:class:`rtl.systolic.tiled_gemm.TiledGemm` in cocotb on Verilator, with its host device
(:func:`scripts.sim.devices.aggregate.run_gemms`).
"""

from scripts.flow.docs import write_table
from testbenches.systolic.bench_systolic_common import (
    COMMAND,
    DOC,
    OS,
    OUT,
    WS,
    pe_latencies,
    print_table,
    write_json,
)

__all__ = ["synth", "rtl", "ELEMENTS", "RTL_POINTS", "RESNET50_POINTS"]

ELEMENTS = ("f32", "f16", "bf16", "int8")


def synth(args):
    from rtl.systolic.os_array import OutputStationaryArray
    from rtl.systolic.os_pe import OutputStationaryPE
    from rtl.systolic.ws_array import WeightStationaryArray
    from rtl.systolic.ws_pe import WeightStationaryPE
    from scripts.flow.synth import synthesize

    points = []
    for element in ELEMENTS:
        slots = pe_latencies(element)[1]
        points.append((f"OS PE, T={slots}", element, lambda e=element, t=slots: OutputStationaryPE(
            element=e, slots=t)))
        points.append(("WS PE", element, lambda e=element: WeightStationaryPE(element=e)))
    for element in args.array_elements:
        slots = pe_latencies(element)[1]
        for size in args.array_sizes:
            points.append((f"os_array {size}x{size}, T={slots}", element,
                           lambda e=element, s=size, t=slots: OutputStationaryArray(
                               rows=s, cols=s, element=e, slots=t, max_k=4096, max_tiles=4096)))
            points.append((f"ws_array {size}x{size}", element,
                           lambda e=element, s=size: WeightStationaryArray(
                               rows=s, cols=s, element=e, max_m=512, max_k=4096, max_tiles=4096)))
    rows, cells = [], []
    for name, element, build in points:
        result = synthesize(build(), "xcup")
        rows.append({"design": name, "element": element, **{k: v for k, v in result.items() if k != "cells"}})
        cells.append([name, element, *(result[k] if isinstance(result[k], int) else f"{result[k]}"
                                       for k in ("LUT", "FF", "CARRY", "DSP48E2", "BRAM")), result["mapper"]])
        print(cells[-1], flush=True)
    write_json("systolic_synth.json", rows)
    headers = ["design", "element", "LUT", "FF", "CARRY", "DSP48E2", "BRAM", "mapper"]
    colalign = ("left", "left", "right", "right", "right", "right", "right", "left")
    print_table(headers, cells, colalign)
    # The docs keep the PE rows; the small arrays are Section 6.2's sweeps.
    command = (f"{COMMAND} synth --array-sizes {' '.join(map(str, args.array_sizes))} "
               f"--array-elements {' '.join(args.array_elements)}")
    write_table(DOC, "systolic-pe", headers, [row for row in cells if " PE" in row[0]], command,
                colalign=colalign, disable_numparse=True)
    print("\nExtrapolated (rows x cols x PE + the edge logic measured on the largest array above):\n")
    estimates = []
    by_name = {(row["design"], row["element"]): row for row in rows}
    size = max(args.array_sizes)
    for element in args.array_elements:
        slots = pe_latencies(element)[1]
        for kind, pe_name, array_name in (("OS", f"OS PE, T={slots}", f"os_array {size}x{size}, T={slots}"),
                                          ("WS", "WS PE", f"ws_array {size}x{size}")):
            pe, array = by_name[(pe_name, element)], by_name[(array_name, element)]
            for r, c in ((32, 16), (64, 32)):
                estimate = {key: r * c * pe[key] + max(array[key] - size * size * pe[key], 0)
                            for key in ("LUT", "FF", "DSP48E2")}
                estimates.append([f"{kind} {r}x{c}", element, f"{estimate['LUT']:,}", f"{estimate['FF']:,}",
                                  f"{estimate['DSP48E2']:,}", f"{estimate['LUT'] / 522720:.0%}",
                                  f"{estimate['DSP48E2'] / 1968:.0%}"])
    print_table(["array", "element", "LUT", "FF", "DSP48E2", "KU15P LUT (522,720)", "KU15P DSP (1,968)"],
                estimates, ("left", "left") + ("right",) * 5)


RTL_POINTS = [
    ({"rows": 4, "cols": 4, "element": "f16", "slots": 6, "dataflow": OS}, (384, 64, 96)),
    ({"rows": 4, "cols": 4, "element": "f16", "dataflow": WS}, (384, 64, 96)),
    ({"rows": 8, "cols": 4, "element": "int8", "slots": 1, "dataflow": OS}, (512, 128, 64)),
]

# A real ResNet-50 layer: conv2_1a, the first 1 x 1 convolution of conv2_x (64 -> 64 channels on
# 56 x 56), one sample (golden.systolic.networks.resnet50(), layer 1): forward M = 56 * 56, K = N = 64;
# weight gradient M = 64, K = 56 * 56, N = 64.
_INT8_8X4 = {"rows": 8, "cols": 4, "element": "int8", "slots": 1, "dataflow": OS}
RESNET50_POINTS = [  # (array, GEMM, pass)
    (_INT8_8X4, (3136, 64, 64), "forward"),
    (_INT8_8X4, (64, 3136, 64), "weight gradient"),
    ({"rows": 4, "cols": 4, "element": "f16", "slots": 6, "dataflow": OS}, (3136, 64, 64), "forward"),
]


def measure_gemm(params, shape, seed=99):
    """One GEMM of ``shape`` with random operands on a ``tiled_gemm`` of ``params`` (no accumulator)
    through the host device: its bits must equal :func:`golden.systolic.gemm`; returns the
    shape, the compute ``cycles``, the cycle ``model`` and the MAC ``utilisation``."""
    import numpy as np

    from golden.systolic import gemm, gemm_cycle_terms
    from scripts.sim.devices.aggregate import run_gemms
    from testbenches.systolic.schedule import array_schedule
    from testbenches.systolic.tb import random_matrix

    m_size, k_size, n_size = shape
    rng = np.random.default_rng(seed)
    a = random_matrix(rng, (m_size, k_size), params["element"])
    b = random_matrix(rng, (k_size, n_size), params["element"])
    (result,) = run_gemms(params, [(a, b)])
    expected = gemm(a, b, element=params["element"]).view(np.uint32)
    if not np.array_equal(result["c"], expected):
        wrong = int(np.sum(result["c"] != expected))
        raise AssertionError(f"tiled_gemm {params} GEMM {m_size}x{k_size}x{n_size}: "
                             f"{wrong} elements differ from golden.systolic.gemm")
    dataflow = params.get("dataflow", OS)
    schedule = array_schedule(params["element"], dataflow, params.get("slots", 1))
    terms = gemm_cycle_terms(m_size, k_size, n_size, rows=params["rows"], cols=params["cols"],
                             dataflow=dataflow, **schedule)
    cycles = result["compute_cycles"]
    return {"M": m_size, "K": k_size, "N": n_size, "cycles": cycles, "model": terms.total,
            "utilisation": terms.macs / (params["rows"] * params["cols"] * cycles)}


def rtl(args):
    OUT.mkdir(parents=True, exist_ok=True)
    results, rows = [], []
    for params, shape, *gemm_pass in RESNET50_POINTS if args.resnet50 else RTL_POINTS:
        full = {**params, "max_m": shape[0], "max_k": shape[1], "max_n": shape[2]}
        result = measure_gemm(full, shape)
        results.append({"params": params, **result})
        name = f"{params['dataflow'][:1].upper()}S {params['rows']}x{params['cols']} {params['element']}" + (
            f" T={params['slots']}" if params["dataflow"] == OS else "")
        rows.append([name, *gemm_pass, f"{shape[0]} x {shape[1]} x {shape[2]}", f"{result['cycles']:,}",
                     f"{result['model']:,}", f"{result['utilisation']:.2%}"])
        print(rows[-1], flush=True)
    write_json("systolic_rtl_resnet50.json" if args.resnet50 else "systolic_rtl.json", results)
    headers = ["array (`TiledGemm`)", *(["pass"] if args.resnet50 else []), "GEMM M x K x N", "RTL cycles",
               "model cycles", "MAC utilisation"]
    print_table(headers, rows, ("left",) * (len(headers) - 3) + ("right",) * 3,
                name="systolic-rtl-resnet50" if args.resnet50 else "systolic-rtl",
                command=f"{COMMAND} rtl" + (" --resnet50" if args.resnet50 else ""))
