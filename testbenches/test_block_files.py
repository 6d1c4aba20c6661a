"""`neartrain list` names each block's rtl file and its tests; every registered block has both."""

import json
import pathlib

from rtl.registry import blocks
from scripts.cli.blocks import block_files
from scripts.cli.main import main

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_registered_block_has_an_rtl_file_and_a_test():
    files = block_files(blocks())
    untested = [name for name, (_, tests) in files.items() if not tests]
    assert not untested, f"registered blocks no test file names: {untested}"
    for name, (rtl, tests) in files.items():
        assert rtl.startswith("rtl/") and (ROOT / rtl).is_file(), (name, rtl)
        assert all((ROOT / path).is_file() for path in tests), (name, tests)


def test_list_prints_the_files(capsys):
    assert main(["list", "--json"]) in (0, None)
    listed = json.loads(capsys.readouterr().out)
    assert listed["skid_buffer"]["rtl"] == "rtl/bus/skid_buffer.py"
    assert "testbenches/bus/test_skid_buffer.py" in listed["skid_buffer"]["tests"]


# Blocks whose tests share one file with another block's, and why.
TESTED_TOGETHER = {
    # The loopback top wires the transmitter into the receiver; every test checks both ends.
    "uart_rx": "testbenches/bus/test_uart.py",
    "uart_tx": "testbenches/bus/test_uart.py",
    # The cluster is the global control unit's testbench: the leaves are cocotb models on its ports.
    "gcu_cluster": "testbenches/collective/test_gcu.py",
    # The regional units are tested between their region switches and the root, in the two-level cluster.
    "region_unit": "testbenches/collective/test_tiered.py",
    "tiered_cluster": "testbenches/collective/test_tiered.py",
    # The ring nodes are tested on their cluster's switch, which is the ring's only topology.
    "ring_node": "testbenches/collective/test_ring.py",
    "ring_cluster": "testbenches/collective/test_ring.py",
}


def test_each_block_is_tested_one_hop_from_its_rtl_module():
    """rtl/<family>/<module>.py is tested in testbenches/<family>/test_<module>.py, which names the
    block (the file holds its cocotb bodies or imports them by name, and its pytest runners)."""
    far = []
    for name, (rtl, tests) in block_files(blocks()).items():
        family, module = pathlib.PurePosixPath(rtl).parts[1], pathlib.PurePosixPath(rtl).stem
        expected = TESTED_TOGETHER.get(name, f"testbenches/{family}/test_{module}.py")
        if expected not in tests:
            far.append(f"{name}: {expected}")
    assert not far, f"blocks whose tests are not one hop from the rtl module: {far}"
