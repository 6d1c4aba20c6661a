"""pytest runners: the fused Top-K updater kernel ``topk_updater`` in cocotb on Verilator.

The fast suite runs a 2-lane Adam kernel on a 128-bit bus with 32-element chunks and f16 pair
values; ``-m slow`` adds a 4-lane SGD kernel with separate ports, a 256-bit bus and f32 values,
and the traffic measurement: one Adam step on 16384 elements at 0.1 %, 1 % and 10 % on the
512-bit kernel, against the dense ``adam_updater`` of the same configuration.
"""

import gc

import numpy as np
import pytest

from scripts.sim import knobs
from scripts.sim.runner import run_cocotb

MODULE = "testbenches.compress.cocotb_topk_updater"
FAST = {"optimizer": "adam", "lanes": 2, "data_width": 128, "ports": "shared", "chunk_elements": 32,
        "value_format": "f16", "max_burst": 4, "max_outstanding": 2}
CASES = [
    FAST,
    pytest.param({"optimizer": "sgd", "lanes": 4, "data_width": 256, "ports": "separate",
                  "chunk_elements": 64, "value_format": "f32", "max_burst": 8, "max_outstanding": 3},
                 marks=pytest.mark.slow),
]
# The paper's 512-bit bundle, one lane (traffic does not depend on the lanes), 1024-element chunks.
TRAFFIC = {"lanes": 1, "data_width": 512, "chunk_elements": 1024}


def _id(params):
    return "{optimizer}-L{lanes}-W{data_width}-{ports}-S{chunk_elements}-{value_format}".format(**params)


@pytest.mark.parametrize("params", CASES, ids=_id)
@pytest.mark.parametrize("testcase", ["steps_match_golden", "statistics_of_the_decompressed_gradient",
                                      "bus_errors_end_cleanly"])
def test_topk_updater(params, testcase):
    run_cocotb("topk_updater", MODULE, params=params, testcase=testcase)


@pytest.mark.parametrize("params", CASES, ids=_id)
def test_topk_updater_reset(params):
    """Reset in the middle of update and statistics steps, with bursts open (``reset_mid_run``)."""
    run_cocotb("topk_updater", MODULE, params=params, testcase="reset_mid_run")


def measure_traffic():
    """Measured bytes per parameter of one Adam step, fused against dense; returns the table rows."""
    from golden.optim.host import STATE_NAMES
    from golden.optim.vectors import f32_tensor, gradient_tensor, random_hyper
    from scripts.sim import updater_device as device

    fused = run_cocotb("topk_updater", MODULE, params={"optimizer": "adam", **TRAFFIC}, testcase="traffic",
                       job=(0.001, 0.01, 0.1)).reply
    rng = knobs.rng(92)
    n = fused[0]["n"]
    jobs = []
    for grad_format in ("f32", "f16"):
        jobs.append({"kind": "update", "param": f32_tensor(rng, n),
                     "grad": gradient_tensor(rng, n, grad_format),
                     "states": {name: f32_tensor(rng, n, scale=1e-3, positive=name != "exp_avg")
                                for name in STATE_NAMES["adam"]},
                     "hyper": random_hyper(rng, "adam", 0), "grad_format": grad_format, "copy_format": "f16"})
    dense = device.run_jobs("adam", jobs, **TRAFFIC)
    beat = TRAFFIC["data_width"] // 8
    rows = []
    for job, result in zip(jobs, dense, strict=True):
        grad_beats = -(-n * (4 if job["grad_format"] == "f32" else 2) // beat)
        rows.append({"kernel": f"adam_updater (dense, {job['grad_format']} gradient)", "ratio": None, "n": n,
                     "read_bytes": result.read_beats * beat, "write_bytes": result.write_beats * beat,
                     "gradient_bytes": grad_beats * beat, "cycles": result.cycles})
    for run in fused:
        reads, writes = run["traffic"]["read"], run["traffic"]["write"]
        rows.append({"kernel": "topk_updater (fused)", "ratio": run["ratio"], "n": n,
                     "read_bytes": run["read_beats"] * beat, "write_bytes": run["write_beats"] * beat,
                     "gradient_bytes": (reads.get("stray", 0) + writes.get("stray", 0)) * beat,
                     "pair_bytes": reads.get("pairs", 0) * beat, "words": run["words"],
                     "cycles": run["cycles"]})
    return rows


@pytest.mark.slow
def test_traffic_against_dense():
    """Fused: 0 dense-gradient bytes; param/state/copy bytes exactly the dense kernel's."""
    rows = measure_traffic()
    dense, fused = rows[0], rows[2:]
    state_read = dense["read_bytes"] - dense["gradient_bytes"]
    for row in fused:
        assert row["gradient_bytes"] == 0, row
        assert row["read_bytes"] - row["pair_bytes"] == state_read, (row, dense)
        assert row["write_bytes"] == dense["write_bytes"], (row, dense)
    for row in rows:
        print(row["kernel"], row["ratio"], {k: (round(v / row["n"], 4) if k.endswith("bytes") else v)
                                            for k, v in row.items() if k not in ("kernel", "ratio")})


@pytest.mark.filterwarnings("ignore::amaranth.hdl._ir.UnusedElaboratable")
def test_parameters_are_validated():
    from rtl.compress.topk_updater_kernel import TopKUpdaterKernel

    with pytest.raises(ValueError, match="lanes"):
        TopKUpdaterKernel(lanes=32)
    with pytest.raises(ValueError, match="chunk_elements"):
        TopKUpdaterKernel(data_width=512, chunk_elements=16)  # 16 banks need chunks of 32
    with pytest.raises(ValueError, match="chunk_elements must be a power of two"):
        TopKUpdaterKernel(data_width=64, chunk_elements=48)
    with pytest.raises(ValueError, match="value_format"):
        TopKUpdaterKernel(value_format="bf16")
    with pytest.raises(ValueError, match="data_width"):
        TopKUpdaterKernel(data_width=96)
    gc.collect()


def test_register_map_extends_the_dense_kernel():
    """Every dense register but the gradient's, in the same order, plus the pair stream's."""
    from rtl.compress.topk_updater_kernel import TopKUpdaterKernel
    from rtl.optim.updater_kernel import UpdaterKernel

    kernels = [UpdaterKernel(optimizer="sgd", data_width=64, chunk_elements=16),
               TopKUpdaterKernel(optimizer="sgd", data_width=64, chunk_elements=16)]
    for kernel in kernels:
        kernel._MustUse__silence = True
    dense, fused = ([entry["name"] for entry in k.register_map()] for k in kernels)
    kept = [name for name in dense if name not in ("grad_address", "grad_format")]
    assert [name for name in fused if name in dense] == kept
    extra = {"pairs_address", "pairs_words", "sorted", "pairs_status", "out_of_range", "chunk_violation",
             "unsorted", "excess_pairs", "missing"}
    assert set(fused) - set(dense) == extra
    assert np.all([entry["width"] == 40 for entry in kernels[1].register_map() if entry["name"] == "missing"])
    assert "m_axi_pairs" in kernels[1].signature.members and "m_axi_grad" not in kernels[1].signature.members
