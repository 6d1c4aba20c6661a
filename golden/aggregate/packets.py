"""The aggregation task packet: its bit layout, and packets as NumPy arrays.

Layout (least significant bit first; the RTL's ``data.Struct`` has the same fields in the
same order, checked by the testbench)::

    header (32 bits)
        task        4   TASK_AGGREGATION (6, the seed's Table 4.1 Task_id of Aggregation_function)
        mask        8   bit i: slot i holds a nonzero (bits >= lanes must be 0)
        weighted    1   Figure 4-7 (b) packet (row, col, value) rather than (a) (row, col)
        range_base 19   the lowest column of the packet's nonzeros (the seed's "data range";
                        carried for the runtime, not checked by the pipeline)
    slot 0 .. lanes - 1, each
        row   row_bits  physical OUT row; slot i may only hold rows with row mod lanes == i
        col   col_bits  B row
        value 32        binary32 a_ij (weighted packets only)
    zero padding up to ``packet_bits``

``packet_bits`` is the seed's 512 (32-bit header + 480-bit payload) whenever the slots fit in
480 bits, and otherwise the next multiple of 512: with the default 16-bit ids a Boolean slot is
32 bits (up to 15 slots fit) and a weighted slot 64 bits (7 fit), so weighted packets of 8
lanes are 1024 bits, unless the ids are at most 14 bits (8 x 60 = 480: graphs of up to 16,384
nodes).
"""

from dataclasses import dataclass, field

import numpy as np

__all__ = ["TASK_AGGREGATION", "HEADER_FIELDS", "HEADER_BITS", "PACKET_UNIT", "MASK_BITS", "PacketFormat",
           "Packets"]

TASK_AGGREGATION = 6
HEADER_FIELDS = (("task", 4), ("mask", 8), ("weighted", 1), ("range_base", 19))
HEADER_BITS = 32
PACKET_UNIT = 512
MASK_BITS = 8
VALUE_BITS = 32


