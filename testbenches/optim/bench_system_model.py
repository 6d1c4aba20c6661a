"""``python -m testbenches.optim.bench_system_model``: Smart-Infinity's figures from the system model.

Runs :mod:`golden.smartinfinity` (the discrete-event model of one storage-offloaded training
step) for the seed's Fig. 9 (GPT-2 models, 6 and 10 SSDs, four configurations), Fig. 10's
33.0B model, Fig. 11 (1 to 10 CSDs, A5000 and A100), Table I's traffic, Table IV / Fig. 16's
compression ratios (1 to 10 %), 10 to 32 CSDs, and the sensitivity to each assumed input, and
writes every table of ``docs/smartinfinity.md`` (:func:`scripts.flow.docs.write_table`) and
its two plots. The FPGA updater's rate is the RTL's, read from ``docs/data/optim-ddr.json``
(the 16-lane Adam kernel's steady state on the SmartSSD's shared DDR4 model, written by
``python -m testbenches.optim.bench_ddr``). No simulation of RTL runs here: the
whole bench takes a few minutes of CPU.
"""

import argparse
import json

from golden.smartinfinity import (
    CONFIGS,
    GPT2_MODELS,
    TLP_EFFICIENCY,
    Workload,
    pcie_bandwidth,
    single_step_end,
    smartssd_machine,
    speedups,
    step_time,
    traffic,
)
from golden.smartinfinity.paper import (
    FIG9_SPEEDUPS,
    FIG9_UPDATE_SHARE,
    FIG10_SPEEDUPS,
    FIG11,
    TABLE_I,
    TABLE_IV,
)
from scripts.flow.docs import DATA, write_table
from scripts.flow.figures import docs_plot

__all__ = ["fpga_elements_per_cycle", "main"]

DOC = "smartinfinity.md"
COMMAND = ".venv/bin/python -m testbenches.optim.bench_system_model"
MODELS = {**GPT2_MODELS, "GPT-2 33.0B": 33.0e9}
FINE_TUNING = {"BERT-0.34B": 0.34e9, "GPT2-0.77B": 0.77e9, "GPT2-1.6B": 1.6e9}
DDR_BOUND = 64 / 30  # elements/cycle: 64 B/cycle of shared DDR4 over Adam's 30 B per element


def fpga_elements_per_cycle():
    """Steady elements/cycle of the 16-lane Adam kernel on the shared DDR4 model (docs/optim.md)."""
    spec = json.loads((DATA / "optim-ddr.json").read_text())
    column = spec["headers"].index("steady elements/cycle")
    for row in spec["rows"]:
        if row[0] == "adam_updater":
            return float(row[column])
    raise LookupError("optim-ddr has no adam_updater row (python -m testbenches.optim.bench_ddr)")


def axiram_elements_per_cycle():
    """The same kernel on ``AxiRam``, which gives reads and writes 64 B/cycle each (optim-throughput)."""
    spec = json.loads((DATA / "optim-throughput.json").read_text())
    column = spec["headers"].index("steady elements/cycle")
    for row in spec["rows"]:
        if row[:3] == [16, "shared", "0.0"]:
            return float(row[column])
    raise LookupError("optim-throughput has no 16-lane shared-port row without stalls")


def _machine(devices, gpu="A5000", **changes):
    return smartssd_machine(devices, gpu, fpga_elements_per_cycle=fpga_elements_per_cycle(), **changes)


