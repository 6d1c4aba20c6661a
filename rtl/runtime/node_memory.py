"""A node's local data memory: the lines of the global data space the node owns or has fetched."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..lib.counters import COUNTER_BITS, count_saturating
from ..net.packet import LINE_BITS, ROW_BITS, MemWrite
from ..registration import NO_GOLDEN, Param, Parameterized, register_block

__all__ = ["NodeMemory"]


class NodeMemory(Parameterized, wiring.Component):
    """The local data memory behind a runtime node: one 448-bit line per global line address.

    It spans the whole global data space, so that lines fetched by RDMA land at their own
    address next to the node's own lines and are never evicted. Writes come from the data
    handler (``wr``, always accepted) and from the host (``load``, accepted in cycles without
    a handler write). Reads: ``rd_cmd``/``rd_data`` for the RDMA responder (in order, one per
    cycle, held while ``rd_data`` waits), and ``kernel_addr``/``kernel_data`` for the kernels
    (one cycle latency, no handshake). An address at or past ``lines`` is ignored by writes
    and reads as zero (never aliased); each such write (``wr`` or ``load``) and ``rd_cmd`` read
    counts once in ``range_errors`` (the kernel port, which has no handshake, is not counted:
    the kernels refuse such columns themselves).

    Parameters
    ----------
    lines : int
        Lines held, 2 to 2**24.

    Attributes
    ----------
    wr : In(stream.Signature(MemWrite, always_ready=True))
        The data handler's writes (valid-only: always taken).
    load : In(stream.Signature(MemWrite))
        The host's writes (taken in cycles without a ``wr``).
    rd_cmd : In(stream.Signature(24))
    rd_data : Out(stream.Signature(448))
    kernel_addr : In(24)
    kernel_data : Out(448)
    written : Out(stream.Signature(MemWrite, always_ready=True))
        Every write, as it is made (for a kernel that keeps its own copy): a valid-only event.
    range_errors : Out(32)
        Refused writes and reads (above); saturates at 2**32 - 1, zeroed by reset.

    Notes
    -----
    A write is visible to reads issued in the next cycle. Latency: 1 cycle on both read ports.
    """

    PARAMS = (
        Param("lines", int, 256, "lines held (global line addresses)", minimum=2, maximum=1 << 24),
    )

    def __init__(self, *, lines=256):
        super().__init__({
            "wr": In(stream.Signature(MemWrite, always_ready=True)),
            "load": In(stream.Signature(MemWrite)),
            "rd_cmd": In(stream.Signature(ROW_BITS)),
            "rd_data": Out(stream.Signature(LINE_BITS)),
            "kernel_addr": In(ROW_BITS),
            "kernel_data": Out(LINE_BITS),
            "written": Out(stream.Signature(MemWrite, always_ready=True)),
            "range_errors": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        lines = self._lines
        m.submodules.memory = memory = Memory(shape=LINE_BITS, depth=lines, init=[])
        write = memory.write_port()
        m.d.comb += self.load.ready.eq(~self.wr.valid)
        source = Signal(MemWrite)
        with m.If(self.wr.valid):
            m.d.comb += source.eq(self.wr.payload)
        with m.Else():
            m.d.comb += source.eq(self.load.payload)
        m.d.comb += [
            write.addr.eq(source.line),
            write.data.eq(source.data),
            write.en.eq((self.wr.valid | self.load.valid) & (source.line < lines)),
            self.written.valid.eq(write.en),
            self.written.payload.eq(source),
        ]

        # A load waits while a handler write takes the port (load.ready is low then).
        refused = [self.wr.valid & (self.wr.payload.line >= lines),
                   self.load.valid & ~self.wr.valid & (self.load.payload.line >= lines),
                   self.rd_cmd.valid & self.rd_cmd.ready & (self.rd_cmd.payload >= lines)]

        # RDMA reads: the read port's output register is the pipeline stage, held while rd_data waits.
        rdma = memory.read_port()
        advance = Signal()
        in_range = Signal()
        m.d.comb += [
            advance.eq(~self.rd_data.valid | self.rd_data.ready),
            rdma.addr.eq(self.rd_cmd.payload),
            rdma.en.eq(advance),
            self.rd_cmd.ready.eq(advance),
            self.rd_data.payload.eq(Mux(in_range, rdma.data, 0)),
        ]
        with m.If(advance):
            m.d.sync += [self.rd_data.valid.eq(self.rd_cmd.valid), in_range.eq(self.rd_cmd.payload < lines)]

        kernel = memory.read_port()
        kernel_in_range = Signal()
        m.d.comb += [
            kernel.addr.eq(self.kernel_addr),
            self.kernel_data.eq(Mux(kernel_in_range, kernel.data, 0)),
        ]
        m.d.sync += kernel_in_range.eq(self.kernel_addr < lines)
        count_saturating(m, self.range_errors, refused)
        return m


register_block(
    "runtime_node_memory", NodeMemory, family="runtime",
    summary="A runtime node's local data memory: handler and host writes, RDMA and kernel read ports.",
    golden=NO_GOLDEN("plumbing: a line memory, a read returns the last write"),
    drops={"range_errors": "writes (wr or load) at or past lines, ignored; RDMA reads there, answered 0"},
)
