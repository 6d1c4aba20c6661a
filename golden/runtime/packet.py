"""The runtime packet as plain integers: field table, encode, decode, checksum.

A packet is a 512-bit int. This module states the layout on its own (it never imports
``rtl``); ``testbenches/runtime/test_packet.py`` holds it equal to ``rtl.net.packet``.

Header (bits 0..31): ``ptype`` 2, ``task_id`` 3, ``dst`` 4, ``src`` 4, ``range`` 10,
``remote`` 1, ``check`` 8. Payload (bits 32..511), by type:

* task: ``mask`` (4 bits, bit *i*: slot *i* is occupied) in the first word, then 4 item slots
  of 80 bits from payload bit 32, each ``row`` 24, ``col`` 24, ``value`` 32;
* RDMA request: ``first`` 24, ``lines`` 8;
* data reply: ``line`` 24, ``last`` 1, 7 spare bits, then 448 data bits from payload bit 32.

Integrity: the XOR of the 64 bytes of an intact packet is zero; :func:`seal` sets ``check``
so that it is.
"""

from dataclasses import dataclass, field

__all__ = ["TASK", "RDMA", "DATA", "PTYPE_NAMES", "KERNELS", "HEADER_FIELDS", "TASK_FIELDS", "ITEM_FIELDS",
           "RDMA_FIELDS", "DATA_FIELDS", "ITEMS", "ITEM_BITS", "ITEM_OFFSET", "PACKET_BITS", "HEADER_BITS",
           "PAYLOAD_BITS", "LINE_BITS", "ROW_BITS", "RANGE_BITS", "NODE_BITS", "MAX_NODES",
           "Item", "Packet", "checksum", "seal", "encode", "decode", "get_field", "set_field"]

TASK, RDMA, DATA = 0, 1, 2
PTYPE_NAMES = {TASK: "task", RDMA: "rdma", DATA: "data"}
# Table 4.1 of the seed.
KERNELS = {0: "conv2d", 1: "gemm", 2: "spmm", 3: "spgemm", 4: "norm", 5: "activation", 6: "aggregation"}

PACKET_BITS, HEADER_BITS, PAYLOAD_BITS = 512, 32, 480
ROW_BITS, RANGE_BITS, NODE_BITS = 24, 10, 4
MAX_NODES = 1 << NODE_BITS
LINE_BITS = 448
ITEMS, ITEM_BITS, ITEM_OFFSET = 4, 80, 32

# (name, bit offset in the packet, width)
HEADER_FIELDS = (("ptype", 0, 2), ("task_id", 2, 3), ("dst", 5, 4), ("src", 9, 4), ("range", 13, 10),
                 ("remote", 23, 1), ("check", 24, 8))
# offsets in the payload (add HEADER_BITS for the packet)
TASK_FIELDS = (("mask", 0, 4),)
ITEM_FIELDS = (("row", 0, 24), ("col", 24, 24), ("value", 48, 32))
RDMA_FIELDS = (("first", 0, 24), ("lines", 24, 8))
DATA_FIELDS = (("line", 0, 24), ("last", 24, 1), ("data", 32, LINE_BITS))


def get_field(word, offset, width):
    return (word >> offset) & ((1 << width) - 1)


def set_field(word, offset, width, value):
    mask = ((1 << width) - 1) << offset
    return (word & ~mask) | ((int(value) << offset) & mask)


def checksum(word):
    """XOR of the 64 bytes of ``word``."""
    result = 0
    for index in range(PACKET_BITS // 8):
        result ^= (word >> (8 * index)) & 0xFF
    return result


def seal(word):
    """``word`` with its ``check`` byte set so that :func:`checksum` is zero."""
    word = set_field(word, 24, 8, 0)
    return set_field(word, 24, 8, checksum(word))


@dataclass(frozen=True)
class Item:
    """A task item: output ``row`` (its home node owns it), ``col`` and raw 32-bit ``value``."""

    row: int
    col: int = 0
    value: int = 0


@dataclass(frozen=True)
class Packet:
    """A decoded packet.

    ``slots`` for tasks: 4 entries, an :class:`Item` or None (empty); ``first``/``lines`` for
    RDMA; ``line``/``last``/``data`` for data. ``mask`` defaults to the occupied slots.
    """

    ptype: int
    task_id: int = 0
    dst: int = 0
    src: int = 0
    range: int = 0
    remote: int = 0
    slots: tuple = (None,) * ITEMS
    mask: int = None
    first: int = 0
    lines: int = 0
    line: int = 0
    last: int = 0
    data: int = 0
    check: int = None
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def occupied(self):
        """The slot mask: ``mask`` when given, else the slots that hold an item."""
        if self.mask is not None:
            return self.mask
        return sum(1 << slot for slot, item in enumerate(self.slots) if item is not None)


def encode(packet, *, sealed=True):
    """The 512-bit int of ``packet``; sealed (``check`` computed) unless ``sealed`` is False."""
    word = 0
    header = {"ptype": packet.ptype, "task_id": packet.task_id, "dst": packet.dst, "src": packet.src,
              "range": packet.range, "remote": packet.remote, "check": packet.check or 0}
    for name, offset, width in HEADER_FIELDS:
        word = set_field(word, offset, width, header[name])
    base = HEADER_BITS
    if packet.ptype == TASK:
        word = set_field(word, base, ITEMS, packet.occupied)
        for slot, item in enumerate(packet.slots):
            if item is None:
                continue
            start = base + ITEM_OFFSET + slot * ITEM_BITS
            for name, offset, width in ITEM_FIELDS:
                word = set_field(word, start + offset, width, getattr(item, name))
    elif packet.ptype == RDMA:
        word = set_field(word, base, 24, packet.first)
        word = set_field(word, base + 24, 8, packet.lines)
    elif packet.ptype == DATA:
        for name, offset, width in DATA_FIELDS:
            word = set_field(word, base + offset, width, getattr(packet, name))
    return seal(word) if sealed else word


def decode(word):
    """Decode a 512-bit int (task slots outside ``mask`` decode as None)."""
    header = {name: get_field(word, offset, width) for name, offset, width in HEADER_FIELDS}
    base = HEADER_BITS
    values = {}
    if header["ptype"] == TASK:
        mask = get_field(word, base, ITEMS)
        slots = []
        for slot in range(ITEMS):
            start = base + ITEM_OFFSET + slot * ITEM_BITS
            item = Item(*(get_field(word, start + offset, width) for _, offset, width in ITEM_FIELDS))
            slots.append(item if mask >> slot & 1 else None)
        values = {"mask": mask, "slots": tuple(slots)}
    elif header["ptype"] == RDMA:
        values = {"first": get_field(word, base, 24), "lines": get_field(word, base + 24, 8)}
    elif header["ptype"] == DATA:
        values = {name: get_field(word, base + offset, width) for name, offset, width in DATA_FIELDS}
    return Packet(**header, **values)