@dataclass(frozen=True)
class PacketFormat:
    """Field widths of one pipeline configuration; see the module docstring for the layout.

    Parameters
    ----------
    lanes : int
        Slots per packet, 1 to 8.
    row_bits, col_bits : int
        Widths of the row and column ids, 1 to 24.
    weighted : bool
        Slots carry a binary32 value.
    """

    lanes: int
    row_bits: int = 16
    col_bits: int = 16
    weighted: bool = False

    def __post_init__(self):
        if not 1 <= self.lanes <= MASK_BITS:
            raise ValueError(f"lanes must be in 1..{MASK_BITS}, not {self.lanes}")
        for name in ("row_bits", "col_bits"):
            if not 1 <= getattr(self, name) <= 24:
                raise ValueError(f"{name} must be in 1..24, not {getattr(self, name)}")

    @property
    def slot_fields(self):
        fields = (("row", self.row_bits), ("col", self.col_bits))
        return fields + ((("value", VALUE_BITS),) if self.weighted else ())

    @property
    def slot_bits(self):
        return sum(width for _, width in self.slot_fields)

    @property
    def packet_bits(self):
        used = HEADER_BITS + self.lanes * self.slot_bits
        return PACKET_UNIT * -(-used // PACKET_UNIT)

    @property
    def padding_bits(self):
        return self.packet_bits - HEADER_BITS - self.lanes * self.slot_bits

    def field_offsets(self):
        """``{name: (offset, width)}`` of every field, slot fields as ``slot<i>.<name>``."""
        offsets, position = {}, 0
        for name, width in HEADER_FIELDS:
            offsets[name] = (position, width)
            position += width
        for lane in range(self.lanes):
            for name, width in self.slot_fields:
                offsets[f"slot{lane}.{name}"] = (position, width)
                position += width
        return offsets

    def encode(self, packets):
        """The packets as Python ints of ``packet_bits`` bits, in order."""
        words = []
        slot_offsets = [[(name, offset, width) for name, width in self.slot_fields
                         for offset in [self.field_offsets()[f"slot{lane}.{name}"][0]]]
                        for lane in range(self.lanes)]
        values = packets.values.view(np.uint32)
        for index in range(len(packets)):
            word = (int(packets.task[index]) | int(packets.mask[index]) << 4
                    | int(packets.weighted[index]) << 12 | (int(packets.range_base[index]) & 0x7FFFF) << 13)
            for lane in range(self.lanes):
                fields = {"row": packets.rows[index, lane], "col": packets.cols[index, lane],
                          "value": values[index, lane]}
                for name, offset, width in slot_offsets[lane]:
                    word |= (int(fields[name]) & ((1 << width) - 1)) << offset
            words.append(word)
        return words


@dataclass
class Packets:
    """A packet stream as arrays (``n`` packets of ``lanes`` slots).

    Attributes
    ----------
    rows, cols : numpy.ndarray of int64, shape (n, lanes)
        Physical OUT row and B row of each slot (0 in empty slots).
    values : numpy.ndarray of float32, shape (n, lanes)
        ``a_ij`` (1.0 in Boolean packets and empty slots).
    mask : numpy.ndarray of uint8, shape (n,)
        The header's slot mask.
    task, weighted, range_base : numpy.ndarray, shape (n,)
        The other header fields.
    """

    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray
    mask: np.ndarray
    task: np.ndarray = field(default=None)
    weighted: np.ndarray = field(default=None)
    range_base: np.ndarray = field(default=None)

    def __post_init__(self):
        count = self.rows.shape[0]
        if self.task is None:
            self.task = np.full(count, TASK_AGGREGATION, dtype=np.uint8)
        if self.weighted is None:
            self.weighted = np.zeros(count, dtype=np.uint8)
        if self.range_base is None:
            cols = np.where(self.slot_mask, self.cols, np.iinfo(np.int64).max)
            lowest = cols.min(axis=1) if count and self.lanes else np.zeros(count, np.int64)
            self.range_base = np.where(lowest == np.iinfo(np.int64).max, 0, lowest)

    @classmethod
    def from_slots(cls, rows, cols, values=None, occupied=None, *, weighted=False):
        """Packets from ``(n, lanes)`` arrays; ``occupied`` (bool) defaults to every slot."""
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        occupied = np.ones(rows.shape, bool) if occupied is None else np.asarray(occupied, bool)
        values = np.ones(rows.shape, np.float32) if values is None else np.asarray(values, np.float32)
        bits = (occupied.astype(np.uint16) << np.arange(rows.shape[1], dtype=np.uint16)).sum(axis=1)
        return cls(np.where(occupied, rows, 0), np.where(occupied, cols, 0), np.where(occupied, values, 1.0)
                   .astype(np.float32), bits.astype(np.uint8),
                   weighted=np.full(rows.shape[0], int(weighted), dtype=np.uint8))

    def __len__(self):
        return self.rows.shape[0]

    @property
    def lanes(self):
        return self.rows.shape[1]

    @property
    def slot_mask(self):
        """``(n, lanes)`` bool: the header's mask bit of each slot."""
        shifts = np.arange(self.lanes, dtype=np.uint16)
        return ((self.mask[:, None].astype(np.uint16) >> shifts) & 1).astype(bool)

    @property
    def nonzeros(self):
        return int(self.slot_mask.sum())

    def fill(self):
        """Mean occupied slots per packet divided by ``lanes`` (0 for no packets)."""
        return self.nonzeros / (len(self) * self.lanes) if len(self) else 0.0

    def concatenate(self, other):
        return Packets(*(np.concatenate([getattr(self, name), getattr(other, name)])
                         for name in ("rows", "cols", "values", "mask", "task", "weighted", "range_base")))

    def select(self, index):
        """The packets at ``index`` (a slice or an index array), as a new stream."""
        return Packets(*(getattr(self, name)[index]
                         for name in ("rows", "cols", "values", "mask", "task", "weighted", "range_base")))
