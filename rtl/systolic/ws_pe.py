"""The weight-stationary processing element: ``psum_out = psum_in + a * w`` with a resident weight."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .arithmetic import arithmetic

__all__ = ["WeightStationaryPE", "weight_layout", "psum_layout"]

NEGATIVE_ZERO_F32 = 0x80000000


def weight_layout(shape):
    """A weight on the load chain; ``valid = 0`` marks a row past K (the PE passes sums through)."""
    return data.StructLayout({"valid": 1, "data": shape})


def psum_layout(shape):
    """A partial sum moving down a column; ``last`` marks the final k-tile (the result)."""
    return data.StructLayout({"valid": 1, "last": 1, "data": shape})


class WeightStationaryPE(wiring.Component):
    """One PE of :class:`~.ws_core.WeightStationaryCore`.

    The PE holds one weight of B. An operand of A sits in its input register (``a_out``,
    which feeds the right neighbour) in the same cycle as the partial sum of its output arrives
    from above on ``psum_in``; the product and the sum, delayed to meet it, enter the adder,
    whose registered output is ``psum_out``, ``mac_latency`` cycles after the arrival.

    The next tile's weights shift down the column through ``shadow_in`` / ``shadow_out`` every
    cycle; on ``swap`` the PE takes the weight that is arriving, so the whole array changes
    weights in one cycle. A weight with ``valid = 0`` (a row past K in a ragged k-tile) makes
    the PE add -0.0 (0 for int8) instead of its product, which returns the sum unchanged
    (x + -0.0 = x for every x, including -0.0; NaNs stay NaN).

    Parameters
    ----------
    element : {"f32", "f16", "bf16", "int8"}

    Attributes
    ----------
    a_in, a_out : operand shape
    shadow_in, shadow_out : weight_layout(operand)
    swap : In(1)
    psum_in, psum_out : psum_layout(accumulator)
    mac_latency : int
        Multiplier plus adder latency.
    """

    def __init__(self, *, element="f16"):
        self._arith = arithmetic(element)
        operand, acc = self._arith.operand_shape, self._arith.accumulator_shape
        self.mac_latency = self._arith.multiply_latency + self._arith.add_latency
        super().__init__({
            "a_in": In(operand), "a_out": Out(operand),
            "shadow_in": In(weight_layout(operand)), "shadow_out": Out(weight_layout(operand)),
            "swap": In(1),
            "psum_in": In(psum_layout(acc)), "psum_out": Out(psum_layout(acc)),
        })

    def elaborate(self, platform):
        m = Module()
        arith = self._arith
        weight = Signal(weight_layout(arith.operand_shape))
        m.d.sync += [self.a_out.eq(self.a_in), self.shadow_out.eq(self.shadow_in)]
        with m.If(self.swap):
            m.d.sync += weight.eq(self.shadow_in)

        m.submodules.multiplier = multiplier = arith.multiplier(tag_width=0)
        m.submodules.adder = adder = arith.adder(tag_width=1)
        m.d.comb += [multiplier.i.valid.eq(1), multiplier.i.payload.a.eq(self.a_out),
                     multiplier.i.payload.b.eq(weight.data), multiplier.o.ready.eq(1), adder.o.ready.eq(1)]
        # The sum waits in registers while its product is being formed; so does the weight's
        # valid bit, which may change (swap) while the product is in flight.
        psum, bypass = self.psum_in, ~weight.valid
        for index in range(arith.multiply_latency):
            delayed_psum = Signal.like(psum, name=f"psum_{index}")
            delayed_bypass = Signal(name=f"bypass_{index}")
            m.d.sync += [delayed_psum.eq(psum), delayed_bypass.eq(bypass)]
            psum, bypass = delayed_psum, delayed_bypass
        identity = 0 if arith.element == "int8" else NEGATIVE_ZERO_F32
        m.d.comb += [
            adder.i.valid.eq(psum.valid), adder.i.payload.tag.eq(psum.last),
            adder.i.payload.a.eq(Mux(bypass, identity, multiplier.o.payload.result)),
            adder.i.payload.b.eq(psum.data),
            self.psum_out.valid.eq(adder.o.valid), self.psum_out.last.eq(adder.o.payload.tag),
            self.psum_out.data.eq(adder.o.payload.result),
        ]
        return m
