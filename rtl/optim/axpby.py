"""SIMD AXPBY: ``y = alpha * a + beta * b`` over ``lanes`` binary32 lanes (Smart-Infinity Figure 7)."""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..fp.fp_add import FloatAdder
from ..fp.fp_fma import FloatFusedMultiplyAdd
from ..fp.fp_mul import FloatMultiplier
from ..registration import NO_DROPS, Param, Parameterized, register_block
from .credit import credit_depth, credited_pipeline
from .dataflow import Dataflow

__all__ = ["AXPBY", "MAX_LANES"]

MAX_LANES = 32


class AXPBY(Parameterized, wiring.Component):
    """SIMD AXPBY unit: ``y[k] = alpha * a[k] + beta * b[k]`` for ``lanes`` binary32 lanes per transfer.

    The paper's general updater builds its moving averages from this unit (Smart-Infinity
    Section V-A, Figure 7). Each lane is a pipeline of :mod:`rtl.fp` units in the operation
    order of :mod:`golden.optim.axpby`, bit-exact with it: with ``fused=False``
    ``fl(fl(alpha * a) + fl(beta * b))`` (two multipliers and an adder), with ``fused=True``
    ``fma(alpha, a, fl(beta * b))`` (a multiplier and a fused multiply-add). NaN results
    are the canonical quiet NaN. The pipeline never stalls: a credit-managed output FIFO
    of :func:`~rtl.optim.credit.credit_depth` entries absorbs backpressure.

    Parameters
    ----------
    lanes : int
        Lanes per transfer, 1 to 32.
    fused : bool
        Use the fused order (see above). Default False.

    Attributes
    ----------
    i : In(stream.Signature(StructLayout({"a": ArrayLayout(32, lanes), "b": ArrayLayout(32, lanes)})))
        Operand vectors (raw binary32 bits; lane 0 in the low bits).
    o : Out(stream.Signature(ArrayLayout(32, lanes)))
        Result vectors, in order.
    alpha, beta : In(32)
        Coefficients as binary32 bits; hold them stable while transfers are in flight.
    latency : int
        Cycles from an accepted input to its result entering the output FIFO, the sum of
        the ``rtl.fp`` unit latencies: 13 (multiply 7, add 6) or 18 fused (multiply 7,
        FMA 11) with the current units. The output appears 1 to 2 cycles later.

    Throughput is one transfer (``lanes`` results) per cycle while ``o.ready`` is high.
    """

    PARAMS = (
        Param("lanes", int, 2, "binary32 lanes per transfer", minimum=1, maximum=MAX_LANES),
        Param("fused", bool, False, "fma(alpha, a, beta*b) instead of alpha*a + beta*b"),
    )

    def __init__(self, *, lanes=2, fused=False):
        vector = data.ArrayLayout(32, lanes)
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"a": vector, "b": vector}))),
            "o": Out(stream.Signature(vector)),
            "alpha": In(32),
            "beta": In(32),
        })
        self.latency = self._datapath(Dataflow(None, "schedule")).time
        self.fifo_depth = credit_depth(self.latency)

    throughput = 1

    def elaborate(self, platform):
        m = Module()
        issue, result = credited_pipeline(m, i=self.i, o=self.o, latency=self.latency)
        for lane in range(self._lanes):
            y = self._datapath(Dataflow(m, f"lane{lane}"), lane)
            m.d.comb += result[lane].eq(y.value)
        return m

    def _datapath(self, df, lane=0):
        """One lane in the operation order of :mod:`golden.optim.axpby`; returns the result as Timed."""
        alpha, beta = df.constant(self.alpha, "alpha"), df.constant(self.beta, "beta")
        a, b = df.input(self.i.payload.a[lane], "a"), df.input(self.i.payload.b[lane], "b")
        scaled_b = df.unit(FloatMultiplier(), "beta_b", a=b, b=beta)
        if self._fused:
            return df.unit(FloatFusedMultiplyAdd(), "alpha_a_plus", a=alpha, b=a, c=scaled_b)
        scaled_a = df.unit(FloatMultiplier(), "alpha_a", a=a, b=alpha)
        return df.unit(FloatAdder(), "sum", a=scaled_a, b=scaled_b)


register_block(
    "axpby", AXPBY, family="optim",
    summary="SIMD binary32 y = alpha*a + beta*b (Smart-Infinity Figure 7), II = 1, credit FIFO output.",
    golden="golden.optim.axpby:axpby",
    drops=NO_DROPS,
)
