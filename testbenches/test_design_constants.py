"""The one test that reads the RTL's constants: each equals the table the other tests take as expected.

(This branch adds only the ``# runtime`` section; the other families' sections are on other branches.)
"""

import warnings

from amaranth.hdl import Shape, UnusedElaboratable

# ------------------------------------------------------------------------------------------------
# runtime: the packet layout (golden.runtime.packet), the counters and the host port
# (golden.runtime.tables)


def _runtime_built(component, **params):
    """``component(**params)``, which is only read here and never elaborated."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        unit = component(**params)
    unit._MustUse__silence = True
    return unit


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
    from rtl.runtime import packet as hardware

    header = _runtime_fields(hardware.Header.as_shape())
    assert header == {name: (offset, width) for name, offset, width in model.HEADER_FIELDS}
    assert sum(width for _, width in header.values()) == model.HEADER_BITS == hardware.HEADER_BITS


def test_runtime_payload_layouts():
    from golden.runtime import packet as model
    from rtl.runtime import packet as hardware

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
    from rtl.runtime import packet as hardware

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
    node = _runtime_built(runtime_node.RuntimeNode)
    entries = [entry for entry in node.register_map() if entry["kind"] == "status"]
    assert [entry["name"] for entry in entries] == ["quiet", *model.NODE_STATUS_COUNTERS]
    assert {entry["width"] for entry in entries[1:]} == {32}
    # The counter ports: one per name, 32 bits (and one per node in the cluster).
    kernels = _runtime_built(node_kernels.NodeKernels)
    for name in model.KERNEL_COUNTERS:
        assert Shape.cast(getattr(kernels, name).shape()).width == 32, name
    memory = _runtime_built(node_memory.NodeMemory)
    for name in model.MEMORY_COUNTERS:
        assert Shape.cast(getattr(memory, name).shape()).width == 32, name
    top = _runtime_built(cluster.Cluster, nodes=4)
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
    top = _runtime_built(cluster.Cluster)
    assert top.host_read_data.payload.shape() == node_kernels.read_answer_layout()
