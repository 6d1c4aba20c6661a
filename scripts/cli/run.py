"""``neartrain run`` (``make run``) and ``neartrain verilog`` (``make verilog``).

The main job shows the whole flow in a few minutes:

1. Verilog and a manifest for every registered block (default parameters), in
   ``build/verilog/``, and for the default accelerator, the 16-lane Adam updater kernel
   (``adam_updater``, 512-bit AXI4, one shared port, AXI4-Lite control, DSP-frugal products), in
   ``build/verilog/accelerator/``;
2. short cocotb simulations on Verilator, each checked against its golden model:

   * the stream smoke check (``width_converter`` under stalls, against ``golden.bus``, through
     :mod:`scripts.sim.devices.stream`);
   * one AdamW step through the Adam kernel with one lane (:mod:`scripts.sim.devices.updater`:
     cocotbext-axi ``AxiRam`` memory, ``AxiLiteMaster`` host), bit for bit against ``golden.optim``;
   * the elements per cycle of the 16-lane kernel with one shared port and with a port
     per tensor, on its timing build (the FP datapath replaced by its timing; the cycle
     counts are identical, see docs/optim.md);

3. resources from Yosys for the ``xcup`` target: the default stream blocks, and the
   16-lane Adam kernel next to Smart-Infinity's Table III when its synthesis result is in
   the cache (synthesising it takes about 45 minutes on a 2-core machine, so the job does not
   start it; ``make sweep`` or ``neartrain synth adam_updater --set lanes=16 --set dsp_tile=24
   --set lut_bits=7 --target xcup`` fills the cache).

Steps 1 and 2 share one process per core: the accelerator's elaboration starts first, and
the simulations start as the elaboration frees cores. Verilator builds, elaborated Verilog
and synthesis results are cached (``build/sim/``, ``build/elaboration/``, ``build/synth/``):
the first run spends most of its time elaborating and compiling, later runs are quick.
"""

import logging
import os
import pathlib
import time

from scripts.flow.cache import BUILD

from .blocks import generate_verilog
from .common import UsageError, format_resource_table, writable_folder

__all__ = ["register", "generate_all", "run_main_job", "ACCELERATOR", "ACCELERATOR_PARAMS"]

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The blocks whose resources the main job reports (default parameters).
REPORTED_BLOCKS = ("skid_buffer", "width_converter", "stream_fifo")
SMOKE_BLOCK = "width_converter"
SMOKE_TRANSFERS = 2000

# The default accelerator: Smart-Infinity's configuration (16 lanes on one 512-bit bundle),
# with the DSP-frugal products that keep it within Smart-Infinity's DSP budget (the point
# `make sweep` synthesises, so its cached figures are reported here). The registry default of
# adam_updater is 1 lane, which keeps `make lint` quick.
ACCELERATOR = "adam_updater"
ACCELERATOR_PARAMS = {"lanes": 16, "dsp_tile": 24, "lut_bits": 7}
# The bit-exact check runs the same kernel with one lane: a 16-lane Verilator build of the
# floating-point datapath takes far too long to compile for a demo.
CHECK_PARAMS = {"lanes": 1}
CHECK_ELEMENTS = 1000
THROUGHPUT_ELEMENTS = 16384


def _shown(path):
    """``path`` relative to the checkout when it is inside it (the build folder of an installed
    package is not)."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def _submit_elaboration(pool, folder, names, first=()):
    """Submit ``generate_verilog`` of ``first`` (``(name, folder, overrides)`` each), then of
    every block in ``names`` with default parameters into ``folder``; returns the futures.

    The long jobs go first so that no core waits at the end for one that started last.
    """
    jobs = list(first) + [(name, folder, None) for name in names]
    return [pool.submit(generate_verilog, *job) for job in jobs]


def _wait(futures, description):
    """Wait for ``futures`` with a progress bar; consuming the results re-raises the first failure."""
    from concurrent.futures import as_completed

    from tqdm import tqdm

    for future in tqdm(as_completed(futures), total=len(futures), unit="block", desc=description,
                       leave=False, mininterval=1):
        future.result()


def generate_all(folder, *, jobs=None):
    """Write Verilog and a manifest for every registered block (default parameters) into ``folder``.

    Blocks are elaborated in parallel on ``jobs`` processes (default: every core), since
    elaboration is single-threaded Python and most of the main job's first run.
    """
    from concurrent.futures import ProcessPoolExecutor

    from rtl.registry import blocks

    names = list(blocks())
    with ProcessPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        _wait(_submit_elaboration(pool, folder, names), "   elaborating")
    return names


def _quiet_cocotb(function):
    """Run ``function()``; cocotb's runner logs every command it runs at INFO."""
    logging.disable(logging.INFO)
    try:
        return function()
    finally:
        logging.disable(logging.NOTSET)


