"""``neartrain demo dpt``: arguments, the golden backend and the RTL selection (fast), the RTL runs (slow).

The slow tests run the demo as ``neartrain demo dpt --devices 4`` and ``--devices 2`` do (one
Verilator build of ``tiled_gemm`` per side's array, a couple of minutes each on a first run): the
step must pass every check, with one GEMM of each kind on RTL, bit for bit equal to the golden and
with the block's compute-cycle counter equal to :func:`golden.systolic.gemm_cycles`.
"""

import pytest

from golden.systolic.cnn import KINDS, digits_cnn, golden_gemm, init_weights, synthetic_digits
from golden.systolic.dpt_step import partitioned_step
from scripts.cli.main import main
from scripts.demo import dpt as demo_dpt

NETWORK = digits_cnn()


@pytest.mark.parametrize("options,message", [
    ({"devices": 3}, "devices must be one of 2, 4"),
    ({"partition": 4}, "partition must be an integer in 0..3"),
    ({"partition": -1}, "partition must be an integer in 0..3"),
    ({"backend": "verilog"}, "backend must be one of rtl, golden"),
    ({"seed": -1}, "seed must be an integer >= 0"),
])
def test_bad_arguments_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        demo_dpt.check_arguments(**options)


def test_cli_rejects_bad_devices_without_simulating(capsys):
    assert main(["demo", "dpt", "--devices", "8"]) == 2
    error = capsys.readouterr().err
    assert "devices must be one of 2, 4" in error and len(error.strip().splitlines()) == 1


def test_golden_backend_passes_and_reports_every_phase(capsys):
    assert main(["demo", "dpt", "--devices", "4", "--backend", "golden"]) == 0
    out = capsys.readouterr().out
    assert "partition i = 3 (equation 3 picks 3)" in out
    for phase in demo_dpt.PHASES:
        assert f"\n{phase} " in out
    assert "result: PASS" in out and "no GEMM on RTL" in out


@pytest.mark.parametrize("devices", demo_dpt.DEVICE_CHOICES)
@pytest.mark.parametrize("partition", range(len(NETWORK.layers)))
def test_rtl_selection_has_every_kind_within_the_buffers(devices, partition):
    images, labels = synthetic_digits(8)
    recorded = []

    def hook(call, a, b):
        recorded.append((call, a, b, golden_gemm(call, a, b)))
        return recorded[-1][3]

    partitioned_step(NETWORK, init_weights(NETWORK), images, labels, partition=partition, devices=devices,
                     lr=0.2, hook=hook)
    chosen = demo_dpt.select_rtl(NETWORK, recorded, devices)
    assert [call.kind for call, *_ in chosen] == list(KINDS)
    ssd_kinds = {call.kind for call, *_ in recorded if call.side == "ssd"}
    for call, a, b, _ in chosen:
        assert max(a.shape[0], a.shape[1], b.shape[1]) <= demo_dpt.MAX_BUFFER
        # A smartSSD's GEMM whenever the smartSSDs run one of that kind.
        assert (call.side == "ssd") == (call.kind in ssd_kinds), (call, ssd_kinds)


@pytest.mark.slow
@pytest.mark.parametrize("devices", demo_dpt.DEVICE_CHOICES)
def test_demo_runs_bit_exact_on_rtl(devices):
    result = demo_dpt.run_demo(devices=devices)
    report = demo_dpt.format_report(result)
    assert result.ok, report
    assert sorted(gemm.kind for gemm in result.rtl) == sorted(KINDS), report
    for gemm in result.rtl:
        assert gemm.bit_exact and gemm.compute_cycles == gemm.model_cycles, report
        assert gemm.cycles > gemm.compute_cycles, report  # the fill comes before the compute
