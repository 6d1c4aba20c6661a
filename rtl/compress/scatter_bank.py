"""One bank of the scatter engine: an in-order multi-write queue, a RAW detector and an f32 adder."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..fp.fp_add import FloatAdder
from ..registration import check_int
from .layouts import value_width, widen_f16

__all__ = ["ScatterBank", "BUFFERS"]

BUFFERS = 2  # chunk j scatters into buffer j % 2 while buffer (j - 1) % 2 drains


class ScatterBank(wiring.Component):
    """Read-modify-write scatter-add into one bank of a double-buffered chunk buffer.

    Internal to :class:`~rtl.compress.scatter.ScatterEngine` (not registered on its own).

    Each cycle the dispatcher may push up to ``writes`` updates (address, value, buffer), which
    join the bank's queue in port order; the queue is ``writes`` single-write FIFOs filled round
    robin, so ordering costs nothing. The head of the queue issues one read-modify-write per cycle:
    the old value is read from block RAM, the update value (widened from f16 if needed) added by a
    :class:`~rtl.fp.fp_add.FloatAdder` and the sum written back ``1 + adder latency`` cycles after the
    read. Updates to one address therefore stay in pair order, which keeps duplicate indices
    bit-exact with the golden pair-order accumulation.

    Read-after-write hazards: the RAW detector compares the head's address (and buffer) with those
    of the updates issued in the last ``latency - 1`` cycles and holds the head while one matches.
    A match issued ``latency`` or ``latency + 1`` cycles earlier is not waited for: its sum is
    forwarded into the adder's operand, from the adder's output register or from the register that
    holds the last cycle's write-back (the dissertation's RAW detector, which "holds the last cycle's
    row id and vector value"). A chain on a single address thus runs at one add per ``latency``
    cycles; distinct addresses run at one per cycle.

    Parameters
    ----------
    depth : int
        Elements per buffer in this bank, >= 2.
    value_format : {"f32", "f16"}
        Format of the pushed values.
    writes : int
        Pushes accepted per cycle, 1 to 16.
    queue_depth : int
        Queue entries, rounded up to a multiple of ``writes``.

    Attributes
    ----------
    push : In(ArrayLayout(StructLayout(valid, address, value), writes))
        Updates of this cycle; a valid port implies valid lower ports. They must fit in ``room``.
    push_buffer : In(1)
        Buffer of every update pushed this cycle.
    room : Out
        Free queue entries (a register: pushes and pops of this cycle show next cycle).
    outstanding : Out(2)
        Bit ``x``: updates for buffer ``x`` are queued or in the adder pipeline.
    drain_buffer, drain_enable, drain_address : In
        Drain read: with ``drain_enable``, read ``drain_address`` of buffer ``drain_buffer``; the
        data appears on ``drain_data`` next cycle and stays there until the next drain read.
        The engine never drains a buffer that has outstanding updates.
    drain_data : Out(32)
    clear : In(2), clear_address : In
        Write +0.0 at ``clear_address`` of each buffer whose bit is set (never a buffer being
        scattered into).
    overflow : Out(1)
        Sticky until reset: an update was pushed into a full queue FIFO and lost. The queue is
        kept from overflow by ``room`` (a credit count), not by a ready, so a dispatcher that
        pushes past ``room`` would lose updates silently; this flag makes that visible. A
        dispatcher that keeps to ``room`` never raises it.
    """

    def __init__(self, *, depth, value_format, writes, queue_depth):
        self._depth = check_int("depth", depth, 2)
        self._value_width = value_width(value_format)
        self._f16 = value_format == "f16"
        self._writes = check_int("writes", writes, 1, 16)
        self._sub_depth = -(-check_int("queue_depth", queue_depth, 1) // writes)
        self._address_width = (depth - 1).bit_length()
        self._adder = FloatAdder(fmt="f32", tag_width=self._address_width + 1)
        self.latency = self._adder.latency
        port = data.StructLayout({"valid": 1, "address": self._address_width, "value": self._value_width})
        capacity = self._sub_depth * writes
        super().__init__({
            "push": In(data.ArrayLayout(port, writes)),
            "push_buffer": In(1),
            "room": Out(range(capacity + 1)),
            "outstanding": Out(BUFFERS),
            "drain_buffer": In(1),
            "drain_enable": In(1),
            "drain_address": In(self._address_width),
            "drain_data": Out(32),
            "clear": In(BUFFERS),
            "clear_address": In(self._address_width),
            "overflow": Out(1),
        })

    @property
    def capacity(self):
        """Queue entries."""
        return self._sub_depth * self._writes

    def _queue(self, m):
        """The in-order queue; returns (entry layout, head valid, head entry, issue to drive, pushes)."""
        k = self._writes
        entry = data.StructLayout({"address": self._address_width, "value": self._value_width, "buffer": 1})
        fifos = [SyncFIFO(width=entry.size, depth=self._sub_depth) for _ in range(k)]
        for index, fifo in enumerate(fifos):
            m.submodules[f"queue{index}"] = fifo
        write_select = Signal(range(k))  # FIFO that takes the next pushed entry
        read_select = Signal(range(k))   # FIFO that holds the oldest entry
        count = Signal(range(self.capacity + 1))
        pushes = sum(port.valid for port in self.push)

        # Port r goes to FIFO (write_select + r) mod k; FIFO j therefore takes port (j - write_select) mod k.
        # (Mux chains rather than m.Switch: Verilator rejects the incomplete per-signal case statements.)
        for j, fifo in enumerate(fifos):
            valid = self.push[j].valid
            word = Cat(self.push[j].address, self.push[j].value)
            for select in range(1, k):
                port = self.push[(j - select) % k]
                valid = Mux(write_select == select, port.valid, valid)
                word = Mux(write_select == select, Cat(port.address, port.value), word)
            m.d.comb += [fifo.w_en.eq(valid), fifo.w_data.eq(Cat(word, self.push_buffer))]
            with m.If(valid & ~fifo.w_rdy):
                m.d.sync += self.overflow.eq(1)
        advanced = write_select + pushes
        m.d.sync += write_select.eq(Mux(advanced >= k, advanced - k, advanced))  # pushes <= k

        head_valid = Signal()
        head = Signal(entry)
        issue = Signal()
        pop = Signal()
        m.d.comb += pop.eq((count != 0) & (~head_valid | issue))
        oldest = Signal(entry)
        word = fifos[0].r_data
        for j, fifo in enumerate(fifos):
            m.d.comb += fifo.r_en.eq(pop & (read_select == j))
            word = Mux(read_select == j, fifo.r_data, word) if j else word
        m.d.comb += oldest.eq(word)
        with m.If(pop):
            m.d.sync += [head.eq(oldest), read_select.eq(Mux(read_select == k - 1, 0, read_select + 1))]
        with m.If(pop | issue):
            m.d.sync += head_valid.eq(pop)
        m.d.sync += count.eq(count + pushes - pop)
        m.d.comb += self.room.eq(self.capacity - count)
        return entry, head_valid, head, issue, pushes

    def elaborate(self, platform):
        m = Module()
        entry, head_valid, head, issue, pushes = self._queue(m)
        m.submodules.adder = adder = self._adder
        tag = Cat(head.address, head.buffer)

        # RAW detector: tags issued 1 .. latency - 1 cycles ago, whose sums are not yet forwardable.
        in_flight = [(Signal(name=f"flight{age}_valid"), Signal(len(tag), name=f"flight{age}_tag"))
                     for age in range(1, self.latency)]
        previous_valid, previous_tag = issue, tag
        for valid, flight_tag in in_flight:
            m.d.sync += [valid.eq(previous_valid), flight_tag.eq(previous_tag)]
            previous_valid, previous_tag = valid, flight_tag
        hazard = Signal()
        m.d.comb += hazard.eq(Cat(valid & (flight_tag == tag) for valid, flight_tag in in_flight).any())
        m.d.comb += issue.eq(head_valid & ~hazard)

        memories = [Memory(shape=32, depth=self._depth, init=[]) for _ in range(BUFFERS)]
        reads, writes = [], []
        for index, memory in enumerate(memories):
            m.submodules[f"buffer{index}"] = memory
            reads.append(memory.read_port())  # read-first: a same-cycle write is forwarded instead
            writes.append(memory.write_port())

        # Operand stage: the update issued last cycle meets its old value.
        operand_valid = Signal()
        operand = Signal(entry)
        m.d.sync += [operand_valid.eq(issue), operand.eq(head)]
        operand_tag = Cat(operand.address, operand.buffer)
        last_write_valid = Signal()
        last_write_tag = Signal(len(tag))
        last_write_data = Signal(32)
        result = adder.o.payload
        from_adder = adder.o.valid & (result.tag == operand_tag)
        from_last_write = last_write_valid & (last_write_tag == operand_tag)
        stored = Mux(operand.buffer, reads[1].data, reads[0].data)
        value = widen_f16(operand.value) if self._f16 else operand.value
        m.d.comb += [
            adder.i.valid.eq(operand_valid),
            adder.i.payload.a.eq(Mux(from_adder, result.result,
                                     Mux(from_last_write, last_write_data, stored))),
            adder.i.payload.b.eq(value),
            adder.i.payload.tag.eq(operand_tag),
            adder.o.ready.eq(1),
        ]
        m.d.sync += [last_write_valid.eq(adder.o.valid), last_write_tag.eq(result.tag),
                     last_write_data.eq(result.result)]

        result_address, result_buffer = result.tag[:self._address_width], result.tag[-1]
        for index, (read, write) in enumerate(zip(reads, writes, strict=True)):
            draining = self.drain_enable & (self.drain_buffer == index)
            scatter_write = adder.o.valid & (result_buffer == index)
            m.d.comb += [
                read.addr.eq(Mux(draining, self.drain_address, head.address)),
                read.en.eq(draining | (issue & (head.buffer == index))),
                write.addr.eq(Mux(scatter_write, result_address, self.clear_address)),
                write.data.eq(Mux(scatter_write, result.result, 0)),
                write.en.eq(scatter_write | self.clear[index]),
            ]
        m.d.comb += self.drain_data.eq(Mux(self.drain_buffer, reads[1].data, reads[0].data))

        # Per buffer: updates pushed minus sums written back.
        for index in range(BUFFERS):
            pending = Signal(range(self.capacity + self.latency + 4), name=f"pending{index}")
            added = Mux(self.push_buffer == index, pushes, 0)
            retired = adder.o.valid & (result_buffer == index)
            m.d.sync += pending.eq(pending + added - retired)
            m.d.comb += self.outstanding[index].eq(pending != 0)
        return m
