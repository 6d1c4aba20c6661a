"""golden.systolic cycle model, its register-level simulators, and the DPT partition sweep."""

import numpy as np
import pytest

from golden.systolic.array_sim import ScheduleHazard, simulate_output_stationary, simulate_weight_stationary
from golden.systolic.cycles import gemm_cycle_terms, gemm_cycles
from golden.systolic.dpt_tables import TABLE3_RESNET50, TABLE3_RESNET50_FIT
from golden.systolic.networks import resnet50
from golden.systolic.numerics import gemm
from golden.systolic.partition import TEST_CASES, SystemModel, baseline_cycles, partition_sweep
from scripts.sim import knobs

OS, WS = "output_stationary", "weight_stationary"


def test_output_stationary_hand_counts():
    # M = 4, K = 3, N = 4 on 2 x 2, L = 1: 2 x 2 = 4 output tiles. PE(r, c) holds beat b at cycle
    # b + r + c, so PE(1, 1) multiplies its last beat (b = 2) at cycle 4; column 0 is final from
    # cycle 3 + 1 + 0 = 4 and column 1 from 5, and column 1 drains its 2 results at cycles 5 and 6:
    # 7 cycles per tile. Serial tiles: 4 x 7 = 28.
    assert gemm_cycles(4, 3, 4, rows=2, cols=2, overlap_drain=False) == 28
    # Wavefront tiles start every max(K = 3, 1 + (rows - 1) = 2) = 3 cycles: 3 x 3 + 7 = 16.
    assert gemm_cycles(4, 3, 4, rows=2, cols=2, overlap_drain=True) == 16
    # tile = 2 slots per PE, acc_latency 2: one 4 x 2 output tile per column pair, beats of 2 cycles,
    # stream 6, compute 6 + 2 + (L - 1 = 1) = 9 with L = 2, drain 2 x 2 = 4: 2 tiles serial = 26.
    assert gemm_cycles(4, 3, 4, rows=2, cols=2, tile=2, mac_latency=2, acc_latency=2,
                       overlap_drain=False) == 26


def test_weight_stationary_hand_counts():
    # M = 5, K = 4, N = 3 on 2 x 2, L = 1: ceil(4/2) x ceil(3/2) = 4 weight tiles. Loading takes 2 cycles;
    # A row 4 reaches PE(1, 1) at 4 + 1 + 1 = 6 and its sum is on port 1 at 4 + 1 + 2 = 7: 8 cycles.
    # Serial: 4 x (2 + 8) = 40.
    assert gemm_cycles(5, 4, 3, rows=2, cols=2, dataflow=WS, overlap_load=False) == 40
    # Overlapped: period = max(5 + 1 + 1 = 7 (last use of the weights), 2 + 1 = 3 (partial sum), 2) = 7;
    # total = 2 + 3 x 7 + 8 = 31.
    assert gemm_cycles(5, 4, 3, rows=2, cols=2, dataflow=WS, overlap_load=True) == 31


def _random_schedule(rng, dataflow):
    shape = dict(M=int(rng.integers(1, 10)), K=int(rng.integers(1, 8)), N=int(rng.integers(1, 8)))
    array = dict(rows=int(rng.integers(1, 4)), cols=int(rng.integers(1, 4)),
                 mac_latency=int(rng.integers(1, 4)), refill_cycles=int(rng.choice([0, 0, 2])))
    if dataflow == OS:
        array.update(tile=int(rng.integers(1, 3)), acc_latency=int(rng.integers(1, array["mac_latency"] + 1)),
                     overlap_drain=bool(rng.integers(0, 2)))
    else:
        array.update(overlap_load=bool(rng.integers(0, 2)))
    return shape, array


@pytest.mark.parametrize("dataflow, element", [(OS, "f16"), (OS, "bf16"), (OS, "int8"), (WS, "f16"),
                                               (WS, "f32"), (WS, "int8")])
