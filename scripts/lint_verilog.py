"""``make lint``: every registered block's Verilog through ``verilator --lint-only -Wall``.

The only waivers are the ones listed, with their reasons, in
:mod:`testbenches.verilator`; every other warning fails the lint.
"""

import pathlib
import subprocess
import sys

from rtl.elaborate import to_verilog
from rtl.registry import blocks
from testbenches.verilator import LINT_FLAGS, environment_with_verilator, verilator_executable

OUTPUT = pathlib.Path(__file__).resolve().parent.parent / "build" / "lint"


def main():
    OUTPUT.mkdir(parents=True, exist_ok=True)
    failures = []
    for name, block in blocks().items():
        path = OUTPUT / f"{name}.v"
        path.write_text(to_verilog(block.build()))
        result = subprocess.run([verilator_executable(), "--lint-only", *LINT_FLAGS, str(path)],
                                capture_output=True, text=True, env=environment_with_verilator())
        status = "ok" if result.returncode == 0 else "FAILED"
        print(f"verilator lint {name:<24} {status}")
        if result.returncode != 0:
            failures.append(name)
            print(result.stderr.strip())
    if failures:
        print(f"verilator lint failed for: {', '.join(failures)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
