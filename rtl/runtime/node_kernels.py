"""The kernels attached to a runtime node in the simulated cluster: sparse x dense, ReLU, aggregation."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..fp.adder import FloatAdder
from ..fp.multiplier import FloatMultiplier
from ..registration import Param, check_int, register_block
from .packet import ITEMS, LINE_BITS, ROW_BITS, Packet, TaskId

__all__ = ["NodeKernels", "KERNEL_MASK", "row_write_layout"]

# Kernel ids implemented here: 2 (integer sparse x dense), 5 (ReLU), 6 (float32 aggregation).
KERNEL_MASK = (1 << 2) | (1 << 5) | (1 << 6)


def row_write_layout():
    return data.StructLayout({"row": ROW_BITS, "data": LINE_BITS})


class NodeKernels(wiring.Component):
    """A node's compute units for the runtime's tasks, one task item at a time, with an output memory.

    For every occupied slot of a task, in slot order (the order of :mod:`golden.runtime.kernels`),
    with ``B = `` line ``col`` of the node's data memory and ``OUT`` this block's memory of
    ``rows`` lines of ``features`` 32-bit words:

    * id 2: ``OUT[row] = OUT[row] + value * B[col]`` per word, modulo 2**32;
    * id 5: ReLU, every word of ``OUT[row]`` with its sign bit set becomes 0;
    * id 6: ``OUT[row] = fl(OUT[row] + fl(value * B[col]))`` per word in float32
      (:class:`~rtl.fp.multiplier.FloatMultiplier` then :class:`~rtl.fp.adder.FloatAdder`,
      round to nearest even, subnormals kept).

    Items run one after the other, so an item always reads the row its predecessor wrote. This
    is a development kernel to run the runtime end to end, not a line-rate pipeline: 3 cycles
    per item for ids 2 and 5, ``4 + multiplier + adder latency`` for id 6.

    Parameters
    ----------
    features : int
        32-bit words per row, 1 to 14.
    rows : int
        Output memory lines (global row addresses), 2 to 2**24.

    Attributes
    ----------
    task : In(stream.Signature(Packet))
        Tasks from the runtime's pending queue.
    done : Out(stream.Signature(TaskId))
        One transfer per finished task (the runtime is always ready).
    b_addr : Out(24)
    b_data : In(448)
        The node data memory's kernel read port (one cycle latency).
    load : In(stream.Signature(row_write_layout()))
        Host writes into the output memory (accepted while idle).
    read_cmd : In(stream.Signature(24))
    read_data : Out(stream.Signature(448))
        Host reads of the output memory (accepted while idle).
    busy : Out(1)
    """

    def __init__(self, *, features=4, rows=256):
        self._features = check_int("features", features, 1, LINE_BITS // 32)
        self._rows = check_int("rows", rows, 2, 1 << ROW_BITS)
        super().__init__({
            "task": In(stream.Signature(Packet)),
            "done": Out(stream.Signature(TaskId)),
            "b_addr": Out(ROW_BITS),
            "b_data": In(LINE_BITS),
            "load": In(stream.Signature(row_write_layout())),
            "read_cmd": In(stream.Signature(ROW_BITS)),
            "read_data": Out(stream.Signature(LINE_BITS)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        features = self._features
        width = 32 * features
        m.submodules.out = memory = Memory(shape=width, depth=self._rows, init=[])
        read = memory.read_port()
        write = memory.write_port()

        current = Packet(Signal(Packet.as_shape().size, name="current"))
        task = current.task()
        remaining = Signal(ITEMS)
        slot = Signal(range(ITEMS))
        for index in reversed(range(ITEMS)):
            with m.If(remaining[index]):
                m.d.comb += slot.eq(index)
        item = task.items[slot]
        old = Signal(width)
        operand = Signal(width)
        result = Signal(width)
        busy = Signal()
        m.d.comb += [self.busy.eq(busy), self.done.payload.eq(current.header.task_id)]

        multipliers = [FloatMultiplier(fmt="f32") for _ in range(features)]
        adders = [FloatAdder(fmt="f32") for _ in range(features)]
        feed_multiply = Signal()
        feed_add = Signal()
        for lane, (multiplier, adder) in enumerate(zip(multipliers, adders, strict=True)):
            m.submodules[f"mul{lane}"] = multiplier
            m.submodules[f"add{lane}"] = adder
            m.d.comb += [
                multiplier.i.valid.eq(feed_multiply),
                multiplier.i.payload.a.eq(operand[32 * lane:32 * lane + 32]),
                multiplier.i.payload.b.eq(item.value),
                multiplier.o.ready.eq(1),
                adder.i.valid.eq(feed_add),
                adder.i.payload.a.eq(old[32 * lane:32 * lane + 32]),
                adder.i.payload.b.eq(operand[32 * lane:32 * lane + 32]),
                adder.o.ready.eq(1),
            ]
        products = Cat(*(mul.o.payload.result for mul in multipliers))
        sums = Cat(*(add.o.payload.result for add in adders))

        integer = Cat(*((old[32 * lane:32 * lane + 32] + operand[32 * lane:32 * lane + 32] * item.value)[:32]
                        for lane in range(features)))
        relu = Cat(*(Mux(old[32 * lane + 31], 0, old[32 * lane:32 * lane + 32]) for lane in range(features)))

        m.d.comb += [self.b_addr.eq(item.col), read.addr.eq(item.row), write.addr.eq(item.row),
                     write.data.eq(result)]
        # The state machine as if-chains on a state register (Amaranth prints m.FSM as a case
        # statement that Verilator's -Wall rejects as incomplete).
        states = ("IDLE", "HOST_READ", "ISSUE", "READ", "MULTIPLY", "WAIT_PRODUCT", "ADD", "WAIT_SUM",
                  "WRITE")
        state = Signal(range(len(states)))
        at = {name: state == index for index, name in enumerate(states)}

        def goto(name):
            m.d.sync += state.eq(states.index(name))

        with m.If(at["IDLE"]):
            m.d.comb += [self.task.ready.eq(1), self.load.ready.eq(~self.task.valid),
                         self.read_cmd.ready.eq(~self.task.valid & ~self.read_data.valid)]
            with m.If(self.task.valid):
                m.d.sync += [current.eq(self.task.payload), remaining.eq(self.task.payload.task().mask),
                             busy.eq(1)]
                goto("ISSUE")
            with m.Elif(self.load.valid):
                m.d.comb += [write.addr.eq(self.load.payload.row), write.data.eq(self.load.payload.data),
                             write.en.eq(self.load.payload.row < self._rows)]
            with m.Elif(self.read_cmd.valid & ~self.read_data.valid):
                m.d.comb += read.addr.eq(self.read_cmd.payload)
                goto("HOST_READ")
        with m.Elif(at["HOST_READ"]):
            m.d.sync += [self.read_data.valid.eq(1), self.read_data.payload.eq(read.data)]
            goto("IDLE")
        with m.Elif(at["ISSUE"]):
            with m.If(remaining == 0):
                m.d.comb += self.done.valid.eq(1)
                m.d.sync += busy.eq(0)
                goto("IDLE")
            with m.Else():
                goto("READ")  # B and OUT rows are read at this edge
        with m.Elif(at["READ"]):
            m.d.sync += [old.eq(read.data), operand.eq(self.b_data[:width])]
            with m.If(current.header.task_id == TaskId.AGGREGATION):
                goto("MULTIPLY")
            with m.Else():
                goto("WRITE")
        with m.Elif(at["MULTIPLY"]):
            m.d.comb += feed_multiply.eq(1)
            goto("WAIT_PRODUCT")
        with m.Elif(at["WAIT_PRODUCT"]):
            with m.If(multipliers[0].o.valid):
                m.d.sync += operand.eq(products)
                goto("ADD")
        with m.Elif(at["ADD"]):
            m.d.comb += feed_add.eq(1)
            goto("WAIT_SUM")
        with m.Elif(at["WAIT_SUM"]):
            with m.If(adders[0].o.valid):
                m.d.sync += old.eq(sums)
                goto("WRITE")
        with m.Elif(at["WRITE"]):
            task_id = current.header.task_id
            m.d.comb += [
                result.eq(Mux(task_id == TaskId.SPMM, integer, Mux(task_id == TaskId.ACTIVATION, relu, old))),
                write.en.eq(1),
            ]
            m.d.sync += remaining.eq(remaining & ~(1 << slot))
            goto("ISSUE")
        with m.If(self.read_data.valid & self.read_data.ready):
            m.d.sync += self.read_data.valid.eq(0)
        return m


register_block(
    "runtime_node_kernels", NodeKernels, family="runtime",
    summary="Development kernels for the runtime cluster: integer sparse x dense (2), ReLU (5), "
            "float32 aggregation (6), one task item at a time, with an output memory.",
    params=[
        Param("features", int, 4, "32-bit words per row", minimum=1, maximum=14),
        Param("rows", int, 256, "output memory lines", minimum=2, maximum=1 << 24),
    ],
)
