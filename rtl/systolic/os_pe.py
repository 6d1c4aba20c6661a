"""The output-stationary processing element: one MAC per cycle into T interleaved accumulators."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..registration import check_bool, check_int
from .arithmetic import arithmetic

__all__ = ["OutputStationaryPE", "operand_layout", "drain_layout", "token_window", "delayed", "MAX_SLOTS"]

MAX_SLOTS = 64


def operand_layout(shape):
    """An operand moving right along a PE row with the control of its beat."""
    return data.StructLayout({"valid": 1, "first": 1, "last": 1, "data": shape})


def drain_layout(shape):
    """A result moving down a PE column towards the array's output port."""
    return data.StructLayout({"valid": 1, "data": shape})


def delayed(m, value, cycles, name, *, reset_less=False):
    """``value`` through ``cycles`` registers (itself for 0).

    Data lines are ``reset_less``, which lets FPGA tools map them to shift-register LUTs.
    """
    for index in range(cycles):
        register = Signal.like(value, name=f"{name}_{index}", init=0, reset_less=reset_less)
        m.d.sync += register.eq(value)
        value = register
    return value


def token_window(m, token, slots, name):
    """Open a ``slots``-cycle window at ``token`` and pass the token on ``slots + 1`` cycles later.

    Fill and drain visit the PEs of a column one row after the other, ``slots`` values per row,
    and each value spends one more cycle in the column's register chain per row, so row r + 1
    starts ``slots + 1`` cycles after row r. Returns ``(active, token_out)``.
    """
    history = [token]
    for index in range(1, slots + 2):
        delayed = Signal(name=f"{name}_token_{index}")
        m.d.sync += delayed.eq(history[-1])
        history.append(delayed)
    return Cat(history[:slots]).any(), history[slots + 1]


class _Bank:
    """``slots`` accumulator-wide words with a write pointer and a read pointer that wrap.

    Writes and reads each visit the slots in order 0, 1, ..., so the pointers need no address
    from outside. One slot is a plain register; more are a small memory with an asynchronous
    read port (LUT RAM on FPGAs).
    """

    def __init__(self, m, name, shape, slots, *, write, write_data, read):
        self._m, self._slots = m, slots
        write_at = self._pointer(name + "_write", write)
        read_at = self._pointer(name + "_read", read)
        self.write_at = write_at
        if slots == 1:
            self.data = Signal(shape, name=name)
            with m.If(write):
                m.d.sync += self.data.eq(write_data)
            return
        m.submodules[name] = memory = Memory(shape=shape, depth=slots, init=[])
        write_port = memory.write_port()
        read_port = memory.read_port(domain="comb")
        m.d.comb += [write_port.addr.eq(write_at), write_port.data.eq(write_data), write_port.en.eq(write),
                     read_port.addr.eq(read_at)]
        self.data = read_port.data

    def _pointer(self, name, step):
        pointer = Signal(range(self._slots), name=name)
        if self._slots > 1:
            with self._m.If(step):
                self._m.d.sync += pointer.eq(Mux(pointer == self._slots - 1, 0, pointer + 1))
        return pointer


