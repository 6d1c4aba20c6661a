"""The packet format: rtl.runtime.packet and golden.runtime.packet state the same layout.

No simulation: the two layouts are compared field by field (offsets, widths, enum codes),
and the golden codec is checked against an independent byte-level reading of the packet.
"""

import functools
import operator

from amaranth.hdl import Shape

from golden.runtime import packet as golden
from rtl.runtime import packet as rtl
from scripts.sim import knobs


def _fields(layout, base=0):
    """``{dotted name: (offset, width)}`` of every leaf field of an Amaranth layout (padding left out)."""
    result = {}
    for name, field in layout:
        if name.startswith("_"):
            continue
        shape = field.shape
        cast = shape.as_shape() if hasattr(shape, "as_shape") else shape
        if hasattr(cast, "__iter__") and not isinstance(cast, Shape):
            for inner, value in _fields(cast, base + field.offset).items():
                result[f"{name}.{inner}"] = value
        else:
            result[name] = (base + field.offset, Shape.cast(shape).width)
    return result


def test_header_layout_matches_golden():
    header = _fields(rtl.Header.as_shape())
    assert header == {name: (offset, width) for name, offset, width in golden.HEADER_FIELDS}
    assert sum(width for _, width in header.values()) == golden.HEADER_BITS == rtl.HEADER_BITS


def test_payload_layouts_match_golden():
    task = _fields(rtl.TaskPayload.as_shape())
    items = rtl.TaskPayload.as_shape()["items"]
    assert items.offset == golden.ITEM_OFFSET
    element = items.shape
    assert element.length == golden.ITEMS
    assert Shape.cast(element.elem_shape).width == golden.ITEM_BITS
    assert _fields(element.elem_shape.as_shape()) == {name: (offset, width)
                                                        for name, offset, width in golden.ITEM_FIELDS}
    assert {name: task[name] for name, _, _ in golden.TASK_FIELDS} == {
        name: (offset, width) for name, offset, width in golden.TASK_FIELDS}
    for layout, fields in ((rtl.RdmaPayload, golden.RDMA_FIELDS), (rtl.DataPayload, golden.DATA_FIELDS)):
        assert _fields(layout.as_shape()) == {name: (offset, width) for name, offset, width in fields}
    for layout in (rtl.TaskPayload, rtl.RdmaPayload, rtl.DataPayload):
        assert Shape.cast(layout).width == golden.PAYLOAD_BITS
    packet = rtl.Packet.as_shape()
    assert packet["header"].offset == 0 and packet["payload"].offset == golden.HEADER_BITS
    assert Shape.cast(rtl.Packet).width == golden.PACKET_BITS == 512
    assert rtl.LINE_BITS == golden.LINE_BITS


def test_codes_match_golden_and_table_4_1():
    names = {golden.TASK: "TASK", golden.RDMA: "RDMA", golden.DATA: "DATA"}
    assert {member.value: member.name for member in rtl.PacketType} == names
    assert [member.value for member in rtl.VC] == [member.value for member in rtl.PacketType]
    assert {member.value: member.name.lower() for member in rtl.TaskId} == golden.KERNELS
    assert (golden.KERNELS[1], golden.KERNELS[5], golden.KERNELS[6]) == ("gemm", "activation", "aggregation")


def _random_packet(rng):
    ptype = int(rng.integers(0, 3))
    common = {"task_id": int(rng.integers(0, 7)), "dst": int(rng.integers(0, 16)),
              "src": int(rng.integers(0, 16)), "range": int(rng.integers(0, 1024)),
              "remote": int(rng.integers(0, 2))}
    if ptype == golden.TASK:
        slots = tuple(golden.Item(int(rng.integers(0, 1 << 24)), int(rng.integers(0, 1 << 24)),
                                  int(rng.integers(0, 1 << 32))) if rng.random() < 0.7 else None
                      for _ in range(golden.ITEMS))
        return golden.Packet(golden.TASK, slots=slots, **common)
    if ptype == golden.RDMA:
        return golden.Packet(golden.RDMA, first=int(rng.integers(0, 1 << 24)),
                             lines=int(rng.integers(0, 256)), **common)
    return golden.Packet(golden.DATA, line=int(rng.integers(0, 1 << 24)), last=int(rng.integers(0, 2)),
                         data=int(rng.integers(0, 1 << 62)) << 380 | int(rng.integers(0, 1 << 62)), **common)


def _bytes_xor(word):
    return functools.reduce(operator.xor, word.to_bytes(64, "little"), 0)


def test_encode_decode_round_trip_and_seal():
    rng = knobs.rng(1)
    for _ in range(knobs.vectors(2000)):
        packet = _random_packet(rng)
        word = golden.encode(packet)
        assert 0 <= word < 1 << 512
        assert _bytes_xor(word) == 0, knobs.describe()
        decoded = golden.decode(word)
        again = golden.encode(decoded)
        assert again == word, knobs.describe()
        # Field positions read straight from the bytes, independently of the codec.
        assert word & 3 == packet.ptype and (word >> 13) & 0x3FF == packet.range
        if packet.ptype == golden.TASK:
            mask = sum(1 << slot for slot, item in enumerate(packet.slots) if item is not None)
            assert (word >> 32) & 0xF == mask
            for slot, item in enumerate(packet.slots):
                if item is not None:
                    base = 64 + 80 * slot
                    assert ((word >> base) & 0xFFFFFF, (word >> (base + 24)) & 0xFFFFFF,
                            (word >> (base + 48)) & 0xFFFFFFFF) == (item.row, item.col, item.value)


def test_checksum_catches_every_single_bit_error():
    rng = knobs.rng(2)
    word = golden.encode(_random_packet(rng))
    for bit in range(512):
        assert golden.checksum(word ^ (1 << bit)) != 0
    for _ in range(50):
        assert golden.checksum(golden.seal(int(rng.integers(0, 1 << 62)) << 100)) == 0
