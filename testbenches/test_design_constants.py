"""The one test that reads the RTL's constants: each equals the table the other tests take as expected.

Tests state register layouts, counter orders, error bits and latencies themselves, in the test or in
``golden/`` (``testbenches/test_expectation_imports.py`` refuses an expectation imported from
``rtl/`` anywhere else). Here the RTL's own statement of each is held equal to that table, so a
moved bit, a reordered counter or an extra pipeline register fails here by name, as well as in
the behavioural tests that decode the outputs with the table.

One section per family; add a family's constants to its section.
"""

import warnings

import pytest
from amaranth.hdl import Shape, UnusedElaboratable
from amaranth.lib import data, wiring

# ------------------------------------------------------------------------------------------------
# Helpers


def _fields(layout, base=0):
    """``{name: (offset, width)}`` of a ``StructLayout``, bit 0 first."""
    return {name: (base + field.offset, field.width) for name, field in layout}


def _packed(fields):
    """``{name: (offset, width)}`` of ``{name: width}`` packed bit 0 first (as ``StructLayout`` packs)."""
    offsets, offset = {}, 0
    for name, width in fields.items():
        offsets[name] = (offset, width)
        offset += width
    return offsets


def _built(component, **params):
    """``component(**params)``, which is only read here and never elaborated."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        unit = component(**params)
    unit._MustUse__silence = True
    return unit


# ------------------------------------------------------------------------------------------------
# fp: formats, flags, canonical NaNs (golden.fp.formats), latencies (golden.fp.latencies)

FORMAT_PROPERTIES = ("width", "precision", "bias", "max_exponent_field", "emin", "emax", "sign_mask",
                     "positive_infinity", "canonical_nan", "max_finite")


@pytest.mark.parametrize("name", ["f32", "f16", "bf16"])
def test_fp_formats(name):
    import golden.fp.formats as model
    import rtl.fp.format as hardware

    rtl_format, golden_format = hardware.FORMATS[name], model.FORMATS[name]
    assert (rtl_format.exponent_bits, rtl_format.mantissa_bits) == \
        (golden_format.exponent_bits, golden_format.mantissa_bits)
    for prop in FORMAT_PROPERTIES:
        assert getattr(rtl_format, prop) == getattr(golden_format, prop), (name, prop)
    assert model.float_format(name) == golden_format
    assert model.float_format(rtl_format) == golden_format


@pytest.mark.parametrize("exponent_bits,mantissa_bits", [(2, 1), (3, 4), (4, 3), (5, 2), (11, 52)])
def test_fp_generic_formats(exponent_bits, mantissa_bits):
    import golden.fp.formats as model
    import rtl.fp.format as hardware

    rtl_format = hardware.FloatFormat("x", exponent_bits, mantissa_bits)
    golden_format = model.float_format(rtl_format)
    for prop in FORMAT_PROPERTIES:
        assert getattr(rtl_format, prop) == getattr(golden_format, prop), prop


def test_fp_flags():
    import golden.fp.formats as model
    import rtl.fp.interface as ports

    for name in ("INEXACT", "UNDERFLOW", "OVERFLOW", "DIVIDE_BY_ZERO", "INVALID"):
        assert getattr(ports, f"FLAG_{name}") == getattr(model, f"FLAG_{name}") == model.Flag[name]
    assert ports.FLAGS_WIDTH == len(model.Flag)


def test_fp_canonical_nans():
    from golden.compress.values import CANONICAL_NAN_F32 as COMPRESS_NAN
    from golden.fp.formats import BF16, F16, F32
    from golden.systolic.numerics import CANONICAL_NAN_F32 as SYSTOLIC_NAN
    from rtl.fp.format import FORMATS

    assert COMPRESS_NAN == SYSTOLIC_NAN == F32.canonical_nan == FORMATS["f32"].canonical_nan == 0x7FC00000
    assert FORMATS["f16"].canonical_nan == F16.canonical_nan == 0x7E00
    assert FORMATS["bf16"].canonical_nan == BF16.canonical_nan == 0x7FC0


def test_fp_bad_format_is_refused():
    import golden.fp.formats as model

    with pytest.raises(ValueError, match="fmt must be one of"):
        model.float_format("f64")
    with pytest.raises(ValueError, match="exponent_bits must be in 2..11"):
        model.FloatFormat("x", 12, 3)


def _fp_units():
    """``{latency key: built unit}`` of every configuration the FP tests build (golden.fp.latencies' keys)."""
    from rtl.fp.fp_div import FloatDivider
    from rtl.fp.fp_sqrt import FloatSquareRoot
    from testbenches.fp.sim_checks import CASES, GENERIC_CASES

    units = {case.id: _built(case.build) for case in CASES + GENERIC_CASES}
    for op, component in (("div", FloatDivider), ("sqrt", FloatSquareRoot)):
        for fmt in ("f32", "f16", "bf16"):
            for mode, flush in (("ieee", False), ("flush", True)):
                units[f"{op}-{fmt}-{mode}"] = _built(component, fmt=fmt, flush_subnormals=flush)
    return units


def test_fp_latencies():
    from golden.fp.latencies import LATENCY

    units = _fp_units()
    assert sorted(units) == sorted(LATENCY), "golden.fp.latencies and the tested configurations differ"
    wrong = {key: (unit.latency, LATENCY[key]) for key, unit in units.items() if unit.latency != LATENCY[key]}
    assert not wrong, f"(declared, documented) latency: {wrong}"


# ------------------------------------------------------------------------------------------------
# optim: the updater kernel's error register, the statistics buckets (golden.optim.registers)


def test_optim_error_register():
    import rtl.optim.updater_kernel as kernel
    from golden.optim import registers

    for name in ("ERROR_READ", "ERROR_WRITE", "ERROR_READ_RESP_SHIFT", "ERROR_WRITE_RESP_SHIFT"):
        assert getattr(kernel, name) == getattr(registers, name), name


def test_optim_statistics_buckets():
    from golden.optim.registers import STATISTICS_BUCKETS
    from rtl.optim.gradient_statistics import BUCKETS

    assert BUCKETS == STATISTICS_BUCKETS


# ------------------------------------------------------------------------------------------------
# compress: error counters, status bits, traffic counters, the Top-K kernel's error bits
# (golden.compress.registers)


def test_compress_error_counters():
    from golden.compress import ScatterStatus
    from golden.compress.registers import ERROR_COUNTER_WIDTH, ERROR_NAMES, error_fields
    from rtl.compress import chunk_parser

    assert chunk_parser.ERROR_NAMES == ERROR_NAMES
    assert chunk_parser.COUNTER_WIDTH == ERROR_COUNTER_WIDTH
    assert _fields(chunk_parser.errors_layout()) == _packed(error_fields())
    # The status output's bit k is counter k's sticky bit: golden's ScatterStatus, in the same order.
    assert [flag.name.lower() for flag in ScatterStatus] == list(ERROR_NAMES)
    assert [int(flag) for flag in ScatterStatus] == [1 << k for k in range(len(ERROR_NAMES))]


def _compress_blocks_with(port):
    from rtl.registry import blocks

    found = {}
    for name, block in blocks().items():
        if block.family == "compress":
            unit = _built(block.build)
            if port in unit.signature.members:
                found[name] = unit.signature.members[port].shape
    return found


def test_compress_error_ports():
    """Every compress block's ``errors`` and ``status`` outputs are the golden table's."""
    from golden.compress.registers import ERROR_NAMES, error_fields

    errors, status = _compress_blocks_with("errors"), _compress_blocks_with("status")
    assert len(errors) >= 5, f"compress blocks with an errors output: {sorted(errors)}"
    for name, shape in errors.items():
        assert isinstance(shape, data.StructLayout), name
        assert _fields(shape) == _packed(error_fields()), name
    for name in errors:
        assert Shape.cast(status[name]).width == len(ERROR_NAMES), name


def test_compress_traffic_counters():
    from golden.compress.registers import TRAFFIC_COUNTER_WIDTH, traffic_fields
    from rtl.compress import dram_scatter

    assert dram_scatter.TRAFFIC_WIDTH == TRAFFIC_COUNTER_WIDTH
    assert _fields(dram_scatter.traffic_layout()) == _packed(traffic_fields())


def test_compress_topk_kernel_error_bits():
    from golden.compress import registers
    from rtl.compress import topk_updater

    assert topk_updater.ERROR_PAIRS_READ == registers.ERROR_PAIRS_READ
    assert topk_updater.ERROR_PAIRS_RESP_SHIFT == registers.ERROR_PAIRS_RESP_SHIFT


# ------------------------------------------------------------------------------------------------
# bus: the AXI 4 KB boundary (golden.bus.bursts)


def test_bus_page_bytes():
    from golden.bus.bursts import PAGE_BYTES
    from rtl.bus import axi, axi_burst_planner, axi_burst_reader

    assert axi.PAGE_BYTES == axi_burst_planner.PAGE_BYTES == axi_burst_reader.PAGE_BYTES == PAGE_BYTES == 4096


# ------------------------------------------------------------------------------------------------
# aggregate: the packet layout (golden.aggregate.PacketFormat)


def test_packet_layout_equals_golden():
    from golden.aggregate import PacketFormat
    from rtl.aggregate.packet import packet_layout

    for lanes in (1, 2, 4, 8):
        for weighted in (False, True):
            fmt = PacketFormat(lanes, 16, 16, weighted)
            layout = packet_layout(lanes, 16, 16, weighted)
            assert layout.size == fmt.packet_bits
            header, slots = layout["header"], layout["slots"]
            offsets = _fields(header.shape, header.offset)
            slot = slots.shape.elem_shape
            for lane in range(lanes):
                for name, field in slot:
                    offset = slots.offset + lane * slot.size + field.offset
                    offsets[f"slot{lane}.{name}"] = (offset, field.width)
            assert offsets == fmt.field_offsets()


# ------------------------------------------------------------------------------------------------
# systolic: the PEs' arithmetic latencies (golden.systolic.latencies)


@pytest.mark.parametrize("element", ["f32", "f16", "bf16", "int8"])
def test_systolic_pe_latencies(element):
    from golden.systolic.latencies import PE_LATENCY
    from rtl.systolic.arithmetic import arithmetic

    unit = arithmetic(element)
    assert (unit.multiply_latency, unit.add_latency) == PE_LATENCY[element]


# ------------------------------------------------------------------------------------------------
# boards: the UART Adam demo's protocol and address map (golden.optim.board_demo)


def test_board_demo_protocol():
    from golden.optim import board_demo as table
    from rtl.board import adam_demo

    for name in ("OP_WRITE", "OP_READ", "OP_START", "OP_POLL", "REPLY_OK", "REPLY_BAD"):
        assert getattr(adam_demo, name) == getattr(table, name), name
    assert adam_demo.STATUS_BITS == table.STATUS_BITS
    assert list(adam_demo.REGISTERS.items()) == list(table.REGISTERS.items())
    assert adam_demo.TENSORS == table.TENSORS
    for depth in (16, 256, 1024):
        for index in range(len(table.TENSORS) + 1):
            assert adam_demo.tensor_base(index, depth) == table.tensor_base(index, depth), (index, depth)


# ------------------------------------------------------------------------------------------------
# runtime: the packet layout (golden.runtime.packet), the counters and the host port
# (golden.runtime.tables)




def _runtime_fields(layout, base=0):
    """``{dotted name: (offset, width)}`` of every leaf field of an Amaranth layout (padding left out)."""
    result = {}
    for name, field in layout:
        if name.startswith("_"):
            continue
        shape = field.shape
        cast = shape.as_shape() if hasattr(shape, "as_shape") else shape
        if hasattr(cast, "__iter__") and not isinstance(cast, Shape):
            for inner, value in _runtime_fields(cast, base + field.offset).items():
                result[f"{name}.{inner}"] = value
        else:
            result[name] = (base + field.offset, Shape.cast(shape).width)
    return result


def test_runtime_header_layout():
    from golden.runtime import packet as model
    from rtl.net import packet as hardware

    header = _runtime_fields(hardware.Header.as_shape())
    assert header == {name: (offset, width) for name, offset, width in model.HEADER_FIELDS}
    assert sum(width for _, width in header.values()) == model.HEADER_BITS == hardware.HEADER_BITS


def test_runtime_payload_layouts():
    from golden.runtime import packet as model
    from rtl.net import packet as hardware

    task = _runtime_fields(hardware.TaskPayload.as_shape())
    items = hardware.TaskPayload.as_shape()["items"]
    assert items.offset == model.ITEM_OFFSET
    element = items.shape
    assert element.length == model.ITEMS
    assert Shape.cast(element.elem_shape).width == model.ITEM_BITS
    assert _runtime_fields(element.elem_shape.as_shape()) == {name: (offset, width)
                                                        for name, offset, width in model.ITEM_FIELDS}
    assert {name: task[name] for name, _, _ in model.TASK_FIELDS} == {
        name: (offset, width) for name, offset, width in model.TASK_FIELDS}
    for layout, fields in ((hardware.RdmaPayload, model.RDMA_FIELDS),
                           (hardware.DataPayload, model.DATA_FIELDS)):
        assert _runtime_fields(layout.as_shape()) == {name: (offset, width) for name, offset, width in fields}
    for layout in (hardware.TaskPayload, hardware.RdmaPayload, hardware.DataPayload):
        assert Shape.cast(layout).width == model.PAYLOAD_BITS
    packet = hardware.Packet.as_shape()
    assert packet["header"].offset == 0 and packet["payload"].offset == model.HEADER_BITS
    assert Shape.cast(hardware.Packet).width == model.PACKET_BITS == 512
    assert hardware.LINE_BITS == model.LINE_BITS


def test_runtime_codes_and_table_4_1():
    from golden.runtime import packet as model
    from rtl.net import packet as hardware

    names = {model.TASK: "TASK", model.RDMA: "RDMA", model.DATA: "DATA"}
    assert {member.value: member.name for member in hardware.PacketType} == names
    assert [member.value for member in hardware.VC] == [member.value for member in hardware.PacketType]
    assert {member.value: member.name.lower() for member in hardware.TaskId} == model.KERNELS
    assert (model.KERNELS[1], model.KERNELS[5], model.KERNELS[6]) == ("gemm", "activation", "aggregation")


def test_runtime_counters():
    import golden.runtime.tables as model
    from rtl.runtime import classifier, cluster, node_kernels, node_memory, runtime_node, task_responder

    assert classifier.CLASSIFIER_DROPS == model.CLASSIFIER_DROPS
    assert task_responder.RESPONDER_DROPS == model.RESPONDER_DROPS
    assert runtime_node.COUNTERS == model.NODE_STATUS_COUNTERS
    assert node_kernels.KERNEL_COUNTERS == model.KERNEL_COUNTERS
    assert cluster.HOST_COUNTERS == model.HOST_COUNTERS
    # The status registers: ``quiet``, then the counters in this order, 32 bits each.
    node = _built(runtime_node.RuntimeNode)
    entries = [entry for entry in node.register_map() if entry["kind"] == "status"]
    assert [entry["name"] for entry in entries] == ["quiet", *model.NODE_STATUS_COUNTERS]
    assert {entry["width"] for entry in entries[1:]} == {32}
    # The counter ports: one per name, 32 bits (and one per node in the cluster).
    kernels = _built(node_kernels.NodeKernels)
    for name in model.KERNEL_COUNTERS:
        assert Shape.cast(getattr(kernels, name).shape()).width == 32, name
    memory = _built(node_memory.NodeMemory)
    for name in model.MEMORY_COUNTERS:
        assert Shape.cast(getattr(memory, name).shape()).width == 32, name
    top = _built(cluster.Cluster, nodes=4)
    for name in model.HOST_COUNTERS:
        assert Shape.cast(getattr(top, name).shape()).width == 32, name
    for name in model.KERNEL_COUNTERS:
        assert Shape.cast(getattr(top, f"kernel_{name}").shape()).width == 4 * 32, name
    for name in model.MEMORY_COUNTERS:
        assert Shape.cast(getattr(top, f"memory_{name}").shape()).width == 4 * 32, name


def test_runtime_host_port():
    import golden.runtime.tables as model
    from rtl.runtime import cluster, node_kernels

    targets = {"spawn": cluster.HOST_SPAWN, "data": cluster.HOST_DATA, "out": cluster.HOST_OUT}
    assert targets == model.HOST_TARGETS
    for layout, fields in ((cluster.host_write_layout(), model.HOST_WRITE_FIELDS),
                           (cluster.host_read_layout(), model.HOST_READ_FIELDS),
                           (node_kernels.read_answer_layout(), model.READ_ANSWER_FIELDS)):
        assert _runtime_fields(layout) == {name: (offset, width) for name, offset, width in fields}
        assert layout.size == sum(width for _, _, width in fields)
    top = _built(cluster.Cluster)
    assert top.host_read_data.payload.shape() == node_kernels.read_answer_layout()


# ------------------------------------------------------------------------------------------------
# collective: counter names and orders, the gradient tag's place, the damage bit
# (golden.collective.control)


def _counter_ports(component, width=16):
    """The names of ``component``'s ``width``-bit outputs, in port order."""
    return tuple(name for name, member in component.signature.members.items()
                 if member.is_port and member.flow == wiring.Out and member.shape == width)


def test_collective_counter_tables():
    import golden.collective.control as model
    import rtl.collective.fetch_slots as fetch_slots
    import rtl.collective.gcu as gcu
    import rtl.collective.reduction_table as reduction_table
    import rtl.collective.region_unit as region_unit

    assert fetch_slots.FETCH_COUNTERS == model.FETCH_COUNTERS
    assert reduction_table.COUNTERS == model.REDUCTION_COUNTERS
    assert gcu.GCU_COUNTERS == model.GCU_COUNTERS
    assert gcu.unit_counters() == model.UNIT_COUNTERS
    assert region_unit.REGION_COUNTERS == model.REGION_COUNTERS
    assert (1 << reduction_table.COLLECTIVE_COUNTER_BITS) - 1 == model.COUNTER_MAX


def test_collective_counter_ports_in_table_order():
    import golden.collective.control as model
    from rtl.registry import get_block

    for block, table in (("gcu", model.UNIT_COUNTERS), ("gcu_cluster", model.UNIT_COUNTERS),
                         ("sliced_gcu_cluster", model.UNIT_COUNTERS), ("region_unit", model.REGION_COUNTERS)):
        ports = _counter_ports(get_block(block).build())
        assert tuple(port for port in ports if port in table) == table, block


def test_collective_tag_and_damage_bits():
    import golden.collective.control as model
    import rtl.collective.fetch_slots as fetch_slots
    import rtl.collective.tiered_cluster as tiered_cluster

    assert fetch_slots.CHUNK_FIELD_BITS == model.TAG_SHIFT
    assert tiered_cluster.DAMAGED_BIT == model.DAMAGED_BIT
