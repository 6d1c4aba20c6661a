"""``neartrain demo train --lr`` with a learning rate whose binary32 step scalars overflow.

``golden.optim.scalars.step_scalars`` accepts any finite ``lr`` >= 0, but the kernel takes its
scalars in binary32: ``lr = 1e300`` made Adam's step size ``-inf`` and the demo ran with it. The
CLI must refuse such a value in one line with exit status 2 (as for any bad argument), and still
take the largest learning rates that fit.
"""

import pytest

from scripts.cli import main
from scripts.demo import train as demo_train


@pytest.mark.parametrize("argv", [
    ["--lr", "1e300"],
    ["--optimizer", "adam", "--lr", "3.5e38"],
    ["--optimizer", "sgd", "--lr", "1e39"],
    ["--optimizer", "adagrad", "--lr", "1e300"],
])
def test_lr_that_overflows_binary32_is_refused(capsys, argv):
    assert main(["demo", "train", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("neartrain: error: lr ") and "too large" in lines[0], lines


@pytest.mark.parametrize("optimizer, lr", [("adamw", 1e30), ("sgd", 3e38), ("adagrad", 1e30)])
def test_large_lr_that_fits_is_taken(optimizer, lr):
    _kernel, hyper, _modes = demo_train.check_arguments(optimizer=optimizer, lr=lr)
    assert hyper["lr"] == lr