def test_register_level_simulation_matches_closed_form_and_numerics(dataflow, element):
    rng = knobs.rng(30)
    simulate = simulate_output_stationary if dataflow == OS else simulate_weight_stationary
    for _ in range(knobs.vectors(25)):
        shape, array = _random_schedule(rng, dataflow)
        m, k, n = shape["M"], shape["K"], shape["N"]
        if element == "int8":
            a = rng.integers(-128, 128, (m, k), dtype=np.int8)
            b = rng.integers(-128, 128, (k, n), dtype=np.int8)
            d = rng.integers(-1000, 1000, (m, n), dtype=np.int32)
        else:
            raw = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32}[element]
            a = rng.standard_normal((m, k)).astype(np.float32).view(np.uint32)
            b = rng.standard_normal((k, n)).astype(np.float32).view(np.uint32)
            if raw is np.uint16:
                a, b = (a >> 16).astype(np.uint16), (b >> 16).astype(np.uint16)
            d = rng.standard_normal((m, n)).astype(np.float32)
        c, cycles = simulate(a, b, d, element=element, **array)
        context = f"{dataflow} {shape} {array} {knobs.describe(25)}"
        assert np.array_equal(c, gemm(a, b, d, element=element)), context
        assert cycles == gemm_cycles(**shape, dataflow=dataflow, **array), context


@pytest.mark.parametrize("dataflow", [OS, WS])
def test_overlapped_period_is_the_shortest_safe_one(dataflow):
    rng = knobs.rng(31)
    simulate = simulate_output_stationary if dataflow == OS else simulate_weight_stationary
    checked = 0
    while checked < knobs.vectors(20):
        shape, array = _random_schedule(rng, dataflow)
        array.update({"refill_cycles": 0, "overlap_drain" if dataflow == OS else "overlap_load": True})
        terms = gemm_cycle_terms(**shape, dataflow=dataflow, **array)
        if terms.tiles < 2:
            continue
        a = rng.integers(-9, 9, (shape["M"], shape["K"]), dtype=np.int8)
        b = rng.integers(-9, 9, (shape["K"], shape["N"]), dtype=np.int8)
        with pytest.raises(ScheduleHazard):
            simulate(a, b, element="int8", period=terms.period - 1, **array)
        checked += 1


def test_cycles_monotonic_and_overlap_never_slower():
    rng = knobs.rng(32)
    for _ in range(knobs.vectors(200)):
        dataflow = rng.choice([OS, WS])
        shape, array = _random_schedule(rng, dataflow)
        base = gemm_cycles(**shape, dataflow=dataflow, **array)
        for name in ("M", "K", "N"):
            grown = dict(shape, **{name: shape[name] + int(rng.integers(1, 50))})
            assert gemm_cycles(**grown, dataflow=dataflow, **array) >= base, f"{name} {knobs.describe(200)}"
        slower = dict(array, mac_latency=array["mac_latency"] + 1, refill_cycles=array["refill_cycles"] + 1)
        assert gemm_cycles(**shape, dataflow=dataflow, **slower) >= base, knobs.describe(200)
        flag = "overlap_drain" if dataflow == OS else "overlap_load"
        serial = gemm_cycles(**shape, dataflow=dataflow, **dict(array, **{flag: False}))
        context = f"{dataflow} {shape} {array} {knobs.describe(200)}"
        assert gemm_cycles(**shape, dataflow=dataflow, **dict(array, **{flag: True})) <= serial, context
        assert 0 < gemm_cycle_terms(**shape, dataflow=dataflow, **array).utilisation <= 1, context


@pytest.mark.parametrize("overlap", [False, True])
def test_utilisation_tends_to_one(overlap):
    # Output stationary: a long reduction hides skew, pipeline and drain. Weight stationary: long M.
    for size in (10**4, 10**6):
        os_terms = gemm_cycle_terms(96, size, 96, rows=96, cols=96, overlap_drain=overlap)
        ws_terms = gemm_cycle_terms(size, 96, 96, rows=96, cols=96, dataflow=WS, overlap_load=overlap)
        assert os_terms.utilisation > 1 - 300 / size and ws_terms.utilisation > 1 - 300 / size
    # Wavefront overlap keeps a many-tile GEMM busy even with a short reduction (K = rows).
    assert gemm_cycle_terms(96 * 64, 96, 96 * 64, rows=96, cols=96).utilisation > 0.99


