"""The aggregation pipeline as a Vitis RTL kernel: one AXI4 master, AXI4-Lite control (``ap_ctrl_hs``)."""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4LiteSignature, AXI4Signature
from ..bus.axi_lite_control import AXILiteControl
from ..bus.width_converter import StreamWidthConverter
from ..optim.memory_port import MemoryPort
from ..registration import Param, Parameterized, register_block
from .aggregation_pipeline import B_BANK_CHOICES, COUNTERS, LANE_CHOICES, AggregationPipeline, Mode
from .packet import packet_bits

__all__ = ["AggregationKernel", "KERNEL_FEATURES", "ERROR_READ", "ERROR_WRITE"]

KERNEL_FEATURES = (1, 2, 4, 8, 16)
ERROR_READ, ERROR_WRITE = 1 << 0, 1 << 1
ERROR_READ_RESP_SHIFT, ERROR_WRITE_RESP_SHIFT = 8, 10
CYCLE_BITS = 64

_ARGUMENTS = (
    ("b_address", 64, "B: b_rows rows of features binary32 values, one AXI beat each"),
    ("b_rows", 32, "rows of B (the pipeline's n_cols)"),
    ("packets_address", 64, "the task packets, packet_bits / 8 bytes each"),
    ("packet_total", 32, "packets to stream"),
    ("out_address", 64, "OUT is written here: out_rows physical rows, one beat each"),
    ("out_rows", 32, "rows of OUT (the pipeline's n_rows)"),
    ("flags", 32, "bit 0: ReLU on the drain"),
)
_STATUS = tuple((name, 32, f"the pipeline's {name} of the last run") for name in COUNTERS) + (
    ("error", 32, "bit 0 read error, bit 1 write error (SLVERR/DECERR), bits 8-9 and 10-11 their responses"),
    ("cycles", CYCLE_BITS, "cycles of the last run, from the start to done"),
)


