"""Runners of the UART board demo: the host script against the simulated board, and the protocol."""

import pytest

from rtl.board.adam_demo import AdamBoardDemo
from scripts.cli import main
from scripts.sim.runner import run_cocotb

MODULE = "testbenches.boards.cocotb_board_demo"


def _params(lanes, depth, arithmetic, divisor=8):
    return {"lanes": lanes, "depth": depth, "divisor": divisor, "arithmetic": arithmetic}


def test_board_demo_host_script_passes_against_golden():
    """``neartrain board-demo`` over the simulated UART: one Adam step, bit-exact with golden.optim."""
    run_cocotb(AdamBoardDemo, MODULE, params=_params(1, 64, True, divisor=4), testcase="host_script",
               extra_env={"BOARD_DEMO_ELEMENTS": "12"})


def test_board_demo_host_script_notices_wrong_results():
    """With the arithmetic left out the results are zero: the script must fail and say where."""
    run_cocotb(AdamBoardDemo, MODULE, params=_params(2, 32, False), testcase="host_script",
               extra_env={"BOARD_DEMO_EXPECT": "FAIL", "BOARD_DEMO_ELEMENTS": "8"})


@pytest.mark.parametrize("lanes,depth", [(2, 32), (4, 256)])
def test_board_demo_protocol(lanes, depth):
    run_cocotb(AdamBoardDemo, MODULE, params=_params(lanes, depth, False), testcase="protocol")


@pytest.mark.slow
def test_board_demo_two_lanes_long():
    """Two lanes, a full 128-element shard, at step 1000 (the model runs at about 1k cycles/s)."""
    run_cocotb(AdamBoardDemo, MODULE, params=_params(2, 128, True, divisor=4), testcase="host_script",
               extra_env={"BOARD_DEMO_ELEMENTS": "128", "BOARD_DEMO_STEP": "1000",
                          "BOARD_DEMO_WALL_SECONDS": "3600"})


@pytest.mark.parametrize("argv,message", [
    ([], "either --port"),
    (["--port", "socket://127.0.0.1:1", "--build", "x"], "either --port"),
    (["--port", "socket://nowhere"], "socket://HOST:PORT"),
    (["--build", "{tmp}", "--lanes", "3"], "lanes must be one of 1, 2, 4"),
    (["--build", "{tmp}", "--board", "smartssd"], "no open-toolchain flow"),
    (["--build", "{tmp}", "--board", "nope"], "nope"),
])
def test_board_demo_bad_input_is_one_line(argv, message, tmp_path, capsys):
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    assert main(["board-demo", *argv]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and message in error, error


def test_board_demo_serial_needs_pyserial(capsys):
    """Without pyserial a serial port is a one-line error (with it, the port does not exist here)."""
    assert main(["board-demo", "--port", "/dev/nonexistent-neartrain-tty"]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1
    assert "pyserial is not installed" in error or "cannot open" in error
