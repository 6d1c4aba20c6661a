"""The aggregation task packet as ``data.StructLayout``: a 32-bit header and up to 8 nonzero slots.

The seed's packet (Chapter 4, Section 4.4.3 and Figure 4-7) is 512 bits: a 32-bit header and a
480-bit payload of nonzeros, (row, col) for a Boolean adjacency and (row, col, value) for a
weighted one. The field widths are not given there; these are ours::

    header    task 4 | mask 8 | weighted 1 | range_base 19       (bit 0 first)
    slot i    row row_bits | col col_bits | value 32 (weighted)   at bit 32 + i * slot_bits
    padding   to packet_bits

``task`` is :data:`TASK_AGGREGATION` (6, the seed's Table 4.1 Task_id of Aggregation_function);
bit ``i`` of ``mask`` marks slot ``i`` as holding a nonzero; ``weighted`` tells the two kinds
apart; ``range_base`` is the packet's lowest column (the seed's "data range", for the runtime;
the pipeline ignores it). ``packet_bits`` is 512 when the slots fit in the 480-bit payload and
the next multiple of 512 otherwise (weighted packets of 8 lanes with ids wider than 14 bits).
"""

from amaranth.lib import data

__all__ = ["TASK_AGGREGATION", "HEADER_LAYOUT", "PACKET_UNIT", "VALUE_BITS", "slot_layout", "packet_bits",
           "packet_layout"]

TASK_AGGREGATION = 6
HEADER_LAYOUT = data.StructLayout({"task": 4, "mask": 8, "weighted": 1, "range_base": 19})
PACKET_UNIT = 512
VALUE_BITS = 32


def slot_layout(row_bits, col_bits, weighted):
    """One nonzero: ``row``, ``col`` and, in weighted packets, the binary32 ``value``."""
    fields = {"row": row_bits, "col": col_bits}
    if weighted:
        fields["value"] = VALUE_BITS
    return data.StructLayout(fields)


def packet_bits(lanes, row_bits, col_bits, weighted):
    """Packet width: 512, or the next multiple of 512 that holds the header and ``lanes`` slots."""
    used = HEADER_LAYOUT.size + lanes * slot_layout(row_bits, col_bits, weighted).size
    return PACKET_UNIT * -(-used // PACKET_UNIT)


def packet_layout(lanes, row_bits, col_bits, weighted):
    """``header``, ``slots`` (an array of ``lanes`` slots) and zero ``padding`` up to :func:`packet_bits`."""
    slot = slot_layout(row_bits, col_bits, weighted)
    fields = {"header": HEADER_LAYOUT, "slots": data.ArrayLayout(slot, lanes)}
    padding = packet_bits(lanes, row_bits, col_bits, weighted) - HEADER_LAYOUT.size - lanes * slot.size
    if padding:
        fields["padding"] = padding
    return data.StructLayout(fields)