def _smoke_simulation():
    from scripts.sim.devices.stream import PATTERNS, run_stream_check
    from scripts.sim.runner import SimulationError

    try:
        _quiet_cocotb(lambda: run_stream_check(SMOKE_BLOCK, SMOKE_TRANSFERS))
    except SimulationError as failure:
        return f"FAILED: {failure}"
    return (f"passed: {SMOKE_TRANSFERS} transfers x {len(PATTERNS)} stall patterns through {SMOKE_BLOCK}, "
            f"bit-exact with golden.bus.regroup")


def _adam_inputs(n, seed=1, specials=0.1):
    import numpy as np

    from golden.optim.vectors import f32_tensor

    rng = np.random.default_rng(seed)
    tensors = {"param": f32_tensor(rng, n, specials=specials),
               "grad": f32_tensor(rng, n, scale=1e-2, specials=specials)}
    states = {"exp_avg": f32_tensor(rng, n, scale=1e-3, specials=specials),
              "exp_avg_sq": f32_tensor(rng, n, scale=1e-3, positive=True, specials=specials)}
    hyper = {"step": 5, "lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01,
             "decoupled": True, "grad_scale": 1.0}
    return tensors, states, hyper


def _bit_exact_update():
    """One AdamW step through the 1-lane kernel, against golden.optim; returns a line of text."""
    import numpy as np

    from golden.optim.host import reference_update
    from scripts.sim.devices import updater as device
    from scripts.sim.runner import SimulationError

    tensors, states, hyper = _adam_inputs(CHECK_ELEMENTS)
    try:
        result = _quiet_cocotb(lambda: device.update("adam", tensors["param"], tensors["grad"], states, hyper,
                                                     copy_format="bf16", **CHECK_PARAMS))
    except SimulationError as failure:
        return f"FAILED: {failure}"
    expected = reference_update("adam", param=tensors["param"], grad=tensors["grad"], states=states,
                                hyper=hyper, copy_format="bf16")
    wrong = [name for name in ("param", "exp_avg", "exp_avg_sq", "param16")
             if not np.array_equal(result.outputs[name], expected[name])]
    if wrong or result.status != int(expected["nonfinite"]) or result.error or not result.guards_intact:
        return f"FAILED: {wrong or 'status/error/guard bytes'} differ from golden.optim"
    return (f"passed: AdamW step on {CHECK_ELEMENTS} elements (adam_updater lanes={CHECK_PARAMS['lanes']}, "
            f"f32 gradient with NaN/Inf/subnormals, bf16 copy): param, exp_avg, exp_avg_sq, param16 and the "
            f"status bit-exact with golden.optim, in {result.cycles} cycles")


def _throughput():
    """Elements per cycle of the 16-lane kernel (timing build), shared and separate ports."""
    from scripts.sim.devices import updater as device
    from scripts.sim.runner import SimulationError

    tensors, states, hyper = _adam_inputs(THROUGHPUT_ELEMENTS, seed=2, specials=0.0)
    lines = []
    for ports in ("shared", "separate"):
        job = {"kind": "update", "param": tensors["param"], "grad": tensors["grad"], "states": states,
               "hyper": hyper, "copy_format": "bf16"}
        try:
            result = _quiet_cocotb(lambda ports=ports, job=job: device.run_jobs(
                "adam", [job], ports=ports, arithmetic=False, **ACCELERATOR_PARAMS)[0])
        except SimulationError as failure:
            return f"FAILED: {failure}"
        if result.error:
            return f"FAILED: error register {result.error:#x}"
        reads, writes = result.read_beats / result.cycles, result.write_beats / result.cycles
        lines.append(f"{ports:>8} port(s): {THROUGHPUT_ELEMENTS / result.cycles:5.2f} elements/cycle over "
                     f"the whole run ({THROUGHPUT_ELEMENTS} elements in {result.cycles} cycles), AXI read "
                     f"{reads:.2f} and write {writes:.2f} beats/cycle")
    return "\n   ".join(lines)


