"""The FCsN runtime packet: a 512-bit packet with a 32-bit header and a 480-bit payload.

The seed (dissertation Ch. 4, Section 4.4.3) fixes the sizes, the three packet types and the
kernel ids of Table 4.1, and says the header carries "task type, task ID, task destination,
and needed data range" plus a "remote data header field"; it gives no bit widths. These are
ours (``docs/runtime.md`` section 1 has the table; :mod:`golden.runtime.packet` states the
same layout independently and a test holds the two equal).

Header, bits 0 to 31 of the packet (LSB first):

===========  ====  =====  ===================================================================
field        bits  width  meaning
===========  ====  =====  ===================================================================
``ptype``    0     2      :class:`PacketType`: task, RDMA request, data reply (3 is invalid)
``task_id``  2     3      :class:`TaskId`, Table 4.1 (7 is invalid)
``dst``      5     4      destination node id
``src``      9     4      source node id (the requester of an RDMA request)
``range``    13    10     needed data range (task), requested range (RDMA), carried range (data)
``remote``   23    1      remote-data field: the task's range is held by another node than ``dst``
``check``    24    8      integrity: the XOR of all 64 bytes of the packet is zero
===========  ====  =====  ===================================================================

Payloads (bits 32 to 511), by type:

* task: ``mask`` (bit *i*: slot *i* holds an item; never 0) in its first 32-bit word, then 4
  :class:`TaskItem` slots of 80 bits (``row`` 24, ``col`` 24, ``value`` 32). An item executes
  at the node that owns its ``row`` (its *home*) and reads the data range in the header. Items
  keep their slot when a packet is split (a kernel may tie slots to banks, as the aggregation
  pipeline ties slot *i* to output rows ``row mod 4 == i``);
* RDMA request: ``first`` line and ``lines`` (count) of the requested range;
* data reply: ``line`` (global line address), ``last`` (the range's final line), and one
  448-bit data line.

Network flits add a 2-bit virtual channel (:class:`VC`) beside the packet; the classifier drops
a packet whose type differs from its channel.
"""

from amaranth.hdl import Cat, Const, unsigned
from amaranth.lib import data, enum

__all__ = ["PacketType", "TaskId", "VC", "Header", "TaskItem", "TaskPayload", "RdmaPayload", "DataPayload",
           "Packet", "Flit", "MemWrite", "SpawnWrite", "ITEMS", "PACKET_BITS", "HEADER_BITS", "PAYLOAD_BITS",
           "LINE_BITS", "ROW_BITS", "RANGE_BITS", "NODE_BITS", "MAX_NODES", "MAX_LINES_PER_RANGE",
           "KERNEL_IDS", "checksum", "sealed", "home_owner", "range_owner"]

PACKET_BITS = 512
HEADER_BITS = 32
PAYLOAD_BITS = 480
ITEMS = 4
ROW_BITS = 24
RANGE_BITS = 10
NODE_BITS = 4
MAX_NODES = 1 << NODE_BITS
LINE_BITS = 448
MAX_LINES_PER_RANGE = 255
# Table 4.1: every id the format can name.
KERNEL_IDS = tuple(range(7))


class PacketType(enum.Enum, shape=2):
    """Packet type (header ``ptype``); the value 3 is invalid and dropped."""

    TASK = 0
    RDMA = 1
    DATA = 2


class VC(enum.Enum, shape=2):
    """Virtual channel of a network flit: one per packet type (3 is invalid)."""

    TASK = 0
    RDMA = 1
    DATA = 2


class TaskId(enum.Enum, shape=3):
    """Kernel id (header ``task_id``), Table 4.1 of the seed; 7 is invalid."""

    CONV2D = 0
    GEMM = 1
    SPMM = 2
    SPGEMM = 3
    NORM = 4
    ACTIVATION = 5
    AGGREGATION = 6


class Header(data.Struct):
    """The 32-bit application header (see the module docstring)."""

    ptype: PacketType
    task_id: TaskId
    dst: unsigned(NODE_BITS)
    src: unsigned(NODE_BITS)
    range: unsigned(RANGE_BITS)
    remote: unsigned(1)
    check: unsigned(8)


class TaskItem(data.Struct):
    """One task item (a nonzero of a sparse operand): output ``row`` (its home), ``col``, ``value``."""

    row: unsigned(ROW_BITS)
    col: unsigned(ROW_BITS)
    value: unsigned(32)


class TaskPayload(data.Struct):
    """Task payload: ``mask`` of occupied slots (never 0) then 4 item slots."""

    mask: unsigned(ITEMS)
    _1: unsigned(32 - ITEMS)
    items: data.ArrayLayout(TaskItem, ITEMS)
    _2: unsigned(PAYLOAD_BITS - 32 - ITEMS * 80)


class RdmaPayload(data.Struct):
    """RDMA request payload: the ``lines`` lines from ``first`` of the requested range."""

    first: unsigned(ROW_BITS)
    lines: unsigned(8)
    _1: unsigned(PAYLOAD_BITS - 32)


class DataPayload(data.Struct):
    """Data reply payload: global ``line`` address, ``last`` line of its range, 448 data bits."""

    line: unsigned(ROW_BITS)
    last: unsigned(1)
    _1: unsigned(7)
    data: unsigned(LINE_BITS)


class Packet(data.Struct):
    """A 512-bit packet: the header in bits 0..31, the payload (read through a view) above."""

    header: Header
    payload: unsigned(PAYLOAD_BITS)

    def task(self):
        return TaskPayload(self.payload)

    def rdma(self):
        return RdmaPayload(self.payload)

    def data_reply(self):
        return DataPayload(self.payload)


class Flit(data.Struct):
    """A network flit: one packet and the virtual channel it travels on."""

    packet: Packet
    vc: VC


class MemWrite(data.Struct):
    """A write to a node's local data memory: one line at a global line address."""

    line: unsigned(ROW_BITS)
    data: unsigned(LINE_BITS)


def SpawnWrite(address_bits):
    """Layout of a host write into ``Spawn_MEM``: an entry address and a packet image."""
    return data.StructLayout({"address": address_bits, "packet": Packet})


def checksum(value):
    """The XOR of the 64 bytes of a 512-bit ``value``: zero for an intact packet."""
    value = value.as_value() if hasattr(value, "as_value") else value
    result = value[0:8]
    for index in range(1, PACKET_BITS // 8):
        result = result ^ value[8 * index:8 * index + 8]
    return result


def sealed(packet):
    """``packet`` (512 bits) with its ``check`` byte set so that the XOR of its bytes is zero."""
    value = packet.as_value() if hasattr(packet, "as_value") else packet
    clear = Cat(value[:24], Const(0, 8), value[32:PACKET_BITS])
    return Cat(value[:24], checksum(clear), value[32:PACKET_BITS])


def home_owner(row, home_shift, node_mask):
    """Owner node of an output ``row``: ``(row >> home_shift) & node_mask`` (runtime registers)."""
    return (row >> home_shift)[:NODE_BITS] & node_mask


def range_owner(index, range_shift, node_mask):
    """Owner node of data range ``index``: ``(index >> range_shift) & node_mask``."""
    return (index >> range_shift)[:NODE_BITS] & node_mask
