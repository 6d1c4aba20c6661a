"""A synchronous stream FIFO."""

from amaranth.hdl import Module
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import NO_DROPS, NO_GOLDEN, Param, Parameterized, register_block

__all__ = ["StreamFIFO"]


class StreamFIFO(Parameterized, wiring.Component):
    """First-in first-out queue between two streams, on :class:`amaranth.lib.fifo.SyncFIFOBuffered`.

    Parameters
    ----------
    width : int
        Payload width in bits, 1 to 4096.
    depth : int
        Number of entries, 2 to 65536. Deep FIFOs map to block RAM.

    Attributes
    ----------
    i : In(stream.Signature(width))
        Write side; ``i.ready`` is low while the FIFO is full.
    o : Out(stream.Signature(width))
        Read side, registered (the read data comes from a register, not the memory port).
    level : Out(range(depth + 1))
        Number of entries currently held.

    Notes
    -----
    Latency: 1 cycle from an accepted input to ``o.valid`` on an empty FIFO.
    Throughput: 1 transfer per cycle, reads and writes in the same cycle.
    """

    PARAMS = (
        Param("width", int, 32, "payload width in bits", minimum=1, maximum=4096),
        Param("depth", int, 16, "number of entries", minimum=2, maximum=65536),
    )

    latency = 1
    throughput = 1

    def __init__(self, *, width=32, depth=16):
        super().__init__({
            "i": In(stream.Signature(width)),
            "o": Out(stream.Signature(width)),
            "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.queue = queue = fifo.SyncFIFOBuffered(width=self._width, depth=self._depth)
        wiring.connect(m, wiring.flipped(self.i), queue.w_stream)
        wiring.connect(m, queue.r_stream, wiring.flipped(self.o))
        m.d.comb += self.level.eq(queue.level)
        return m


register_block(
    "stream_fifo", StreamFIFO, family="bus",
    summary="Synchronous stream FIFO (lib.fifo.SyncFIFOBuffered) with an occupancy output.",
    golden=NO_GOLDEN("plumbing: a FIFO, the output stream is the input stream"),
    drops=NO_DROPS,
)