def _inputs():
    rate = fpga_elements_per_cycle()
    m = _machine(10)
    sensitivity = "under Sensitivity"
    rows = [
        ["shared host link", f"{m.host_link / 1e9:.2f} GB/s each way",
         f"PCIe Gen3 x16 (8 GT/s, 128b/130b) x TLP efficiency {TLP_EFFICIENCY:.3f} (256 B payload, "
         "24 B overhead): assumed, the paper does not state the expansion's host link; "
         f"Gen4 x16 {sensitivity}"],
        ["each SmartSSD's links (external, SSD, FPGA ports)", f"{m.device_link / 1e9:.2f} GB/s each way",
         "PCIe Gen3 x4 (§VII-A), same derivation"],
        ["SSD sequential read / write", f"{m.ssd_read / 1e9:.1f} / {m.ssd_write / 1e9:.1f} GB/s",
         "Samsung SmartSSD launch figures (Nov 2020 press: up to 3,500 / 3,200 MB/s; no Samsung data "
         "sheet checked here); reads and writes "
         "share the SSD (a byte read costs 1/read, a byte written 1/write of its time); "
         f"2.0 GB/s write {sensitivity}"],
        ["GPU link", f"{m.gpu_link / 1e9:.2f} GB/s each way", "PCIe Gen4 x16 (A5000, A100 PCIe data sheets)"],
        ["GPU peak, A5000 / A100", "111.1 / 312 TFLOPS",
         "NVIDIA data sheets, dense FP16 tensor, FP32 accumulate (A5000: 222.2 with sparsity, halved; "
         "recalled, not checked against a copy here)"],
        ["GPU memory, A5000 / A100", "768 / 1,555 GB/s",
         "NVIDIA data sheets (Top-K: 4 passes over FP32 gradient)"],
        ["GPU utilisation", f"{m.gpu_utilisation:.0%} of peak",
         f"assumed, not fitted; 30 % and 70 % {sensitivity}"],
        ["training FLOPs", "2 P per token forward, 6 P backward", "6 P per token (Kaplan et al.) plus the "
         "forward recomputed by activation checkpointing; attention FLOPs ignored"],
        ["tokens per step", "4 x 1,024", "batch 4 (§VII-A); GPT-2's 1,024-token context (assumed)"],
        ["CPU Adam", f"{m.cpu_elements / 1e9:.2f} G elements/s",
         "Table II host memory, 16 channels DDR4-3200 (409.6 GB/s) at 50 % (assumed), 30 B per element; "
         f"4x slower {sensitivity}"],
        ["FPGA updater", f"{m.fpga_elements / 1e9:.2f} G elements/s",
         f"RTL: {rate:.3f} elements/cycle at 300 MHz, the 16-lane Adam kernel on one shared port "
         "under the shared-bandwidth DDR4 model (64 B/cycle read and write together, 7-cycle "
         f"turnarounds; docs/optim.md, docs/data/optim-ddr.json), {rate / DDR_BOUND:.1%} of the "
         f"bound {DDR_BOUND:.2f}; on AxiRam's separate read and write paths "
         f"{axiram_elements_per_cycle():.2f} "
         f"{sensitivity}"],
        ["FPGA DRAM", "4 GiB", "§VII-A; SmartUpdate subgroup = 4 GiB / 16 B (p, m, v, g in FP32)"],
        ["baseline subgroup", "1e9 elements", "DeepSpeed's default sub_group_size; read, update, write not "
         "pipelined (pipeline_read/write default off)"],
        ["SmartComp ratio c", "2 %", "§VII-A: top 1 % values with their indices"],
    ]
    write_table(DOC, "smartinfinity-inputs", ["input", "value", "source"], rows, COMMAND,
                disable_numparse=True)


def _table1():
    work = Workload(GPT2_MODELS["GPT-2 4.0B"])
    unit = 2 * work.parameters  # M: FP16 model bytes
    rows = []
    for config, paper in (("BASE", "BASE"), ("SU", "SU"), ("SU+O", "SU"), ("SU+O+C", "SU+O+C")):
        moved = traffic(config, _machine(10), work)
        for (what, direction), expected in TABLE_I[paper].items():
            link = "host_up" if direction == "read" else "host_down"
            model = moved.get((link, what), 0.0) / unit
            if expected == "2c":
                expected = f"2c = {2 * work.compression:g}"
            rows.append([config, what, direction, f"{model:g}", expected])
        p2p = (moved.get(("p2p_read", "states"), 0) + moved.get(("p2p_read", "gradients"), 0)) / unit
        rows.append([config, "inside the SmartSSDs", "SSD to FPGA / FPGA to SSD",
                     f"{p2p:g} / {moved.get(('p2p_write', 'states'), 0) / unit:g}", ""])
    write_table(DOC, "smartinfinity-table1", ["config", "traffic", "direction", "model (M)", "Table I (M)"],
                rows, f"{COMMAND} (GPT-2 4.0B, 10 SSDs; M = FP16 model bytes)", disable_numparse=True)


def _fig9():
    rows = []
    for name, parameters in MODELS.items():
        for devices in (6, 10):
            results = speedups(CONFIGS, _machine(devices), Workload(parameters))
            for config, (result, speedup) in results.items():
                paper = FIG9_SPEEDUPS.get((devices, config))
                paper = f"{paper[0]:.2f}-{paper[1]:.2f}" if paper else ""
                if config == "SU+O+C" and (name, devices) in FIG10_SPEEDUPS:
                    paper = f"{FIG10_SPEEDUPS[(name, devices)]:.2f} (Fig. 10)"
                share = f"{result.update / result.total:.1%}"
                if config == "BASE" and (name, devices) == FIG9_UPDATE_SHARE[:2]:
                    share += f" (paper {FIG9_UPDATE_SHARE[2]:.2%})"
                alone = single_step_end(config, _machine(devices), Workload(parameters))
                rows.append([name, devices, config, f"{result.forward:.2f}", f"{result.backward:.2f}",
                             f"{result.update:.2f}", f"{result.total:.2f}", f"{alone:.2f}", share,
                             f"{speedup:.2f}", paper])
    write_table(DOC, "smartinfinity-fig9",
                ["model", "SSDs", "config", "FW s", "BW + grad offload s", "update + upload/offload s",
                 "step s (model)", "one step alone, to the simulation's end s", "update share",
                 "speed-up (model)", "speed-up (paper)"],
                rows, f"{COMMAND} (A5000)", disable_numparse=True)