@pytest.mark.parametrize("kwargs, match", [
    (dict(rows=0, cols=4), "rows must"),
    (dict(rows=4, cols=4, dataflow="row_stationary"), "dataflow must"),
    (dict(rows=4, cols=4, mac_latency=1, acc_latency=2), "acc_latency must be <="),
    (dict(rows=4, cols=4, dataflow=WS, tile=2), "tile and acc_latency"),
    (dict(rows=4, cols=4, overlap_load=True), "overlap_load"),
    (dict(rows=4, cols=4, refill_cycles=-1), "refill_cycles"),
])
def test_cycle_model_rejects_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gemm_cycles(8, 8, 8, **kwargs)


def test_resnet50_layer_list():
    for stride_on_3x3, forward_macs in ((True, 4_089_184_256), (False, 3_857_973_248)):
        network = resnet50(stride_on_3x3=stride_on_3x3)
        assert len(network.layers) == 54
        assert sum(np.prod(e.layer.forward_gemm(1)) for e in network.layers) == forward_macs
        assert sum(e.layer.weights for e in network.layers) == 25_502_912  # weights without BN and biases
    network = resnet50()
    assert network.live_elements(1) == 64 * 56 * 56  # after conv1 and max pooling
    assert network.live_elements(11) == 256 * 56 * 56  # a block boundary: only the block output
    assert network.live_elements(12) == 256 * 56 * 56 + 128 * 56 * 56  # inside: the shortcut too
    assert network.live_elements(53) == 2048  # the pooled features before the classifier


def test_partition_sweep_index_zero_is_the_baseline():
    network = resnet50()
    for ssd_array, npu_array in TEST_CASES.values():
        result = partition_sweep(network, ssd_array=ssd_array, npu_array=npu_array, ssds=4, batch=64)
        assert result.latency[0] == pytest.approx(baseline_cycles(network, npu_array=npu_array, batch=64))
        assert result.latency[result.best_index] == result.latency.min()
        assert result.improvement == pytest.approx(1 - result.latency.min() / result.latency[0])


def test_table3_baseline_structure():
    # DPT's entries lie on one line except B = 128 (30,000,000 above it, read as a typo).
    per_sample, constant = TABLE3_RESNET50_FIT
    off_line = {b for b, cycles in TABLE3_RESNET50.items() if cycles != per_sample * b + constant}
    assert off_line == {128} and TABLE3_RESNET50[128] - (per_sample * 128 + constant) == 30_000_000
    # Our baseline is affine in B too (batch-reduced weight update), within 1.5 % of DPT's line.
    network = resnet50()
    ours = {b: baseline_cycles(network, npu_array=(96, 96), batch=b) for b in TABLE3_RESNET50}
    assert ours[512] - ours[256] == 256 * (ours[64] - ours[32]) / 32
    for batch, cycles in ours.items():
        assert cycles == pytest.approx(per_sample * batch + constant, rel=0.015), batch


def test_table4_partition_indices_reproduced():
    # The cells where the sweep picks DPT's index (docs/systolic.md Part II lists the full table).
    network = resnet50()
    system = SystemModel()
    expected = {(1, 2, 32): 11, (1, 2, 512): 11, (1, 4, 64): 31, (1, 4, 512): 31, (2, 2, 128): 24,
                (2, 2, 512): 24, (3, 4, 128): 11, (3, 4, 512): 11}
    for (case, ssds, batch), index in expected.items():
        ssd_array, npu_array = TEST_CASES[case]
        result = partition_sweep(network, ssd_array=ssd_array, npu_array=npu_array, ssds=ssds, batch=batch,
                                 system=system)
        assert result.best_index == index, (case, ssds, batch)


def test_partition_sweep_rejects_uneven_split():
    with pytest.raises(ValueError, match="ssds must"):
        partition_sweep(resnet50(), ssd_array=(32, 16), npu_array=(48, 48), ssds=3, batch=32)
