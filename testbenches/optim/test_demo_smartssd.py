"""``neartrain demo smartssd``: a torch MLP trained with AdamW on N simulated SmartSSDs.

Fast (golden backend): dense on 3 devices follows ``torch.optim.AdamW``'s loss curve; Top-K 5 % with
error feedback on 4 devices trains, sends compressed pairs and prints every step's verdict and bytes;
the CLI runs it. Slow: the rtl backend, every device step bit-exact with the golden models.
"""

import numpy as np
import pytest

from scripts.cli import main
from scripts.demo import smartssd as demo
from scripts.sim import knobs

TORCH = "torch trains the demo's model"


def test_dense_golden_follows_adamw():
    knobs.oracle("torch", TORCH)
    result = demo.run_demo(devices=3, backend="golden", steps=5)
    # Same gradients up to the few-ulp parameter differences of the square root (smartssd_torch.torch_bound).
    assert np.allclose(result.loss, result.loss_adamw, rtol=1e-5, atol=0), (result.loss, result.loss_adamw)
    assert result.loss[-1] < result.loss[0]
    assert all(sum(r.sent) == result.size for r in result.reports)
    assert result.bit_exact and all(r.bit_exact is None for r in result.reports)


def test_topk_golden_report():
    knobs.oracle("torch", TORCH)
    result = demo.run_demo(devices=4, topk=0.05, backend="golden", steps=4)
    assert result.loss[-1] < result.loss[0], result.loss
    for report in result.reports:
        assert len(report.links["host_to_device"]) == 4
        # Pairs (8-byte words with chunk headers) are far fewer bytes than the dense gradient.
        assert sum(report.links["host_to_device"]) < 4 * result.size / 4
        assert sum(report.links["device_to_host"]) == 4 * result.size
    text = demo.format_report(result)
    assert sum(line.endswith("  golden") for line in text.splitlines()) == 4  # one verdict per step
    assert text.splitlines()[-1].startswith("PASS")
    assert f"final  {result.loss[-1]:>9.6f}" in text


def test_cli_runs_the_demo(capsys):
    knobs.oracle("torch", TORCH)
    argv = ["demo", "smartssd", "--devices", "2", "--topk", "0.1", "--backend", "golden", "--steps", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "device 1: bytes over 2 steps" in out


@pytest.mark.parametrize("arguments, word", [({"devices": 0}, "devices"), ({"topk": 1.5}, "top-k"),
                                             ({"backend": "fpga"}, "backend"), ({"steps": 0}, "steps"),
                                             ({"seed": -1}, "seed")])
def test_bad_arguments(arguments, word):
    with pytest.raises(ValueError, match=word):
        demo.check_arguments(**arguments)


@pytest.mark.slow
@pytest.mark.parametrize("devices, topk", [(4, 0.01), (2, None)], ids=["topk_updater", "adam_updater"])
def test_rtl_backend_is_bit_exact(devices, topk):
    knobs.oracle("torch", TORCH)
    result = demo.run_demo(devices=devices, topk=topk, backend="rtl", steps=knobs.vectors(2, limit=20))
    assert all(len(r.bit_exact) == devices and all(r.bit_exact) for r in result.reports), \
        [r.bit_exact for r in result.reports]
    # The dense kernel reads the whole gradient shard, the fused one only the pairs.
    assert all(min(r.cycles) > 0 and min(r.links["fpga_dram"]) >= r.links["ssd_to_fpga"][-1]
               for r in result.reports)
    assert result.loss[-1] < result.loss[0]