def _fig11():
    rows, curves = [], {}
    work = Workload(GPT2_MODELS["GPT-2 4.0B"])
    for gpu in ("A5000", "A100"):
        base_one = None
        for devices in range(1, 11):
            results = speedups(CONFIGS, _machine(devices, gpu), work)
            base_one = base_one or results["BASE"][0].total
            for config, (result, _) in results.items():
                curves.setdefault((gpu, config), []).append((devices, base_one / result.total))
            row = [gpu, devices, f"{base_one / results['BASE'][0].total:.2f}"]
            row += [f"{results[c][1]:.2f}" for c in CONFIGS[1:]]
            result = results["SU+O+C"][0]
            row += [f"{result.forward:.2f} / {result.backward:.2f} / {result.update:.2f}"]
            row += [_fig11_paper(gpu, devices)]
            rows.append(row)
    write_table(DOC, "smartinfinity-fig11",
                ["GPU", "CSDs", "BASE over BASE at 1 SSD (model)", "SU (model)", "SU+O (model)",
                 "SU+O+C (model)", "SU+O+C FW / BW / update s", "paper"],
                rows, f"{COMMAND} (GPT-2 4.0B; speed-ups over BASE at the same count)", disable_numparse=True)
    with docs_plot("smartinfinity_scaling.png", xlabel="SmartSSDs", ylabel="throughput over BASE with 1 SSD",
                   title="GPT-2 4.0B (model)", from_zero=True, legend_size=8) as axis:
        for (gpu, config), points in curves.items():
            if config in ("BASE", "SU+O+C"):
                axis.plot(*zip(*points, strict=True), marker="o", linestyle="-" if config == "BASE" else "--",
                          label=f"{config}, {gpu}")


def _fig11_paper(gpu, devices):
    if devices == 1:
        return "Smart-Infinity slightly slower than BASE"
    if devices == FIG11["baseline saturates at"]:
        return "BASE stops scaling here"
    if gpu == "A100" and devices == 10:
        return f"up to {FIG11['A100 at 10']:.2f}x"
    return ""


def _fig16():
    rows = []
    points = [(name, parameters, 6) for name, parameters in FINE_TUNING.items()]
    points.append(("GPT-2 4.0B", GPT2_MODELS["GPT-2 4.0B"], 10))
    for name, parameters, devices in points:
        machine, work = _machine(devices), Workload(parameters)
        base = step_time("BASE", machine, work).total
        paper = TABLE_IV.get(name, {})
        rows.append([name, devices, "SU+O", f"{base / step_time('SU+O', machine, work).total:.2f}",
                     f"{paper['SU+O']:.2f}" if paper else ""])
        for percent in range(1, 11):
            ratio = percent / 100
            speedup = base / step_time("SU+O+C", machine, work.with_(compression=ratio)).total
            rows.append([name, devices, f"SU+O+C ({percent} %)", f"{speedup:.2f}",
                         f"{paper[ratio]:.2f}" if ratio in paper else ""])
    write_table(DOC, "smartinfinity-fig16",
                ["model", "SSDs", "config", "speed-up (model)", "speed-up (paper, Table IV)"], rows,
                f"{COMMAND} (A5000)", disable_numparse=True)


def _beyond():
    rows, curves = [], {}
    work = Workload(GPT2_MODELS["GPT-2 4.0B"])
    for devices in (10, 12, 16, 20, 24, 28, 32):
        results = speedups(CONFIGS, _machine(devices), work)
        for config, (_, speedup) in results.items():
            curves.setdefault(config, []).append((devices, speedup))
        rows.append([devices] + [f"{results[c][0].total:.2f}" for c in CONFIGS] +
                    [f"{results[c][1]:.2f}" for c in CONFIGS[1:]])
    write_table(DOC, "smartinfinity-beyond",
                ["CSDs"] + [f"{c} step s" for c in CONFIGS] + [f"{c} speed-up" for c in CONFIGS[1:]],
                rows, f"{COMMAND} (GPT-2 4.0B, A5000, model only)", disable_numparse=True)
    with docs_plot("smartinfinity_beyond.png", xlabel="SmartSSDs", ylabel="speed-up over BASE (same count)",
                   title="GPT-2 4.0B on A5000, 10 to 32 CSDs (model)", from_zero=True, legend_size=8) as axis:
        for config in CONFIGS[1:]:
            axis.plot(*zip(*curves[config], strict=True), marker="o", label=config)


