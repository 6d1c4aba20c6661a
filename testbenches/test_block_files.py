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
