"""Pieces the runtime units share: the configuration port, queues, sealing and range arithmetic."""

from amaranth.hdl import Cat, Const, Mux, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import Out

from .packet import NODE_BITS, PACKET_BITS, RANGE_BITS, ROW_BITS, checksum

__all__ = ["ConfigSignature", "Queue", "sealed", "times_constant", "range_first", "range_lines",
           "merge", "pulse_count", "count_saturating", "saturating_counter"]


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


class Queue:
    """A :class:`~amaranth.lib.fifo.SyncFIFOBuffered` of ``shape`` items as two streams of that shape.

    ``w`` (write side) and ``r`` (read side) are ``stream.Interface`` objects whose payloads
    are views of ``shape``; ``level`` counts the entries.

    ``credited=True`` is for a queue filled by a sender that holds one credit per entry (a
    credit returns when an entry is read): it gets one more entry than ``depth``, because a
    ``SyncFIFOBuffered`` refuses a write while its last entry moves to the output register
    (its ``w_rdy`` is ``level < depth`` only once that move is done), and a credited sender
    may write exactly then. Such a sender writes on its credit, not on ``w.ready``, so a write
    the FIFO refuses would be lost: ``overflow`` (credited queues only; constant 0 otherwise) is a
    sticky flag set by that write, for the block to export as a drop flag. A sender that keeps
    to its credits never sets it.
    """

    def __init__(self, m, name, shape, depth, *, credited=False):
        self.fifo = SyncFIFOBuffered(width=Shape.cast(shape).width, depth=depth + int(credited))
        m.submodules[name] = self.fifo
        self.w = stream.Signature(shape).flip().create()
        self.r = stream.Signature(shape).create()
        m.d.comb += [
            self.fifo.w_data.eq(self.w.payload), self.fifo.w_en.eq(self.w.valid),
            self.w.ready.eq(self.fifo.w_rdy),
            self.r.payload.eq(self.fifo.r_data), self.r.valid.eq(self.fifo.r_rdy),
            self.fifo.r_en.eq(self.r.ready),
        ]
        self.level = self.fifo.level
        self.overflow = Signal(name=f"{name}_overflow")
        if credited:
            with m.If(self.w.valid & ~self.fifo.w_rdy):
                m.d.sync += self.overflow.eq(1)


def sealed(packet):
    """``packet`` (512 bits) with its ``check`` byte set so that the XOR of its bytes is zero."""
    value = packet.as_value() if hasattr(packet, "as_value") else packet
    clear = Cat(value[:24], Const(0, 8), value[32:PACKET_BITS])
    return Cat(value[:24], checksum(clear), value[32:PACKET_BITS])


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


def merge(m, name, inputs, out):
    """Round-robin merge of the streams ``inputs`` into ``out`` (combinational, no buffering).

    A waiting input is served within ``len(inputs)`` transfers of ``out``.
    """
    turn = Signal(range(len(inputs)), name=f"{name}_turn")
    chosen = Signal(range(len(inputs)), name=f"{name}_chosen")
    # The first valid input at or after the turn, else the first valid one.
    for phase in (0, 1):  # later assignments win: phase 1 overrides
        for index in reversed(range(len(inputs))):
            later = (turn <= index) if phase and index < len(inputs) - 1 else 1
            condition = inputs[index].valid & later
            with m.If(condition):
                m.d.comb += chosen.eq(index)
    for index, source in enumerate(inputs):
        with m.If(chosen == index):
            m.d.comb += [out.valid.eq(source.valid), out.payload.eq(source.payload),
                         source.ready.eq(out.ready)]
    with m.If(out.valid & out.ready):
        m.d.sync += turn.eq(Mux(chosen == len(inputs) - 1, 0, chosen + 1))


def pulse_count(*pulses):
    """Number of high bits among ``pulses`` (for a counter fed by several events per cycle)."""
    total = Const(0, 1)
    for pulse in pulses:
        total = total + pulse
    return total


def count_saturating(m, counter, events):
    """``counter += sum(events)`` each cycle, stopping at ``2**len(counter) - 1``: a counter at its
    limit reads "at least this many", never a small wrapped number. ``events`` are pulses or counts."""
    full = counter + pulse_count(*events)
    limit = (1 << len(counter)) - 1
    m.d.sync += counter.eq(Mux(full > limit, limit, full))


def saturating_counter(m, name, width, increment):
    """A ``width``-bit event counter, zero after reset, adding ``increment`` each cycle and saturating
    (:func:`count_saturating`). Returns the counter (a ``Signal``)."""
    counter = Signal(width, name=name)
    count_saturating(m, counter, [increment])
    return counter