class OutputStationaryPE(wiring.Component):
    """One PE of :class:`~.os_core.OutputStationaryCore`: ``acc[u] += a * b``, one MAC per cycle.

    The operands sit in the PE's input registers (``a_out``, ``b_out``, which feed the next PE)
    for one cycle, go through the multiplier, and meet the accumulator of their slot at the
    adder. The T accumulators of the PE live in the adder's pipeline itself plus
    ``beat_len - add_latency`` delay registers, a ring of ``beat_len`` stages: a slot's sum
    comes back round exactly when the slot's next operand pair reaches the adder. The first
    beat of a slot adds to ``d`` (from the fill bank) or to +0 instead; the last writes the sum
    into the shadow bank, which the column drain reads while the next tile accumulates.

    Parameters
    ----------
    element : {"f32", "f16", "bf16", "int8"}
    slots : int
        T, accumulators per PE (1 to 64).
    accumulate : bool
        Build the ``d`` fill bank and chain (``C = A B + D``); otherwise slots start at +0 / 0.

    Attributes
    ----------
    a_in, a_out : operand_layout(operand) with the beat's valid / first / last bits
        From the left neighbour; to the right one (registered: the PE's operand register).
    b_in, b_out : operand shape
        From above; to below (registered).
    fill_in, fill_out, fill_token_in, fill_token_out
        ``d`` values moving down the column (``fill_out`` registered) and the token that opens
        this PE's ``slots``-cycle capture window (passed on ``slots + 1`` cycles later).
    drain_in, drain_out, drain_token_in, drain_token_out
        Results moving down the column (``drain_out`` registered) and the token that opens this
        PE's ``slots``-cycle window of putting its shadow bank onto the chain.
    slot0_written : Out(1)
        Pulses when the final sum of slot 0 lands in the shadow bank (starts the column drain).
    """

    def __init__(self, *, element="f16", slots=1, accumulate=False):
        self._arith = arithmetic(element)
        self._slots = check_int("slots", slots, 1, MAX_SLOTS)
        self._accumulate = check_bool("accumulate", accumulate)
        operand, acc = self._arith.operand_shape, self._arith.accumulator_shape
        self.add_latency = self._arith.add_latency
        self.multiply_latency = self._arith.multiply_latency
        self.beat_len = max(self._slots, self.add_latency)
        ports = {
            "a_in": In(operand_layout(operand)), "a_out": Out(operand_layout(operand)),
            "b_in": In(operand), "b_out": Out(operand),
            "drain_in": In(drain_layout(acc)), "drain_out": Out(drain_layout(acc)),
            "drain_token_in": In(1), "drain_token_out": Out(1),
            "slot0_written": Out(1),
        }
        if accumulate:
            ports.update({"fill_in": In(acc), "fill_out": Out(acc),
                          "fill_token_in": In(1), "fill_token_out": Out(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        slots, arith = self._slots, self._arith
        m.d.sync += [self.a_out.eq(self.a_in), self.b_out.eq(self.b_in)]

        m.submodules.multiplier = multiplier = arith.multiplier(tag_width=2)
        m.submodules.adder = adder = arith.adder(tag_width=1)
        beat = self.a_out
        m.d.comb += [
            multiplier.i.valid.eq(beat.valid), multiplier.i.payload.a.eq(beat.data),
            multiplier.i.payload.b.eq(self.b_out), multiplier.i.payload.tag.eq(Cat(beat.first, beat.last)),
            multiplier.o.ready.eq(1), adder.o.ready.eq(1),
        ]
        product = multiplier.o
        first = product.valid & product.payload.tag[0]
        sums = adder.o
        final = sums.valid & sums.payload.tag[0]

        # The ring: the adder's stages plus delay registers make beat_len stages in all.
        ring = delayed(m, sums.payload.result, self.beat_len - self.add_latency, "ring")

        if self._accumulate:
            fill_active, token_out = token_window(m, self.fill_token_in, slots, "fill")
            m.d.sync += self.fill_out.eq(self.fill_in)
            m.d.comb += self.fill_token_out.eq(token_out)
            start = _Bank(m, "d_bank", arith.accumulator_shape, slots, write=fill_active,
                          write_data=self.fill_in, read=first).data
        else:
            start = 0  # +0.0 and integer 0 are both all-zero bits
        m.d.comb += [
            adder.i.valid.eq(product.valid), adder.i.payload.a.eq(product.payload.result),
            adder.i.payload.b.eq(Mux(first, start, ring)), adder.i.payload.tag.eq(product.payload.tag[1]),
        ]

        drain_active, token_out = token_window(m, self.drain_token_in, slots, "drain")
        shadow = _Bank(m, "shadow", arith.accumulator_shape, slots, write=final,
                       write_data=sums.payload.result, read=drain_active)
        m.d.comb += [self.drain_token_out.eq(token_out),
                     self.slot0_written.eq(final & (shadow.write_at == 0))]
        with m.If(drain_active):
            m.d.sync += [self.drain_out.valid.eq(1), self.drain_out.data.eq(shadow.data)]
        with m.Else():
            m.d.sync += self.drain_out.eq(self.drain_in)
        return m
