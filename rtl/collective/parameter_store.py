"""The delayed-update parameters in disaggregated memory: one AXI4 read serves every leaf that asked."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4Signature
from ..bus.axi_burst_reader import AXIBurstReader
from ..lib.counters import saturating_count
from ..net.packet import LINE_BITS, NODE_BITS
from ..registration import NO_GOLDEN, Param, Parameterized, register_block
from .fetch_slots import lookup, round_robin
from .reduction_table import COLLECTIVE_COUNTER_BITS, PARTITION_BITS

__all__ = ["ParameterStore", "BEAT_BYTES", "request_layout", "line_layout"]

DATA_WIDTH = 512  # one 448-bit line per 512-bit beat (the top 64 bits unused)
BEAT_BYTES = DATA_WIDTH // 8


def request_layout():
    """A leaf's fetch of a partition's parameters: ``{"leaf": 4, "partition": 10}``."""
    return data.StructLayout({"leaf": NODE_BITS, "partition": PARTITION_BITS})


def line_layout(leaves):
    """One line read from memory: the ``leaves`` it answers (a mask), its partition, chunk and data."""
    return data.StructLayout({"leaves": leaves, "partition": PARTITION_BITS, "chunk": 8, "last": 1,
                              "data": LINE_BITS})


class ParameterStore(Parameterized, wiring.Component):
    """Parameter lines in memory behind an AXI4 manager port, read once for all their requesters.

    The request buffering of the seed's Section 7.3.4: a leaf's fetch of partition ``p`` sets bit
    ``leaf`` of ``p``'s requester mask; a partition with requesters is read from memory in one
    command of ``chunks`` beats (line ``c`` at byte ``base + (p * chunks + c) * 64``, a 448-bit line
    in the low bits of a 512-bit beat), and each line goes out once on ``o`` with the mask of
    every leaf that had asked by the time the read started. Fetches that arrive during the read
    wait for the partition's next read. Partitions with requesters are read in round robin, one
    read at a time. The line on ``o`` is what a GCU would send to each leaf of the mask (one
    packet per leaf, or a multicast); this block is the memory side only.

    Parameters
    ----------
    leaves : int
        Leaves that fetch (1 to 15).
    partitions : int
        Partitions (1 to 64).
    chunks : int
        Lines per partition (1 to 256).
    address_width : int
        AXI byte address width (12 to 64).
    base : int
        Byte address of partition 0's first line (a multiple of 64).

    Attributes
    ----------
    requests : In(stream.Signature(request_layout()))
        Fetches; always ready. A leaf or partition out of range is dropped and counted.
    o : Out(stream.Signature(line_layout(leaves)))
        The lines read, in order; ``last`` marks a partition's final line.
    m_axi : Out(AXI4Signature(address_width, 512, 1))
        The memory (read channels only).
    reads : Out(16)
        Partition reads issued to memory (saturating).
    joined : Out(16)
        Fetches that joined a partition already asked for (saturating): each is answered by a read
        another fetch asked for, without a memory access of its own.
    bad_requests : Out(16)
        Fetches dropped: a leaf or a partition out of range (saturating).
    error : Out(1)
        Sticky: a read response was SLVERR or DECERR (the lines then carry zeros; see the reader).
    """

    PARAMS = (
        Param("leaves", int, 3, "leaves that fetch", minimum=1, maximum=15),
        Param("partitions", int, 8, "partitions", minimum=1, maximum=64),
        Param("chunks", int, 4, "448-bit lines per partition", minimum=1, maximum=256),
        Param("address_width", int, 32, "AXI byte address width", minimum=12, maximum=64),
        Param("base", int, 0, "byte address of partition 0 (a multiple of 64)", minimum=0),
    )

    @classmethod
    def check_params(cls, values):
        """The base is beat-aligned and the store fits the address space."""
        if values["base"] % BEAT_BYTES:
            raise ValueError(f"base must be a multiple of {BEAT_BYTES}")
        end = values["base"] + values["partitions"] * values["chunks"] * BEAT_BYTES
        if end > 1 << values["address_width"]:
            raise ValueError("base + partitions * chunks * 64 must fit address_width")

    def __init__(self, *, leaves=3, partitions=8, chunks=4, address_width=32, base=0):
        super().__init__({
            "requests": In(stream.Signature(request_layout())),
            "o": Out(stream.Signature(line_layout(leaves))),
            "m_axi": Out(AXI4Signature(address_width=address_width, data_width=DATA_WIDTH)),
            "reads": Out(COLLECTIVE_COUNTER_BITS),
            "joined": Out(COLLECTIVE_COUNTER_BITS),
            "bad_requests": Out(COLLECTIVE_COUNTER_BITS),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        leaves, partitions, chunks = self._leaves, self._partitions, self._chunks
        m.submodules.reader = reader = AXIBurstReader(
            address_width=self._address_width, data_width=DATA_WIDTH, max_outstanding=2,
            length_width=chunks.bit_length())
        wiring.connect(m, wiring.flipped(self.m_axi), reader.m_axi)
        m.d.comb += [self.error.eq(reader.error), reader.clear.eq(0), reader.cancel.eq(0)]

        # Requester masks, one per partition; a partition's is taken (and cleared) when its read starts.
        asked = [Signal(leaves, name=f"asked{p}") for p in range(partitions)]
        request = self.requests.payload
        m.d.comb += self.requests.ready.eq(1)
        arrived = self.requests.valid
        bad = arrived & ((request.leaf >= leaves) | (request.partition >= partitions))
        take = arrived & ~bad
        saturating_count(m, self.bad_requests, bad)

        # One read at a time: ``busy`` from the grant to the last line's hand-off.
        busy = Signal()
        current = Signal(range(partitions), init=partitions - 1)  # so the first grant goes to 0
        mask = Signal(leaves)
        wanted = Signal(partitions)
        m.d.comb += wanted.eq(Cat(a.any() for a in asked))
        chosen = round_robin(m, wanted, current)
        grant = ~busy & wanted.any()
        cmd = reader.cmd
        with m.If(grant):
            m.d.sync += [busy.eq(1), current.eq(chosen), mask.eq(lookup(asked, chosen)), cmd.valid.eq(1),
                         cmd.payload.address.eq(self._base + chosen * (chunks * BEAT_BYTES)),
                         cmd.payload.length.eq(chunks)]
        with m.Elif(cmd.ready):
            m.d.sync += cmd.valid.eq(0)
        saturating_count(m, self.reads, cmd.valid & cmd.ready)
        # A fetch joins a read still to start; one in the cycle its partition's read starts waits
        # for the next read, which it asked for.
        starting = grant & (chosen == request.partition)
        saturating_count(m, self.joined, take & lookup(asked, request.partition).any() & ~starting)
        for p in range(partitions):
            cleared = grant & (chosen == p)
            new = take & (request.partition == p)
            m.d.sync += asked[p].eq((asked[p] & ~cleared.replicate(leaves))
                                    | (new.replicate(leaves) & (1 << request.leaf)[:leaves]))

        chunk = Signal(8)
        beat = reader.data
        out = self.o.payload
        m.d.comb += [self.o.valid.eq(beat.valid), beat.ready.eq(self.o.ready),
                     out.leaves.eq(mask), out.partition.eq(current), out.chunk.eq(chunk),
                     out.last.eq(beat.payload.last), out.data.eq(beat.payload.data[:LINE_BITS])]
        with m.If(beat.valid & beat.ready):
            m.d.sync += chunk.eq(chunk + 1)
            with m.If(beat.payload.last):
                m.d.sync += [chunk.eq(0), busy.eq(0)]
        return m


register_block(
    "parameter_store", ParameterStore, family="collective",
    drops={"bad_requests": "fetches of a leaf or partition out of range"},
    summary="Delayed-update parameters in memory behind AXI4: one read of a partition serves every leaf "
            "that asked for it (request buffering).",
    golden=NO_GOLDEN("a memory: the lines read are the lines stored"),
)
