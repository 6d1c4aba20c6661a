"""Address walks over :class:`TiledGemm`'s operand buffers: nested wrapping counters, the
row-major fill counters, and the prefetching memory reader that streams one word per cycle."""

from amaranth.hdl import Mux, Signal
from amaranth.lib import stream

__all__ = ["counters", "row_major", "reader"]


def counters(m, name, step, bounds, clear=None):
    """Nested wrapping counters, innermost first: ``bounds`` is a list of ``(limit, largest limit)``.

    Returns the counters and the carry out of the outermost one (every counter at its last
    value). ``clear`` (optional) sets them all to 0.
    """
    chain, carry = [], step
    for index, (limit, largest) in enumerate(bounds):
        counter = Signal(range(max(largest, 2)), name=f"{name}_{index}")
        at_end = counter == limit - 1
        with m.If(carry):
            m.d.sync += counter.eq(Mux(at_end, 0, counter + 1))
        if clear is not None:
            with m.If(clear):
                m.d.sync += counter.eq(0)
        chain.append(counter)
        carry = carry & at_end
    return chain, carry


def row_major(m, name, step, clear, width, rows, lanes, tiles):
    """Counters of a row-major ``rows x width`` fill cut into ``lanes``-wide tiles.

    Returns ``(lane, tile, row, last)``: the element's lane and tile within its row, the row,
    and whether it is the last element of the matrix.
    """
    lane = Signal(range(max(lanes, 2)), name=f"{name}_lane")
    tile = Signal(range(max(tiles, 2)), name=f"{name}_tile")
    row = Signal.like(rows, name=f"{name}_row")
    row_end = tile * lanes + lane == width - 1
    with m.If(step):
        m.d.sync += lane.eq(Mux(row_end | (lane == lanes - 1), 0, lane + 1))
        m.d.sync += tile.eq(Mux(row_end, 0, Mux(lane == lanes - 1, tile + 1, tile)))
        with m.If(row_end):
            m.d.sync += row.eq(row + 1)
    with m.If(clear):
        m.d.sync += [lane.eq(0), tile.eq(0), row.eq(0)]
    return lane, tile, row, row_end & (row == rows - 1)


def reader(m, name, memory, address, count):
    """Stream ``memory`` words at the addresses a counter walk produces, one per cycle.

    ``address(step)`` builds the counters (advancing on ``step``) and returns ``(addr, done)``,
    or ``(addr, done, pad)`` for block floating point words: a word read with ``pad`` leaves with
    every mantissa 0 and its exponents kept. ``count`` starts a walk. The read port's data holds
    while not enabled, so the stream payload can be the port's output itself: a word leaves one
    cycle after its read, at full rate.
    """
    port = memory.read_port()
    out = stream.Signature(memory.shape).create(path=(name,))
    pending = Signal(name=f"{name}_pending")
    issue = pending & (~out.valid | out.ready)
    addr, done, *pad = address(issue)
    m.d.comb += [port.en.eq(issue), port.addr.eq(addr)]
    if pad:
        # The pad flag is registered beside the read, so it stays with the word it marks.
        padding = Signal(name=f"{name}_padding")
        with m.If(issue):
            m.d.sync += padding.eq(pad[0])
        for lane in range(memory.shape.length):
            m.d.comb += [out.payload[lane].mantissa.eq(Mux(padding, 0, port.data[lane].mantissa)),
                         out.payload[lane].exponent.eq(port.data[lane].exponent)]
    else:
        m.d.comb += out.payload.eq(port.data)
    with m.If(issue):
        m.d.sync += out.valid.eq(1)
        with m.If(done):
            m.d.sync += pending.eq(0)
    with m.Elif(out.ready):
        m.d.sync += out.valid.eq(0)
    with m.If(count):
        m.d.sync += pending.eq(1)
    return out
