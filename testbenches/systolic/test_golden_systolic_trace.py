"""golden.systolic.trace_model (DPT-sim's 4 KB blocks and DRAM bus beats) and the Faster R-CNN layer list."""

import numpy as np
import pytest

from golden.systolic.conv import ConvLayer
from golden.systolic.cycles import gemm_cycles
from golden.systolic.dpt_tables import (
    TABLE3_FASTER_RCNN,
    TABLE3_FASTER_RCNN_FIT,
    TABLE4_FASTER_RCNN,
    TABLE4_RESNET50,
)
from golden.systolic.networks import Network, NetworkLayer, resnet50
from golden.systolic.networks_detection import faster_rcnn
from golden.systolic.partition import TEST_CASES, partition_sweep
from golden.systolic.trace_model import TraceSystem, forward_trace, layer_passes, trace_sweep


def test_block_cycles_round_each_tensor_to_whole_4kb_blocks():
    system = TraceSystem()  # 200 MHz and a 4 GB/s path: 20 bytes per cycle, 204.8 cycles per block
    assert system.block_cycles([1], 4e9) == pytest.approx(204.8)
    assert system.block_cycles([4096], 4e9) == pytest.approx(204.8)
    assert system.block_cycles([4097], 4e9) == pytest.approx(409.6)
    assert system.block_cycles([8192], 4e9) == pytest.approx(409.6)
    # Two tensors are two runs of blocks: 4096 + 1 bytes take two blocks, as one tensor of 4097 does,
    # but 2 + 2 bytes take two blocks where one tensor of 4 bytes takes one.
    assert system.block_cycles([4096, 1], 4e9) == pytest.approx(409.6)
    assert system.block_cycles([2, 2], 4e9) == pytest.approx(409.6)
    assert system.block_cycles([4], 4e9) == pytest.approx(204.8)
    assert system.block_cycles([0], 4e9) == 0
    assert system.block_cycles([4096], 8e9) == pytest.approx(102.4)


def test_dram_cycles_round_each_tensor_to_whole_bus_beats():
    system = TraceSystem()  # 19.2 GB/s in 8-byte beats at 200 MHz: 96 bytes, 12 beats per cycle
    assert system.dram_cycles([1], "ssd") == pytest.approx(1 / 12)
    assert system.dram_cycles([8], "ssd") == pytest.approx(1 / 12)
    assert system.dram_cycles([9], "ssd") == pytest.approx(2 / 12)
    assert system.dram_cycles([96], "ssd") == pytest.approx(1)
    assert system.dram_cycles([97], "ssd") == pytest.approx(13 / 12)
    assert system.dram_cycles([1, 1, 1], "ssd") == pytest.approx(3 / 12)
    # NPU: 76.8 GB/s in 32-byte beats, also 12 beats per cycle; 96 bytes are 3 beats.
    assert system.dram_cycles([96], "npu") == pytest.approx(3 / 12)
    assert system.dram_cycles([1], "npu") == pytest.approx(1 / 12)
    # DDR4-2400 on both sides, the smartSSD 4x lower (Section 3.1).
    for device in ("npu", "ssd"):
        bus_bytes, bytes_per_s = system.dram(device)
        assert bytes_per_s / bus_bytes == pytest.approx(2.4e9)


def _one_layer(layer):
    return Network("one", "x", (NetworkLayer(layer, ("x",), "y"),),
                   {"x": layer.in_channels * layer.height * layer.width,
                    "y": layer.out_channels * layer.out_height * layer.out_width})


def test_layer_passes_take_the_slower_of_gemm_and_dram():
    fc = ConvLayer("fc", 16, 1, 1, 8, 1)  # forward GEMM (1, 16, 8): x 32 B, weights 256 B, y 16 B
    network = _one_layer(fc)
    compute = gemm_cycles(1, 16, 8, rows=4, cols=4, overlap_drain=True)
    assert compute == 42  # 2 tiles every 16 cycles, compute 16 + 6, drain 4: 16 + 22 + 4
    fast = layer_passes(network, (4, 4), "ssd", TraceSystem())
    assert fast["fp"][0] == compute and fast["dram_bound"] == 0
    assert fast["bp"][0] == 0  # the first layer computes no input gradient
    # One 1-byte beat per cycle: forward moves 32 + 256 + 16 = 304 beats, more than the GEMM's 42 cycles.
    slow = layer_passes(network, (4, 4), "ssd", TraceSystem(ssd_bus_bytes=1, ssd_dram_bytes_per_s=200e6))
    assert slow["fp"][0] == 304 and slow["wu"][0] == 304 and slow["dram_bound"] == 2


def test_forward_trace_hand_case():
    # 4 samples on 2 smartSSDs: NAND read 1, smartSSD layers 10, link 2, NPU 3 cycles per sample.
    # Samples 0 and 1 reach the NPU at 13 (done 16, 19); samples 2 and 3 are computed 11..21, sent
    # by 23, and the NPU finishes them at 26 and 29.
    assert forward_trace(batch=4, ssds=2, ssd_cycles=10, read_cycles=1, link_cycles=2, npu_cycles=3) == 29
    # NPU-bound: the pipeline fills once (1 + 10 + 1) and then the NPU never waits.
    assert forward_trace(batch=100, ssds=4, ssd_cycles=10, read_cycles=1, link_cycles=1,
                         npu_cycles=5) == 12 + 500
    # smartSSD-bound: 2 devices x 5 samples of 10 cycles; the last two samples both arrive at
    # 1 + 50 + 1 = 52 and the NPU takes them one after the other.
    assert forward_trace(batch=10, ssds=2, ssd_cycles=10, read_cycles=1, link_cycles=1,
                         npu_cycles=1) == 54
    assert forward_trace(batch=7, ssds=0, ssd_cycles=99, read_cycles=99, link_cycles=99, npu_cycles=3) == 21