class AggregationKernel(Parameterized, wiring.Component):
    """A Vitis-style RTL kernel around :class:`~.aggregation_pipeline.AggregationPipeline`.

    **Flow.** The host writes the arguments and starts the kernel (``ap_ctrl_hs``). A run

    1. zeroes OUT and the pipeline's counters (``clear_start``: ``ceil(rows / lanes)`` cycles);
    2. reads ``b_rows`` rows of B from ``b_address`` into the pipeline (one AXI beat per row:
       the data width is ``32 features`` bits, 512 for F = 16), then ``packet_total`` packets
       from ``packets_address`` (beats gathered into ``packet_bits``-bit packets); both reads
       are queued at the start and stream back to back;
    3. once every packet is in, drains OUT (physical rows 0 .. ``out_rows - 1``, ReLU when
       ``flags`` bit 0 is set) to ``out_address``, one beat per row;
    4. reports ``done``; the status registers hold the pipeline's counters, the bus errors
       and the run's cycles.

    Buffers must be aligned to ``features * 4`` bytes. A bus error (SLVERR or DECERR) sets the
    ``error`` register; reads then return zeros (the pipeline counts what it makes of them),
    no further write starts, and the run still finishes. The register map is
    :meth:`register_map`.

    Parameters
    ----------
    lanes, rows, cols, row_bits, col_bits, b_banks, weighted
        The pipeline's (:class:`~.aggregation_pipeline.AggregationPipeline`).
    features : {1, 2, 4, 8, 16}
        Elements per row; the AXI data width is ``32 features`` bits (at most 512, so that a
        packet is one beat or several).
    max_burst, max_outstanding : int
        The DMA engines' burst length in beats and bursts in flight.

    Attributes
    ----------
    s_axi_control : In(AXI4LiteSignature(12, 32))
    m_axi_gmem : Out(AXI4Signature(64, 32 features))
    irq : Out(1)
        The Vitis ``interrupt``.
    """

    PARAMS = (
        Param("lanes", int, 4, "nonzeros per packet and OUT banks", choices=LANE_CHOICES),
        Param("features", int, 4, "binary32 elements per row (AXI data width 32 x features)",
              choices=KERNEL_FEATURES),
        Param("rows", int, 64, "OUT capacity in rows", minimum=1, maximum=1 << 24),
        Param("cols", int, 64, "B capacity in rows", minimum=1, maximum=1 << 24),
        Param("row_bits", int, 16, "packet row id width", minimum=1, maximum=24),
        Param("col_bits", int, 16, "packet column id width", minimum=1, maximum=24),
        Param("b_banks", int, 1, "1 (a B read port per lane) or cyclic B banks >= lanes",
              choices=B_BANK_CHOICES),
        Param("weighted", bool, False, "weighted packets (row, col, value): OUT += value * B"),
        Param("max_burst", int, 16, "longest burst in beats", minimum=1, maximum=256),
        Param("max_outstanding", int, 4, "bursts in flight per direction", minimum=2, maximum=64),
    )

    def __init__(self, *, lanes=4, features=4, rows=64, cols=64, row_bits=16, col_bits=16, b_banks=1,
                 weighted=False, max_burst=16, max_outstanding=4):
        self.pipeline = AggregationPipeline(lanes=lanes, features=features, rows=rows, cols=cols,
                                            row_bits=row_bits, col_bits=col_bits, b_banks=b_banks,
                                            weighted=weighted)
        self.data_width = 32 * features
        self.packet_bits = packet_bits(lanes, row_bits, col_bits, weighted)
        self._registers = {"arguments": _ARGUMENTS, "status": _STATUS}
        super().__init__({
            "s_axi_control": In(AXI4LiteSignature(address_width=12, data_width=32)),
            "m_axi_gmem": Out(AXI4Signature(address_width=64, data_width=self.data_width)),
            "irq": Out(1),
        })

    def register_map(self):
        """The AXI4-Lite register map (see :meth:`rtl.bus.axi_lite_control.AXILiteControl.register_map`)."""
        control = AXILiteControl(**self._registers)
        control._MustUse__silence = True  # built only to describe the map
        return control.register_map()

    def elaborate(self, platform):
        m = Module()
        m.submodules.pipeline = pipeline = self.pipeline
        m.submodules.control = control = AXILiteControl(**self._registers)
        wiring.connect(m, wiring.flipped(self.s_axi_control), control.s_axi_control)
        m.d.comb += self.irq.eq(control.irq)
        args = control.args
        m.submodules.port = port = MemoryPort(
            read_tensors=1, write_tensors=1, address_width=64, data_width=self.data_width,
            max_burst=self._max_burst, max_outstanding=self._max_outstanding, read_buffer=2,
            write_buffer=4 * self._max_burst, queue_depth=2, write_gate=self._max_burst)
        wiring.connect(m, port.m_axi, wiring.flipped(self.m_axi_gmem))
        beats_per_packet = self.packet_bits // self.data_width if self.packet_bits > self.data_width else 1
        m.submodules.gather = gather = StreamWidthConverter(
            input_width=self.data_width, output_width=self.packet_bits, element_width=32)

        # ---- The run's phases. ----
        idle, clearing, streaming, draining, finishing = range(5)
        state = Signal(range(5))
        cycles = Signal(CYCLE_BITS)
        b_left = Signal(32)  # B beats still to come
        packets_left = Signal(32)  # packets still to hand to the pipeline
        commands = Signal(2)  # read commands issued: 0, 1 (B), 2 (both)
        write_issued = Signal()
        cleared = Signal()  # the clear strobe has been taken (the pipeline left RUN)
        m.d.comb += [pipeline.n_rows.eq(args.out_rows), pipeline.n_cols.eq(args.b_rows),
                     pipeline.relu.eq(args.flags[0]), control.idle.eq(state == idle),
                     port.clear.eq(control.start), port.halt.eq(port.read_error | port.write_error)]
        with m.If(state != idle):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(control.start):
            m.d.sync += [state.eq(clearing), cycles.eq(0), b_left.eq(args.b_rows),
                         packets_left.eq(args.packet_total), commands.eq(0), write_issued.eq(0),
                         cleared.eq(0)]

        # 1. Clear: one strobe in RUN, then wait until the sweep ends (RUN again).
        m.d.comb += pipeline.clear_start.eq((state == clearing) & ~cleared & (pipeline.mode == Mode.RUN))
        with m.If(pipeline.clear_start):
            m.d.sync += cleared.eq(1)
        with m.If((state == clearing) & cleared & (pipeline.mode == Mode.RUN)):
            m.d.sync += state.eq(streaming)

        # 2. The two read commands, B then packets.
        read = port.read_cmd
        m.d.comb += [read.valid.eq((state == streaming) & (commands != 2)), read.payload.tensor.eq(0),
                     read.payload.strobe.eq(Const(-1, len(read.payload.strobe))),
                     read.payload.address.eq(Mux(commands == 0, args.b_address, args.packets_address)),
                     read.payload.length.eq(Mux(commands == 0, args.b_rows,
                                                args.packet_total * beats_per_packet))]
        with m.If(read.valid & read.ready):
            m.d.sync += commands.eq(commands + 1)
        beats = port.read_data.t0
        load, packets = pipeline.b_load, pipeline.packets
        to_b = b_left != 0
        b_address = Signal(32)
        with m.If(control.start):
            m.d.sync += b_address.eq(0)
        m.d.comb += [load.valid.eq(beats.valid & to_b), load.payload.addr.eq(b_address),
                     load.payload.data.as_value().eq(beats.payload),
                     gather.i.valid.eq(beats.valid & ~to_b), gather.i.payload.as_value().eq(beats.payload),
                     beats.ready.eq(Mux(to_b, load.ready, gather.i.ready))]
        with m.If(load.valid & load.ready):
            m.d.sync += [b_left.eq(b_left - 1), b_address.eq(b_address + 1)]
        m.d.comb += [packets.valid.eq(gather.o.valid), packets.payload.as_value().eq(gather.o.payload),
                     gather.o.ready.eq(packets.ready)]
        with m.If(packets.valid & packets.ready):
            m.d.sync += packets_left.eq(packets_left - 1)
        with m.If((state == streaming) & (commands == 2) & (b_left == 0) & (packets_left == 0)):
            m.d.sync += state.eq(draining)

        # 3. The drain: the write command, the strobe, rows to beats.
        rows = Mux(args.out_rows < self._rows, args.out_rows, self._rows)
        write = port.write_cmd
        m.d.comb += [write.valid.eq((state == draining) & ~write_issued), write.payload.tensor.eq(0),
                     write.payload.address.eq(args.out_address), write.payload.length.eq(rows),
                     write.payload.strobe.eq(Const(-1, len(write.payload.strobe))),
                     pipeline.drain_start.eq(write.valid & write.ready)]
        with m.If(write.valid & write.ready):
            m.d.sync += write_issued.eq(1)
        out = port.write_data.t0
        m.d.comb += [out.valid.eq(pipeline.drain.valid),
                     out.payload.eq(pipeline.drain.payload.data.as_value()),
                     pipeline.drain.ready.eq(out.ready)]
        with m.If((state == draining) & write_issued & (pipeline.mode == Mode.RUN) & ~port.busy):
            m.d.sync += state.eq(finishing)
        m.d.comb += [control.done.eq(state == finishing), control.ready.eq(state == finishing)]
        with m.If(state == finishing):
            m.d.sync += state.eq(idle)

        # ---- Status. ----
        status = control.status
        for name in COUNTERS:
            m.d.comb += getattr(status, name).eq(getattr(pipeline, name))
        m.d.comb += [status.error.eq(port.read_error * ERROR_READ | port.write_error * ERROR_WRITE
                                     | (port.read_resp << ERROR_READ_RESP_SHIFT)
                                     | (port.write_resp << ERROR_WRITE_RESP_SHIFT)),
                     status.cycles.eq(cycles)]
        return m


register_block(
    "aggregation_kernel", AggregationKernel, family="aggregate",
    summary="The aggregation pipeline as a Vitis RTL kernel: B, packets and OUT over one AXI4 master.",
    golden="golden.aggregate.pipeline:execute",
    drops={"s_axi_control": "status registers header_errors, range_errors, bank_errors (the pipeline's) and "
                             "error (AXI read/write errors: reads return zeros, writes stop)"},
)