def _simulation_step(function):
    """Pool worker: run one step of the main job; returns its outcome and the cocotb tests it executed."""
    from scripts.sim.runner import tests_executed

    before = tests_executed()
    outcome = function()
    return outcome, tests_executed() - before


def run_main_job(args):
    from concurrent.futures import ProcessPoolExecutor

    from boards.references import SMART_INFINITY
    from rtl.registry import blocks, get_block
    from scripts.flow.elaboration import registered_verilog
    from scripts.flow.synth import cached_resources, synthesize

    started = time.monotonic()
    folder = BUILD / "verilog"
    label = ACCELERATOR + "".join(f" {k}={v}" for k, v in ACCELERATOR_PARAMS.items())
    accelerator_folder = folder / "accelerator"
    steps = ((f"smoke: {SMOKE_BLOCK}", _smoke_simulation),
             ("Adam kernel, cocotbext-axi AxiRam memory and AxiLiteMaster host", _bit_exact_update),
             (f"{label}, timing build (identical cycles, see docs/optim.md)", _throughput))
    names = list(blocks())
    # One pool for both steps: the simulations start on whichever core the elaboration frees
    # first, and the accelerator, the longest elaboration, starts first.
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        print(f"== 1. Verilog for every registered block -> {_shown(folder)}/", flush=True)
        elaboration = _submit_elaboration(pool, folder, names,
                                          first=[(ACCELERATOR, accelerator_folder, ACCELERATOR_PARAMS)])
        simulations = [pool.submit(_simulation_step, function) for _, function in steps]
        _wait(elaboration, "   elaborating")
        accelerator_path = elaboration[0].result()  # the first job (see _submit_elaboration)
        print(f"   {len(names)} blocks generated (kept in build/elaboration/ while rtl/ is unchanged)")
        print(f"   default accelerator: {label} -> {_shown(accelerator_path)} "
              f"({time.monotonic() - started:.0f} s)", flush=True)

        print("== 2. Simulations (cocotb on Verilator)")
        outcomes = []
        for (title, _), future in zip(steps, simulations, strict=True):
            outcome, ran = future.result()
            if ran == 0 and not outcome.startswith("FAILED"):
                outcome = "FAILED: no cocotb test executed, so nothing was checked"
            outcomes.append(outcome)
            print(f"   {title}:\n   {outcome} ({ran} cocotb test{'s' * (ran != 1)} executed, "
                  f"{time.monotonic() - started:.0f} s)", flush=True)

    print("== 3. Resources (Yosys synth_xilinx -family xcup)")
    rows = [(name, synthesize(get_block(name).build(), "xcup")) for name in REPORTED_BLOCKS]
    # The synthesis cache is keyed on the Verilog that `neartrain synth` elaborates (module `top`).
    accelerator_top = registered_verilog(ACCELERATOR, get_block(ACCELERATOR).resolve(ACCELERATOR_PARAMS),
                                         lambda: get_block(ACCELERATOR).build(ACCELERATOR_PARAMS))
    accelerator = cached_resources(accelerator_top, "xcup")
    if accelerator is not None:
        rows.append((label, accelerator))
    print(format_resource_table(rows, "xcup"))
    reference = ", ".join(f"{share * total:,.0f} {name}" for name, (share, total) in SMART_INFINITY.items())
    print(f"   Smart-Infinity's HLS Adam updater (Table III, KU15P): {reference}")
    if accelerator is None:
        print(f"   ({label} is not in the synthesis cache; it takes about 45 minutes: "
              f"neartrain synth {ACCELERATOR}"
              f"{''.join(f' --set {k}={v}' for k, v in ACCELERATOR_PARAMS.items())} --target xcup)")
    print(f"== done in {time.monotonic() - started:.0f} s")
    if any(outcome.startswith("FAILED") for outcome in outcomes):
        raise UsageError("simulation failed")


def command_verilog(args):
    writable_folder(args.output)  # refused before 77 elaborations, not after the first
    for name in generate_all(pathlib.Path(args.output)):
        print(f"{args.output}/{name}.v")


def register(commands):
    """Add ``run`` and ``verilog`` to the ``neartrain`` command."""
    run = commands.add_parser("run", help="the main job: generate, simulate, report resources")
    run.set_defaults(handler=run_main_job)
    verilog = commands.add_parser("verilog", help="write Verilog for every registered block")
    verilog.add_argument("-o", "--output", default="build/verilog", metavar="DIR")
    verilog.set_defaults(handler=command_verilog)
