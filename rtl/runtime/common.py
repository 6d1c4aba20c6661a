"""Pieces the runtime units share: the configuration port, the data-range arithmetic and parameters.

Generic pieces (queues, merges, counters) are in :mod:`rtl.lib`; the packet and its check byte in
:mod:`rtl.net`.
"""

from amaranth.hdl import Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..net.packet import NODE_BITS, RANGE_BITS, ROW_BITS
from ..registration import Param

__all__ = ["ConfigSignature", "times_constant", "range_first", "range_lines", "BLOCK_PARAM", "RANGES_PARAM"]

# The data-range parameters, the same in every runtime block that has them.
BLOCK_PARAM = Param("block", int, 20, "lines per data range", minimum=1, maximum=255)
RANGES_PARAM = Param("ranges", int, 64, "data ranges tracked", minimum=2, maximum=1024)


class ConfigSignature(wiring.Signature):
    """The runtime registers every unit reads (from the AXI4-Lite control block).

    Members
    -------
    node : Out(4)
        This node's id.
    node_mask : Out(4)
        Nodes in the cluster minus one (1, 2, 4, 8 or 16 nodes).
    home_shift : Out(5)
        Row ``r`` belongs to node ``(r >> home_shift) & node_mask``.
    range_shift : Out(4)
        Data range ``g`` belongs to node ``(g >> range_shift) & node_mask``.
    rows : Out(25)
        Lines of the global data space (rows); ``ranges`` = ceil(rows / block).
    ranges : Out(11)
        Data ranges in use, at most the block's ``ranges`` parameter.
    """

    def __init__(self):
        super().__init__({
            "node": Out(NODE_BITS),
            "node_mask": Out(NODE_BITS),
            "home_shift": Out(5),
            "range_shift": Out(4),
            "rows": Out(ROW_BITS + 1),
            "ranges": Out(RANGE_BITS + 1),
        })


def times_constant(value, constant):
    """``value * constant`` as a sum of shifted copies (no multiplier cell)."""
    terms = [value << bit for bit in range(constant.bit_length()) if constant >> bit & 1]
    result = terms[0]
    for term in terms[1:]:
        result = result + term
    return result


def range_first(index, block):
    """First line of data range ``index``: ``index * block``."""
    return times_constant(index, block)[:ROW_BITS + 1]


def range_lines(m, index, block, rows, name):
    """``(first, lines)`` of range ``index``: ``lines = min(block, rows - first)`` (combinational)."""
    first = Signal(ROW_BITS + 1, name=f"{name}_first")
    lines = Signal(range(block + 1), name=f"{name}_lines")
    m.d.comb += first.eq(range_first(index, block))
    with m.If(rows - first >= block):
        m.d.comb += lines.eq(block)
    with m.Else():
        m.d.comb += lines.eq(rows - first)
    return first, lines
