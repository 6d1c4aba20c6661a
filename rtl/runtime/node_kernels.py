"""The kernels attached to a runtime node in the cluster: GEMM, sparse x dense, ReLU, aggregation."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..aggregate.aggregation_pipeline import AggregationPipeline, Mode
from ..aggregate.packet import TASK_AGGREGATION, packet_layout
from ..lib.counters import COUNTER_BITS, count_saturating
from ..net.packet import ITEMS, LINE_BITS, ROW_BITS, MemWrite, Packet, TaskId
from ..registration import Param, Parameterized, register_block
from .node_gemm import NodeGemm, lowest_set_bit

__all__ = ["NodeKernels", "KERNEL_MASK", "kernel_mask", "row_write_layout", "read_answer_layout",
           "KERNEL_COUNTERS"]

# Kernel ids implemented here: 2 (integer sparse x dense), 5 (ReLU), 6 (float32 aggregation), and
# with the GEMM unit 1 (float32 dense GEMM).
KERNEL_MASK = (1 << 2) | (1 << 5) | (1 << 6)


def kernel_mask(aggregation, gemm=False):
    """The kernel ids a :class:`NodeKernels` implements (without the pipeline: 2 and 5; 1 with the GEMM)."""
    return (KERNEL_MASK if aggregation else KERNEL_MASK & ~(1 << 6)) | (1 << 1 if gemm else 0)


# Error counters (32 bits, saturating), in port order.
KERNEL_COUNTERS = ("range_errors", "bank_errors")


def row_write_layout():
    return data.StructLayout({"row": ROW_BITS, "data": LINE_BITS})


def read_answer_layout():
    """A host read's answer: the row's ``data``, or ``error`` set and data 0 for a row that is not there."""
    return data.StructLayout({"data": LINE_BITS, "error": 1})


class NodeKernels(Parameterized, wiring.Component):
    """A node's compute units for the runtime's tasks, and its output memory.

    With ``B`` = line ``col`` of the node's data memory and ``OUT`` this block's memory of
    ``rows`` lines of ``features`` 32-bit words, for every occupied slot of a task (the semantics
    of :mod:`golden.runtime.kernels`):

    * id 6, **aggregation**: ``OUT[row] = fl(OUT[row] + fl(value * B[col]))`` per word in float32,
      on the :class:`~rtl.aggregate.aggregation_pipeline.AggregationPipeline` (weighted, 4 lanes,
      one task per cycle, slot *i* on OUT bank ``row mod 4 == i``). The pipeline keeps its own copy
      of B, written by ``b_load`` (every write into the node's data memory: the host's lines and the
      lines fetched by RDMA, before the tasks that read them), and its own OUT, which starts at +0
      and is drained (added rows copied, then zeroed) into the output memory before anything else
      touches that memory: a task of another kernel, a host read or a host write. A task counts as
      done when the pipeline takes it (its results are in the pipeline, which the drain waits for).
    * id 1, dense GEMM (with ``gemm``): the task's runnable slots' rows of OUT times ``W``, in
      place, on a :class:`~rtl.runtime.node_gemm.NodeGemm` (``W`` = ``K`` lines of B from the
      first runnable slot's ``col``, its ``value`` = ``K | N << 8``);
    * id 2, integer sparse x dense: ``OUT[row] = OUT[row] + value * B[col]`` per word, mod 2**32;
    * id 5, ReLU: every word of ``OUT[row]`` with its sign bit set becomes 0.

    **Out-of-range input is refused and counted, never aliased**: a task slot whose row is not
    below ``rows``, or (ids 1, 2 and 6, which read B) whose column is not, or (id 1) whose ``K`` or
    ``N`` is not in 1 .. ``features`` or whose ``W`` lines pass ``rows``, is skipped; a host write
    or read of a row not below ``rows`` writes nothing (the read is answered with ``error`` set
    and data 0); a ``b_load`` line not below ``rows`` is ignored. Each counts once in
    ``range_errors``. An aggregation slot whose row is not in its output bank (``row mod 4`` is
    not the slot, the pipeline's rule) is skipped and counted in ``bank_errors``. A task is
    reported done whatever its slots.

    Ids 2 and 5 run one item at a time (3 cycles each), a development kernel; id 6 runs at the
    pipeline's line rate.

    Parameters
    ----------
    features : int
        32-bit words per row, 1 to 14.
    rows : int
        Output memory lines (global row addresses), 4 to 2**24.
    aggregation : bool
        Attach the aggregation pipeline (id 6). Without it (a smaller simulation, for runs of ids
        2 and 5 only) the runtime must not be configured with id 6.
    gemm : bool
        Attach the dense GEMM unit (id 1).

    Attributes
    ----------
    task : In(stream.Signature(Packet))
        Tasks from the runtime's pending queue.
    done : Out(stream.Signature(TaskId, always_ready=True))
        A valid-only event per finished task.
    b_addr : Out(24)
    b_data : In(448)
        The node data memory's kernel read port (one cycle latency), for ids 2 and 5.
    b_load : In(stream.Signature(MemWrite, always_ready=True))
        Every write into the node's data memory (a valid-only event stream).
    load : In(stream.Signature(row_write_layout()))
        Host writes into the output memory.
    read_cmd : In(stream.Signature(24))
    read_data : Out(stream.Signature(read_answer_layout()))
        Host reads of the output memory, one at a time; every read is answered.
    busy : Out(1)
    range_errors, bank_errors : Out(32)
        Refused slots, host writes, host reads and B lines (above); aggregation slots outside
        their bank. Both saturate at 2**32 - 1; reset zeroes them.
    """

    PARAMS = (
        Param("features", int, 4, "32-bit words per row", minimum=1, maximum=14),
        Param("rows", int, 256, "output memory lines", minimum=4, maximum=1 << 24),
        Param("aggregation", bool, True, "attach the aggregation pipeline (kernel 6)"),
        Param("gemm", bool, False, "attach the dense GEMM unit (kernel 1)"),
    )

    def __init__(self, *, features=4, rows=256, aggregation=True, gemm=False):
        self._id_bits = max(2, (rows - 1).bit_length())
        super().__init__({
            "task": In(stream.Signature(Packet)),
            "done": Out(stream.Signature(TaskId, always_ready=True)),
            "b_addr": Out(ROW_BITS),
            "b_data": In(LINE_BITS),
            "b_load": In(stream.Signature(MemWrite, always_ready=True)),
            "load": In(stream.Signature(row_write_layout())),
            "read_cmd": In(stream.Signature(ROW_BITS)),
            "read_data": Out(stream.Signature(read_answer_layout())),
            "busy": Out(1),
            **{name: Out(COUNTER_BITS) for name in KERNEL_COUNTERS},
        })

    def elaborate(self, platform):
        m = Module()
        features = self._features
        width = 32 * features
        bits = self._id_bits
        m.submodules.out = memory = Memory(shape=width, depth=self._rows, init=[])
        read = memory.read_port()
        write = memory.write_port()

        def here(address):
            """``address`` (24 bits) names a row of the output memory (and a line of B)."""
            return Const(1) if self._rows == 1 << ROW_BITS else address < self._rows

        range_events = []  # one-cycle events, each a refused row, address or line

        # The aggregation pipeline, its B copy and the task adapter.
        if self._aggregation:
            m.submodules.aggregation = pipeline = AggregationPipeline(
                lanes=ITEMS, features=features, rows=self._rows, cols=self._rows, row_bits=bits,
                col_bits=bits, weighted=True)
        else:  # a stand-in whose outputs read as idle and never ready
            pipeline = _Idle(features, bits)
        m.d.comb += [
            pipeline.n_rows.eq(self._rows),
            pipeline.n_cols.eq(self._rows),
            pipeline.relu.eq(0),
            pipeline.clear_start.eq(0),
            pipeline.b_load.valid.eq(self.b_load.valid & here(self.b_load.payload.line)),
            pipeline.b_load.payload.addr.eq(self.b_load.payload.line),
            pipeline.b_load.payload.data.eq(self.b_load.payload.data[:width]),
        ]
        range_events.append(self.b_load.valid & ~here(self.b_load.payload.line))
        incoming = self.task.payload
        task_view = incoming.task()
        is_aggregation = Signal()
        m.d.comb += is_aggregation.eq((incoming.header.task_id == TaskId.AGGREGATION) & self._aggregation)
        # The slots the kernels may run: row (and column, for the kernels that read B) in range.
        # A 24-bit row cut to the memory's address width would land on another row.
        reads_b = incoming.header.task_id != TaskId.ACTIVATION
        in_range = Signal(ITEMS)
        if self._gemm:
            is_gemm = incoming.header.task_id == TaskId.GEMM
            gemm_fits = _gemm_fits(task_view, features, self._rows)
        for index in range(ITEMS):
            item = task_view.items[index]
            fits = here(item.row) & (here(item.col) | ~reads_b)
            if self._gemm:
                fits = fits & (~is_gemm | gemm_fits[index])
            m.d.comb += in_range[index].eq(fits)
        runnable = task_view.mask & in_range
        if self._gemm:
            gemm_task = is_gemm & (runnable != 0)
        taken = self.task.valid & self.task.ready
        range_events += [taken & task_view.mask[index] & ~in_range[index] for index in range(ITEMS)]
        # Aggregation: slot i works on output bank i (rows i mod 4); a slot outside its bank is
        # dropped here, counted (the pipeline would drop it too, into a counter of its own).
        lane_bits = (ITEMS - 1).bit_length()
        in_bank = Cat(*(task_view.items[index].row[:lane_bits] == index for index in range(ITEMS)))
        bank_events = [taken & is_aggregation & runnable[index] & ~in_bank[index] for index in range(ITEMS)]
        packet = pipeline.packets.payload
        m.d.comb += [
            packet.header.task.eq(TASK_AGGREGATION),
            packet.header.mask.eq(runnable & in_bank),
            packet.header.weighted.eq(1),
            packet.header.range_base.eq(0),
        ]
        for slot in range(ITEMS):
            item = task_view.items[slot]
            m.d.comb += [packet.slots[slot].row.eq(item.row), packet.slots[slot].col.eq(item.col),
                         packet.slots[slot].value.eq(item.value)]
        dirty = Signal()  # the pipeline holds results not yet drained into the output memory

        current = Packet(Signal(Packet.as_shape().size, name="current"))
        current_task = current.task()
        remaining = Signal(ITEMS)
        slot = Signal(range(ITEMS))
        for index in reversed(range(ITEMS)):
            with m.If(remaining[index]):
                m.d.comb += slot.eq(index)
        item = current_task.items[slot]
        old = Signal(width)
        operand = Signal(width)
        result = Signal(width)
        integer = Cat(*((old[32 * lane:32 * lane + 32] + operand[32 * lane:32 * lane + 32] * item.value)[:32]
                        for lane in range(features)))
        relu = Cat(*(Mux(old[32 * lane + 31], 0, old[32 * lane:32 * lane + 32]) for lane in range(features)))
        m.d.comb += [self.b_addr.eq(item.col), read.addr.eq(item.row), write.addr.eq(item.row),
                     write.data.eq(result)]

        # The state machine as if-chains on a state register (Amaranth prints m.FSM as a case
        # statement that Verilator's -Wall rejects as incomplete).
        states = ("IDLE", "HOST_READ", "ISSUE", "READ", "WRITE", "DRAIN") + (("GEMM",) if self._gemm else ())
        state = Signal(range(len(states)))
        at = {name: state == index for index, name in enumerate(states)}

        def goto(name):
            m.d.sync += state.eq(states.index(name))

        m.d.comb += self.busy.eq(~at["IDLE"] | dirty | pipeline.busy)
        if self._gemm:
            m.submodules.gemm = gemm = NodeGemm(features=features)

            def gemm_start(task, runnable):
                """Hand ``task`` (its ``runnable`` slots) to the GEMM unit; W and the shape are the
                first runnable slot's."""
                first = task.items[lowest_set_bit(m, "gemm_first", runnable)]
                job = gemm.job.payload
                m.d.comb += [gemm.job.valid.eq(1), self.task.ready.eq(gemm.job.ready), job.mask.eq(runnable),
                             job.col.eq(first.col), job.k.eq(first.value[:8]), job.n.eq(first.value[8:16])]
                m.d.comb += [job.rows[index].eq(task.items[index].row) for index in range(ITEMS)]
                with m.If(gemm.job.ready):
                    goto("GEMM")

            def gemm_run():
                """The GEMM unit owns the output memory's ports and B's until its last row is written."""
                m.d.comb += [read.addr.eq(gemm.a_addr), self.b_addr.eq(gemm.w_addr),
                             write.addr.eq(gemm.write.payload.row), write.data.eq(gemm.write.payload.data),
                             write.en.eq(gemm.write.valid)]
                with m.If(gemm.done):
                    m.d.comb += [self.done.valid.eq(1), done_id.eq(TaskId.GEMM)]
                    goto("IDLE")

            m.d.comb += [gemm.a_data.eq(read.data), gemm.w_data.eq(self.b_data)]
        load_refused, read_refused = Signal(), Signal()
        refused = Signal()  # the host read being answered named a row that is not there
        range_events += [load_refused, read_refused]
        done_id = Signal(TaskId)
        m.d.comb += self.done.payload.eq(done_id)
        with m.If(at["IDLE"]):
            # Aggregation tasks go straight into the pipeline; anything else first drains it.
            with m.If(self.task.valid & is_aggregation):
                m.d.comb += [pipeline.packets.valid.eq(1), self.task.ready.eq(pipeline.packets.ready)]
                with m.If(pipeline.packets.ready):
                    m.d.comb += [self.done.valid.eq(1), done_id.eq(TaskId.AGGREGATION)]
                    m.d.sync += dirty.eq(1)
            with m.Elif(dirty & (self.task.valid | self.load.valid | self.read_cmd.valid)):
                with m.If(pipeline.mode == Mode.RUN):
                    m.d.comb += pipeline.drain_start.eq(1)
                    goto("DRAIN")
            if self._gemm:
                with m.Elif(self.task.valid & gemm_task):  # a GEMM task with a runnable slot
                    gemm_start(task_view, runnable)
            with m.Elif(self.task.valid):
                m.d.comb += self.task.ready.eq(1)
                m.d.sync += [current.eq(incoming), remaining.eq(runnable)]
                goto("ISSUE")
            with m.Elif(self.load.valid):
                m.d.comb += [self.load.ready.eq(1), write.addr.eq(self.load.payload.row),
                             write.data.eq(self.load.payload.data),
                             write.en.eq(here(self.load.payload.row)), load_refused.eq(~write.en)]
            with m.Elif(self.read_cmd.valid & ~self.read_data.valid):
                m.d.comb += [self.read_cmd.ready.eq(1), read.addr.eq(self.read_cmd.payload),
                             read_refused.eq(~here(self.read_cmd.payload))]
                m.d.sync += refused.eq(read_refused)
                goto("HOST_READ")
        with m.Elif(at["DRAIN"]):
            drained = pipeline.drain
            m.d.comb += [drained.ready.eq(1), write.addr.eq(drained.payload.row),
                         write.data.eq(drained.payload.data.as_value()), write.en.eq(drained.valid)]
            with m.If(drained.valid & drained.payload.last):
                m.d.sync += dirty.eq(0)
                goto("IDLE")
        with m.Elif(at["HOST_READ"]):
            answer = self.read_data.payload
            m.d.sync += [self.read_data.valid.eq(1), answer.data.eq(Mux(refused, 0, read.data)),
                         answer.error.eq(refused)]
            goto("IDLE")
        with m.Elif(at["ISSUE"]):
            with m.If(remaining == 0):
                m.d.comb += [self.done.valid.eq(1), done_id.eq(current.header.task_id)]
                goto("IDLE")
            with m.Else():
                goto("READ")  # B and OUT rows are read at this edge
        with m.Elif(at["READ"]):
            m.d.sync += [old.eq(read.data), operand.eq(self.b_data[:width])]
            goto("WRITE")
        with m.Elif(at["WRITE"]):
            m.d.comb += [result.eq(Mux(current.header.task_id == TaskId.SPMM, integer, relu)), write.en.eq(1)]
            m.d.sync += remaining.eq(remaining & ~(1 << slot))
            goto("ISSUE")
        if self._gemm:
            with m.Elif(at["GEMM"]):
                gemm_run()
        with m.If(self.read_data.valid & self.read_data.ready):
            m.d.sync += self.read_data.valid.eq(0)

        # The pipeline's own error counters stay at 0: its header is built here and its slots
        # are in range and in bank.
        count_saturating(m, self.range_errors, range_events)
        count_saturating(m, self.bank_errors, bank_events)
        return m


def _gemm_fits(task_view, features, rows):
    """Per slot: its GEMM shape ``K | N << 8`` is in 1 .. ``features`` and ``W``'s lines ``col .. col + K -
    1`` are below ``rows``."""
    fits = []
    for index in range(ITEMS):
        item = task_view.items[index]
        k, n = item.value[:8], item.value[8:16]
        fits.append((k >= 1) & (k <= features) & (n >= 1) & (n <= features) & (item.col + k <= rows))
    return Cat(*fits)


class _Idle:
    """The aggregation pipeline's ports when it is not attached: inputs ignored, never ready, idle."""

    def __init__(self, features, bits):
        row = data.ArrayLayout(32, features)
        self.packets = stream.Signature(packet_layout(ITEMS, bits, bits, True)).create()
        self.b_load = stream.Signature(data.StructLayout({"addr": bits, "data": row})).create()
        self.drain = stream.Signature(data.StructLayout({"row": bits, "data": row, "last": 1})).create()
        self.n_rows, self.n_cols = Signal(bits + 1), Signal(bits + 1)
        self.drain_start, self.clear_start, self.relu = Signal(), Signal(), Signal()
        self.mode = Signal(2)
        self.busy = Signal()


register_block(
    "runtime_node_kernels", NodeKernels, family="runtime",
    summary="Kernels for the runtime cluster: float32 aggregation (6) on the aggregation pipeline, "
            "integer sparse x dense (2) and ReLU (5) one item at a time, with an output memory; "
            "optionally float32 dense GEMM (1) on tiled_gemm.",
    golden="golden.runtime.kernels:execute",
    drops={"range_errors": "task slots (row, or column for kernels 2 and 6), host writes, host reads "
                           "and B lines past rows: skipped or refused, reads answered with error",
           "bank_errors": "aggregation slots whose row is outside their bank (row mod 4 != slot)"},
)