def test_trace_baseline_is_the_npu_alone():
    network = resnet50()
    system = TraceSystem()
    npu = layer_passes(network, (96, 96), "npu", system)
    for batch in (32, 64):
        result = trace_sweep(network, ssd_array=(64, 32), npu_array=(96, 96), ssds=2, batch=batch)
        expected = batch * (npu["fp"].sum() + npu["bp"].sum()) + npu["wu"].sum()
        assert result.latency[0] == pytest.approx(expected)
        assert all(result.terms[name][0] == 0 for name in ("pcie_gradients", "wu_ssd", "inter_ssd"))
        assert result.improvement == pytest.approx(1 - result.latency.min() / result.latency[0])


def test_trace_latency_monotonic():
    network = resnet50()
    ssd_array, npu_array = TEST_CASES[1]
    latencies = [trace_sweep(network, ssd_array=ssd_array, npu_array=npu_array, ssds=4, batch=batch).latency
                 for batch in (32, 64, 128)]
    assert np.all(np.diff(latencies, axis=0) > 0)  # more samples, more cycles at every index
    base = trace_sweep(network, ssd_array=ssd_array, npu_array=npu_array, ssds=4, batch=64)
    slow = trace_sweep(network, ssd_array=ssd_array, npu_array=npu_array, ssds=4, batch=64,
                       system=TraceSystem(pcie_link_bytes_per_s=1e9, nand_bytes_per_s=1e9))
    assert slow.latency[0] == base.latency[0]  # the baseline uses no link
    assert np.all(slow.latency[1:] > base.latency[1:])
    bigger = trace_sweep(network, ssd_array=(64, 32), npu_array=npu_array, ssds=4, batch=64)
    assert np.all(bigger.latency[1:] <= base.latency[1:])  # a larger smartSSD array never hurts
    assert np.all(np.diff(base.terms["inter_ssd"]) >= 0)  # more smartSSD layers, more weights to reduce
    two = trace_sweep(network, ssd_array=ssd_array, npu_array=npu_array, ssds=2, batch=64)
    assert base.improvement > two.improvement


def test_trace_sweep_rejects_uneven_split():
    with pytest.raises(ValueError, match="dividing"):
        trace_sweep(resnet50(), ssd_array=(32, 16), npu_array=(48, 48), ssds=3, batch=32)


def test_faster_rcnn_layer_list():
    network, trunk = faster_rcnn(), resnet50()
    assert len(network.layers) == 46  # DPT Section 4.1
    assert network.layers[:43] == trunk.layers[:43]
    assert [entry.layer.name for entry in network.layers[42:]] == ["conv4_6c", "rpn_conv", "rpn_cls",
                                                                   "rpn_bbox"]
    # 14 x 14 x 1024 C4 features, a 3 x 3 conv to 512, 2 x 9 scores and 4 x 9 offsets per position.
    assert tuple(network.layers[43].layer.forward_gemm(1)) == (196, 9 * 1024, 512)
    assert tuple(network.layers[44].layer.forward_gemm(1)) == (196, 512, 18)
    assert tuple(network.layers[45].layer.forward_gemm(1)) == (196, 512, 36)
    assert network.live_elements(44) == 512 * 196  # only the RPN feature crosses after rpn_conv
    assert network.live_elements(43) == 1024 * 196


def test_faster_rcnn_tables():
    per_sample, constant = TABLE3_FASTER_RCNN_FIT
    assert all(cycles == per_sample * batch + constant for batch, cycles in TABLE3_FASTER_RCNN.items())
    assert set(TABLE4_FASTER_RCNN) == set(TABLE4_RESNET50)
    assert all(index < 46 for _, index in TABLE4_FASTER_RCNN.values())


@pytest.mark.parametrize("name, make, paper, analytic, traced", [
    ("ResNet-50", resnet50, TABLE4_RESNET50, 15, 15),
    ("Faster R-CNN", faster_rcnn, TABLE4_FASTER_RCNN, 11, 11),
])
def test_table4_index_matches_as_measured(name, make, paper, analytic, traced):
    # The counts docs/systolic.md reports (issue 42 asks for 24 of 30 ResNet-50 indices; neither
    # model reaches it). A change to either model that moves a count shows here.
    network = make()
    counts = {"analytic": 0, "trace": 0}
    for (case, ssds, batch), (_, index) in paper.items():
        ssd_array, npu_array = TEST_CASES[case]
        for model, sweep in (("analytic", partition_sweep), ("trace", trace_sweep)):
            result = sweep(network, ssd_array=ssd_array, npu_array=npu_array, ssds=ssds, batch=batch)
            counts[model] += result.best_index == index
    assert counts == {"analytic": analytic, "trace": traced}, name
