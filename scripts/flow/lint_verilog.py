"""``make lint``: every registered block's Verilog through ``verilator --lint-only -Wall``.

The only waivers are the ones listed, with their reasons, in
:mod:`scripts.sim.verilator`; every other warning fails the lint.

A block whose Verilog (and lint flags) hash the same as at its last clean lint is not linted
again: ``build/lint/<block>.ok`` holds that hash. Blocks are elaborated (through the cache of
:mod:`scripts.flow.elaboration`, which ``make run`` and the tests share) and linted in parallel
processes, one per core.
"""

import hashlib
import os
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

from rtl.registry import blocks, get_block
from scripts.flow.cache import BUILD
from scripts.flow.elaboration import registered_verilog
from scripts.sim.verilator import LINT_FLAGS, environment_with_verilator, verilator_executable

OUTPUT = BUILD / "lint"
# The blocks whose elaboration takes longest (largest Verilog, 2026-11-28), started first so that
# neither process is left with a long one at the end: a scheduling hint only. Where a previous
# lint left its Verilog, the blocks go by that size instead.
_LARGEST = ("ring_cluster", "tiered_cluster", "runtime_cluster", "embedding_bag_update", "topk_updater",
            "sliced_gcu_cluster", "topk_fused_updater_core", "runtime_node_kernels", "topk_axi_decompressor",
            "topk_chunk_decompressor", "sparse_tensor_array", "topk_scatter", "tensor_array", "embedding_bag",
            "gcu_cluster", "region_unit")


def _order(names):
    """``names``, the slowest to elaborate first: by the last lint's Verilog sizes when every block
    has one, else by :data:`_LARGEST` (sizes and hint ranks are not comparable, so one or the other)."""
    paths = {name: OUTPUT / f"{name}.v" for name in names}
    if all(path.exists() for path in paths.values()):
        return sorted(names, key=lambda name: -paths[name].stat().st_size)
    rank = {name: index for index, name in enumerate(_LARGEST)}
    return sorted(names, key=lambda name: rank.get(name, len(_LARGEST)))


def _lint(name):
    """Lint one block's Verilog unless its clean lint is on record; returns (status, messages)."""
    block = get_block(name)
    verilog = registered_verilog(name, block.resolve(), block.build)
    path, stamp = OUTPUT / f"{name}.v", OUTPUT / f"{name}.ok"
    digest = hashlib.sha256((verilog + " ".join(LINT_FLAGS)).encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest and path.exists() and path.read_text() == verilog:
        return "ok (unchanged)", ""
    stamp.unlink(missing_ok=True)
    path.write_text(verilog)
    result = subprocess.run([verilator_executable(), "--lint-only", *LINT_FLAGS, str(path)],
                            capture_output=True, text=True, env=environment_with_verilator())
    if result.returncode != 0:
        return "FAILED", result.stderr.strip()
    stamp.write_text(digest)
    return "ok", ""


def main():
    OUTPUT.mkdir(parents=True, exist_ok=True)
    failures = []
    # Elaboration is single-threaded Python, so each block gets a process.
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        pending = {name: pool.submit(_lint, name) for name in _order(list(blocks()))}
        # Reported in registry order, whatever order they ran in.
        for name in blocks():
            future = pending[name]
            status, messages = future.result()
            print(f"verilator lint {name:<24} {status}", flush=True)
            if messages:
                failures.append(name)
                print(messages)
    if failures:
        print(f"verilator lint failed for: {', '.join(failures)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
