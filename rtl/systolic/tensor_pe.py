"""The tensor PE: a t x t tile of output-stationary MAC lanes fed by t A and t B operands per cycle."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..registration import check_bool, check_int
from .arithmetic import arithmetic
from .os_pe import MAX_SLOTS, _Bank, delayed

__all__ = ["TensorPE", "MAX_TENSOR", "group_windows"]

MAX_TENSOR = 16


def group_windows(m, token, groups, slots, name):
    """``groups`` back-to-back ``slots``-cycle windows from ``token``, then the token moves on.

    A tensor PE puts (or takes) ``slots`` values of each of its ``groups`` lane rows on its column
    chain one row after the other, and the chain has one register per PE, so the next PE's turn
    starts ``groups slots + 1`` cycles after this one's. Returns ``(windows, any_window, token_out)``.
    """
    history = [token]
    for index in range(1, groups * slots + 2):
        delayed = Signal(name=f"{name}_token_{index}")
        m.d.sync += delayed.eq(history[-1])
        history.append(delayed)
    windows = [Cat(history[i * slots:(i + 1) * slots]).any() for i in range(groups)]
    return windows, Cat(history[:groups * slots]).any(), history[groups * slots + 1]


class TensorPE(wiring.Component):
    """One PE of a systolic tensor array: a ``t x t`` output tile, ``t x t`` MACs per cycle.

    Lane (i, j) computes ``acc[i][j][u] += a[i] b[j]``: each cycle the PE takes t A operands (one
    per lane row) and t B operands (one per lane column) into its input registers, which also feed
    the right and lower neighbours, and all ``t x t`` lanes multiply and accumulate in lockstep.
    Every lane is the accumulator ring of :class:`~.os_pe.OutputStationaryPE` (T interleaved
    slots in the adder's pipeline, a d bank and a shadow bank). Because the lanes of one PE finish
    together, the PE puts its results on the column drain lane row by lane row: a ``t T``-cycle
    window, lane row i in cycles ``i T .. i T + T - 1``, all t lane columns at once, and the drain
    token moves on ``t T + 1`` cycles later. The fill works the same way.

    With ``gather`` the lanes do not share B operands: ``b_in`` carries a t x t matrix (lane row
    i's own B row slice, gathered by the sparse array by column index) and there is no ``b_out``.

    Parameters
    ----------
    tensor : int
        t, lanes per side (1 to 16).
    element : {"f32", "f16", "bf16", "int8"}
    slots : int
        T, accumulator slots per lane (1 to 64).
    accumulate : bool
        Build the d fill banks and chain (``C = A B + D``).
    gather : bool
        One B operand per lane instead of one per lane column.

    Attributes
    ----------
    a_in, a_out : StructLayout(valid, first, last, data: ArrayLayout(operand, t))
    b_in, b_out : ArrayLayout(operand, t)  (gather: b_in is ArrayLayout(ArrayLayout(operand, t), t), no b_out)
    drain_in, drain_out : StructLayout(valid, data: ArrayLayout(accumulator, t))
    drain_token_in, drain_token_out, slot0_written, fill_in, fill_out, fill_token_in, fill_token_out
        As for :class:`~.os_pe.OutputStationaryPE`, with t values per chain stage.

    Notes
    -----
    Latency as :class:`~.os_pe.OutputStationaryPE` (the lanes are its datapath); throughput
    ``t^2`` MACs per cycle when ``T >= add_latency``.
    """

    def __init__(self, *, tensor=2, element="f16", slots=1, accumulate=False, gather=False):
        self._tensor = check_int("tensor", tensor, 1, MAX_TENSOR)
        self._arith = arithmetic(element)
        self._slots = check_int("slots", slots, 1, MAX_SLOTS)
        self._accumulate = check_bool("accumulate", accumulate)
        self._gather = check_bool("gather", gather)
        t = self._tensor
        operand, acc = self._arith.operand_shape, self._arith.accumulator_shape
        self.add_latency = self._arith.add_latency
        self.multiply_latency = self._arith.multiply_latency
        self.beat_len = max(self._slots, self.add_latency)
        beat = data.StructLayout({"valid": 1, "first": 1, "last": 1, "data": data.ArrayLayout(operand, t)})
        drain = data.StructLayout({"valid": 1, "data": data.ArrayLayout(acc, t)})
        ports = {
            "a_in": In(beat), "a_out": Out(beat),
            "drain_in": In(drain), "drain_out": Out(drain),
            "drain_token_in": In(1), "drain_token_out": Out(1),
            "slot0_written": Out(1),
        }
        if gather:
            ports["b_in"] = In(data.ArrayLayout(data.ArrayLayout(operand, t), t))
        else:
            lanes_b = data.ArrayLayout(operand, t)
            ports.update({"b_in": In(lanes_b), "b_out": Out(lanes_b)})
        if accumulate:
            ports.update({"fill_in": In(data.ArrayLayout(acc, t)), "fill_out": Out(data.ArrayLayout(acc, t)),
                          "fill_token_in": In(1), "fill_token_out": Out(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        t, slots, arith = self._tensor, self._slots, self._arith
        m.d.sync += self.a_out.eq(self.a_in)
        if self._gather:
            b_reg = Signal.like(self.b_in, name="b_reg")
            m.d.sync += b_reg.eq(self.b_in)

            def b_of(i, j):
                return b_reg[i][j]
        else:
            m.d.sync += self.b_out.eq(self.b_in)

            def b_of(i, j):
                return self.b_out[j]

        if self._accumulate:
            fill_windows, _, fill_token = group_windows(m, self.fill_token_in, t, slots, "fill")
            m.d.sync += self.fill_out.eq(self.fill_in)
            m.d.comb += self.fill_token_out.eq(fill_token)
        drain_windows, draining, drain_token = group_windows(m, self.drain_token_in, t, slots, "drain")
        m.d.comb += self.drain_token_out.eq(drain_token)

        beat = self.a_out
        shadows = [[None] * t for _ in range(t)]
        for i in range(t):
            for j in range(t):
                multiplier = arith.multiplier(tag_width=2)
                adder = arith.adder(tag_width=1)
                m.submodules[f"multiplier_{i}_{j}"] = multiplier
                m.submodules[f"adder_{i}_{j}"] = adder
                m.d.comb += [
                    multiplier.i.valid.eq(beat.valid), multiplier.i.payload.a.eq(beat.data[i]),
                    multiplier.i.payload.b.eq(b_of(i, j)),
                    multiplier.i.payload.tag.eq(Cat(beat.first, beat.last)),
                    multiplier.o.ready.eq(1), adder.o.ready.eq(1),
                ]
                product, sums = multiplier.o, adder.o
                first = product.valid & product.payload.tag[0]
                final = sums.valid & sums.payload.tag[0]
                # The accumulator ring of the lane: the adder's stages plus delay registers.
                ring = delayed(m, sums.payload.result, self.beat_len - self.add_latency, f"ring_{i}_{j}")
                if self._accumulate:
                    start = _Bank(m, f"d_bank_{i}_{j}", arith.accumulator_shape, slots, write=fill_windows[i],
                                  write_data=self.fill_in[j], read=first).data
                else:
                    start = 0  # +0.0 and integer 0 are both all-zero bits
                m.d.comb += [
                    adder.i.valid.eq(product.valid), adder.i.payload.a.eq(product.payload.result),
                    adder.i.payload.b.eq(Mux(first, start, ring)),
                    adder.i.payload.tag.eq(product.payload.tag[1]),
                ]
                shadows[i][j] = _Bank(m, f"shadow_{i}_{j}", arith.accumulator_shape, slots, write=final,
                                      write_data=sums.payload.result, read=drain_windows[i])
                if i == 0 and j == 0:
                    m.d.comb += self.slot0_written.eq(final & (shadows[0][0].write_at == 0))

        with m.If(draining):
            m.d.sync += self.drain_out.valid.eq(1)
            for j in range(t):
                value = shadows[0][j].data
                for i in range(1, t):
                    value = Mux(drain_windows[i], shadows[i][j].data, value)
                m.d.sync += self.drain_out.data[j].eq(value)
        with m.Else():
            m.d.sync += self.drain_out.eq(self.drain_in)
        return m