def _sensitivity():
    work = Workload(GPT2_MODELS["GPT-2 4.0B"])
    axiram = axiram_elements_per_cycle()
    cases = [("as stated", {}), (f"FPGA at {axiram:.2f} elements/cycle (AxiRam: no shared DDR)",
                                {"fpga_elements": axiram * 300e6}),
             ("GPU utilisation 30 %", {"gpu_utilisation": 0.3}),
             ("GPU utilisation 70 %", {"gpu_utilisation": 0.7}),
             ("host link PCIe Gen4 x16", {"host_link": pcie_bandwidth(4, 16)}),
             ("SSD write 2.0 GB/s", {"ssd_write": 2.0e9}), ("CPU Adam 4x slower", "cpu")]
    rows = []
    for label, changes in cases:
        row = [label]
        for devices in (4, 6, 10):
            machine = _machine(devices)
            machine = (machine.with_(cpu_elements=machine.cpu_elements / 4) if changes == "cpu"
                       else machine.with_(**changes))
            results = speedups(CONFIGS, machine, work)
            row.append(f"{results['BASE'][0].total:.2f}")
            row.append(" / ".join(f"{results[c][1]:.2f}" for c in CONFIGS[1:]))
        rows.append(row)
    write_table(DOC, "smartinfinity-sensitivity",
                ["input changed", "BASE s, 4 SSDs", "SU / SU+O / SU+O+C, 4", "BASE s, 6", "same, 6",
                 "BASE s, 10", "same, 10"], rows, f"{COMMAND} (GPT-2 4.0B, A5000)", disable_numparse=True)


def _stored(name):
    spec = json.loads((DATA / f"{name}.json").read_text())
    return [dict(zip(spec["headers"], row, strict=True)) for row in spec["rows"]]


def _summary():
    """The paper's claims against the model, from the stored fig9 and fig11 rows."""
    fig9, fig11 = _stored("smartinfinity-fig9"), _stored("smartinfinity-fig11")
    rows = []
    for gpu in ("A5000", "A100"):
        curve = [float(r["BASE over BASE at 1 SSD (model)"]) for r in fig11 if r["GPU"] == gpu]
        last = next(n for n in range(1, len(curve)) if curve[n] < curve[n - 1] * 1.05)
        rows.append([f"BASE stops scaling ({gpu}, GPT-2 4.0B)", f"at {FIG11['baseline saturates at']} SSDs",
                     f"last gain of 5 % or more: {last - 1} to {last} SSDs", ""])
    for (devices, config), (low, high) in FIG9_SPEEDUPS.items():
        found = [float(r["speed-up (model)"]) for r in fig9 if r["SSDs"] == devices and r["config"] == config]
        gap = (min(found) / low - 1 if min(found) < low
               else max(found) / high - 1 if max(found) > high else 0.0)
        rows.append([f"{config} at {devices} SSDs (A5000, 4 GPT-2 models)", f"{low:.2f}-{high:.2f}",
                     f"{min(found):.2f}-{max(found):.2f}", f"{gap:+.1%}"])
    a100 = float(next(r["SU+O+C (model)"] for r in fig11 if r["GPU"] == "A100" and r["CSDs"] == 10))
    rows.append(["SU+O+C at 10 SSDs, A100, GPT-2 4.0B", f"up to {FIG11['A100 at 10']:.2f}", f"{a100:.2f}",
                 f"{a100 / FIG11['A100 at 10'] - 1:+.1%}"])
    one = [float(r["SU+O+C (model)"]) for r in fig11 if r["CSDs"] == 1]
    rows.append(["SU+O+C at 1 CSD", "slightly below 1", f"{min(one):.2f}-{max(one):.2f}",
                 "below 1 too" if max(one) < 1 else "not below 1"])
    write_table(DOC, "smartinfinity-summary",
                ["claim", "paper", "model", "model outside the paper's range by"], rows,
                f"{COMMAND} summary (from the stored fig9 and fig11 rows)", disable_numparse=True)


PARTS = {"inputs": _inputs, "table1": _table1, "fig9": _fig9, "fig11": _fig11, "fig16": _fig16,
         "beyond": _beyond, "sensitivity": _sensitivity, "summary": _summary}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bench_system_model", description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", metavar="PART",
                        help=f"tables to write: {', '.join(PARTS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part {unknown[0]!r} (choose from {', '.join(PARTS)})")
    for part in args.parts or list(PARTS):
        print(f"{part} ...", flush=True)
        PARTS[part]()


if __name__ == "__main__":
    main()
