"""One CLI convention: every ``neartrain`` subcommand refuses a bad input with one line on stderr
and exit status 2, before it starts any long work, and never with a traceback.

(Exit 1, a failing result, is checked where a result can fail: ``docs --check`` in test_docs.py,
``prove`` in formal/test_cli.py, ``bitstream`` in boards/.)
"""

import argparse

import pytest

from scripts.cli.main import build_parser, main


def _bad_inputs(tmp_path):
    """A bad input for each subcommand (``demo`` for each demo); ``not_a_folder`` is a file."""
    not_a_folder = tmp_path / "a_file"
    not_a_folder.write_text("")
    return {
        "list": ["list", "unexpected_argument"],
        "generate": ["generate", "skid_buffer", "--set", "width=0", "-o", str(tmp_path / "out")],
        "synth": ["synth", "skid_buffer", "--target", "ecp5", "--set", "width=abc"],
        "demo train": ["demo", "train", "--steps", "0"],
        "demo gcn": ["demo", "gcn", "--lanes", "3"],
        "demo cluster": ["demo", "cluster", "--nodes", "3"],
        "demo smartssd": ["demo", "smartssd", "--devices", "0"],
        "demo dpt": ["demo", "dpt", "--devices", "3"],
        "demo allreduce": ["demo", "allreduce", "--leaves", "9"],
        "run": ["run", "--unknown-option"],
        "verilog": ["verilog", "-o", str(not_a_folder / "sub")],
        "boards": ["boards", "--unknown-option"],
        "sweep": ["sweep", "skid_buffer", "--vary", "width=abc", "--target", "ecp5"],
        "bitstream": ["bitstream", "skid_buffer", "--freq", "-5"],
        "results": ["results", "--cache-only", "-o", str(not_a_folder / "results.md")],
        "vitis": ["vitis", "skid_buffer", "-o", str(tmp_path / "vitis")],
        "board-demo": ["board-demo"],
        "docs": ["docs", "--unknown-option"],
        "prove": ["prove", "--list", "no_such_block"],
    }


def _subcommands():
    """Every subcommand the parser knows, with ``demo``'s demos spelled ``demo <name>``."""
    names = []
    top = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    for name, parser in top.choices.items():
        inner = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
        names += [f"{name} {sub}" for sub in inner[0].choices] if inner else [name]
    return names


def test_every_subcommand_has_a_bad_input_case(tmp_path):
    assert sorted(_bad_inputs(tmp_path)) == sorted(_subcommands())


@pytest.mark.parametrize("command", _subcommands())
def test_a_bad_input_is_one_line_and_exit_2(tmp_path, capsys, command):
    argv = _bad_inputs(tmp_path)[command]
    assert main(argv) == 2, argv
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("neartrain: error:"), captured.err
    assert "Traceback" not in captured.err + captured.out


def test_demo_json_is_the_result_with_large_arrays_summarised(capsys):
    """``neartrain demo ... --json``: the banner goes to stderr, the result (a dataclass) to stdout
    as JSON; an array of more than 64 elements is given by shape, dtype and SHA-256."""
    import dataclasses
    import hashlib
    import json
    import types

    import numpy as np

    from scripts.cli.demo import _run_demo

    @dataclasses.dataclass
    class Result:
        ok: bool
        small: np.ndarray
        large: np.ndarray

    large = np.arange(100, dtype=np.float32)
    module = types.SimpleNamespace(check_arguments=lambda **_: None, format_report=lambda _: "report",
                                   run_demo=lambda **_: Result(True, np.arange(3), large))
    assert _run_demo(module, {}, "banner", lambda result: result.ok, as_json=True) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert captured.err.strip() == "banner" and report["passed"] is True and report["small"] == [0, 1, 2]
    assert report["large"] == {"shape": [100], "dtype": "float32",
                               "sha256": hashlib.sha256(large.tobytes()).hexdigest()}


def test_progress_off_a_terminal_is_one_line_with_the_time_at_the_end():
    import io

    from scripts.cli.progress import elapsed

    log = io.StringIO()
    with elapsed("synth x (ecp5, Yosys)", stream=log) as step:
        assert log.getvalue() == ""  # a bad input found inside stays the command's one line
        step("synth x: mapping")
    lines = log.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neartrain: synth x: mapping: ")
    assert lines[0].endswith(" s")
