"""The updater kernels on the SmartSSD's shared DDR4 model: the runs of ``bench_ddr`` and its slow test.

Runs the 16-lane Adam updater (``adam_updater``, one shared 512-bit port, the DSP-frugal
``dsp_tile=24 lut_bits=7`` build of ``make run``) and the fused Top-K updater (``topk_updater``,
1 % of the gradient kept) on Verilator under cocotb, with one DDR channel behind all their AXI
ports: :class:`scripts.sim.devices.ddr.DdrModel`, reads and writes sharing 64 B/cycle, 7 cycles
per turnaround, runs of at most 64 beats while the other direction waits (its docstring gives
each parameter's source). The builds are timing builds (``arithmetic=False``: same cycles, no
arithmetic; ``bench_optim --check`` shows the cycles equal); ``arithmetic=True`` runs the real
datapath and checks every output bit against the golden models.

Per kernel: two runs of ``n`` and ``2 n`` elements; the steady state is the difference
(``n`` elements over the extra cycles), which removes the fill and drain. The bound is the
DDR's: 64 B/cycle over the bytes per element the DDR model granted in that difference (Adam:
16 read + 14 written = 30 B, so 2.13 elements/cycle; Top-K at 1 %: 12 + 14 B plus the pair
stream). GB/s are at the SmartSSD's 300 MHz kernel clock.
"""

import numpy as np

from scripts.sim.devices.ddr import DDR_DEFAULTS, SMARTSSD_CLOCK

__all__ = ["measure_adam", "measure_topk", "KERNEL", "KERNELS", "TARGET"]

# make run's accelerator: 16 lanes, one shared 512-bit port, 1024-element chunks.
KERNEL = {"lanes": 16, "data_width": 512, "ports": "shared", "chunk_elements": 1024, "dsp_tile": 24,
          "lut_bits": 7}
HYPER = {"step": 3, "lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01, "decoupled": True,
         "grad_scale": 1.0}
RATIO = 0.01
KERNELS = ("adam", "topk", "adam-overlap", "topk-overlap")
TARGET = 0.95  # issue 38: at least 95 % of the DDR bound


def _tensors(n, seed):
    from golden.optim.vectors import f32_tensor

    rng = np.random.default_rng(seed)
    return rng, {"param": f32_tensor(rng, n, specials=0.0),
                 "grad": f32_tensor(rng, n, scale=1e-2, specials=0.0),
                 "exp_avg": f32_tensor(rng, n, scale=1e-3, specials=0.0),
                 "exp_avg_sq": f32_tensor(rng, n, scale=1e-3, positive=True, specials=0.0)}


def _row(kernel, pair, elements, ddr, arithmetic):
    """A result dict from the runs of ``elements`` and ``2 * elements`` (``pair``)."""
    short, full = pair
    extra = full.cycles - short.cycles
    moved = sum(full.ddr[d] - short.ddr[d] for d in ("read", "write"))
    per_element = moved / elements
    bound = ddr["bytes_per_cycle"] / per_element
    steady = elements / extra
    turnarounds = full.ddr["turnarounds"] - short.ddr["turnarounds"]
    return {"kernel": kernel, "elements": 2 * elements, "cycles": full.cycles,
            "whole": 2 * elements / full.cycles, "steady": steady, "bytes_per_element": per_element,
            "bound": bound, "of_bound": steady / bound,
            "ddr_bytes_per_cycle": moved / extra,
            "turnarounds_per_kelement": 1000 * turnarounds / elements,
            "gbps": moved / extra * SMARTSSD_CLOCK / 1e9, "gelements": steady * SMARTSSD_CLOCK / 1e9,
            "arithmetic": arithmetic, "error": full.error | short.error}


def measure_adam(elements=16384, *, ddr=None, rw_phases=True, arithmetic=False, seed=1):
    """The 16-lane Adam updater under the DDR model; a result dict (see :func:`_row`).

    ``rw_phases`` False measures the kernel as it overlaps reads and writes (its default build).
    """
    from golden.optim.host import reference_update
    from scripts.sim.devices import updater as device

    ddr = {**DDR_DEFAULTS, **(ddr or {})}
    _, tensors = _tensors(2 * elements, seed)
    states = ("exp_avg", "exp_avg_sq")
    jobs = [{"kind": "update", "param": tensors["param"][:count], "grad": tensors["grad"][:count],
             "states": {name: tensors[name][:count] for name in states}, "hyper": HYPER, "grad_format": "f32",
             "copy_format": "bf16", "ddr": ddr} for count in (elements, 2 * elements)]
    results = device.run_jobs("adam", jobs, arithmetic=arithmetic, rw_phases=rw_phases, **KERNEL)
    row = _row(f"adam_updater{'' if rw_phases else ' (rw_phases off)'}", results, elements, ddr, arithmetic)
    if arithmetic:
        expected = reference_update("adam", param=tensors["param"], grad=tensors["grad"],
                                    states={name: tensors[name] for name in states}, hyper=HYPER,
                                    copy_format="bf16")
        results[1].assert_outputs_equal(expected, ("param", *states, "param16"), "bench_ddr adam")
    return row


def measure_topk(elements=16384, *, ratio=RATIO, ddr=None, rw_phases=True, arithmetic=False, seed=2):
    """The 16-lane fused Top-K updater at ``ratio`` under the DDR model; a result dict."""
    from golden.compress import encode_stream, group_by_chunk, topk_compress
    from scripts.sim.devices import topk

    ddr = {**DDR_DEFAULTS, **(ddr or {})}
    rng, tensors = _tensors(2 * elements, seed)
    chunk = KERNEL["chunk_elements"]
    jobs = []
    for count in (elements, 2 * elements):
        grad = tensors["grad"][:count].view(np.float32)
        indices, values = topk_compress(grad, ratio=ratio, block=chunk, value_format="f32")
        indices, values, counts = group_by_chunk(indices, values, size=count, chunk_size=chunk,
                                                 sort_within_chunk=True)
        words = encode_stream(indices, values, value_format="f32", counts=counts)
        jobs.append({"param": tensors["param"][:count], "words": words,
                     "states": {name: tensors[name][:count] for name in ("exp_avg", "exp_avg_sq")},
                     "hyper": HYPER, "copy_format": "bf16", "ddr": ddr})
    params = {key: value for key, value in KERNEL.items() if key not in ("dsp_tile", "lut_bits")}
    results = topk.run_steps(jobs, optimizer="adam", arithmetic=arithmetic, value_format="f32",
                             rw_phases=rw_phases, **params)
    if arithmetic:
        from golden.compress import scatter_stream
        from golden.optim.host import reference_update

        job = jobs[1]
        grad = scatter_stream(job["words"], size=2 * elements, chunk_size=chunk, value_format="f32")[0]
        expected = reference_update("adam", param=job["param"], grad=grad, states=job["states"], hyper=HYPER,
                                    copy_format="bf16")
        results[1].assert_outputs_equal(expected, ("param", "exp_avg", "exp_avg_sq", "param16"),
                                        "bench_ddr topk")
    label = f"topk_updater ({ratio:.0%}{'' if rw_phases else ', rw_phases off'})"
    return _row(label, results, elements, ddr, arithmetic)
