"""The weight-stationary block floating point PE: ``psum_out = psum_in + mant_a mant_w``, an integer MAC."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..registration import check_bool, check_int
from .block_fp_encoder import MAX_BLOCK
from .block_fp_pe import MAX_MANTISSA_BITS, block_operand_layout, sum_width
from .ws_pe import weight_layout

__all__ = ["BlockFloatWeightStationaryPE", "column_sum_layout", "MIN_INTEGER_LATENCY"]

MIN_INTEGER_LATENCY = 2  # the product register (a DSP's M register) and the sum register


def column_sum_layout(block, mantissa_bits):
    """A block's integer partial sum moving down a column, with its output's control bits.

    ``first`` / ``last``: the row belongs to the first / last k-tile of its n-tile; ``skip``: the
    block lies wholly past K (its converted sum must not be added); ``scale``: the power of two
    of the sum's LSB, ``exponent_a + exponent_w - 2 (mantissa_bits - 2)``.
    """
    return data.StructLayout({"valid": 1, "first": 1, "last": 1, "skip": 1,
                              "sum": signed(sum_width(block, mantissa_bits)), "scale": signed(12)})


class BlockFloatWeightStationaryPE(wiring.Component):
    """One PE of :class:`~.block_fp_ws_core.BlockFloatWeightStationaryCore`.

    The PE holds one encoded weight ``{mantissa, exponent}`` of B. An A operand sits in the
    input register (``a_out``, which feeds the right neighbour) in the cycle its output's
    integer partial sum arrives from above on ``psum_in``; the mantissa product (one register,
    a DSP's M register) then waits ``latency - 2`` more registers and meets the sum, delayed to
    match, at the sum register ``psum_out``: ``latency`` cycles per PE row.

    The first PE of a block (``block_start``) ignores the incoming sum (each block is summed
    from 0) and stamps the block's ``scale`` (A's shared exponent plus the weight's) and
    ``skip`` (its weight is a row past K, so the whole block is) on it; the control bits pass
    through. A weight with ``valid = 0`` contributes 0: a short last block is padded with zero
    mantissas, as in :func:`golden.systolic.block_fp_gemm`.

    Weights are loaded and swapped as in :class:`~.ws_pe.WeightStationaryPE` (shadow chain,
    broadcast ``swap``).

    Parameters
    ----------
    block : int
        Elements per shared exponent (1 to 64): sets the sum's width.
    mantissa_bits : int
        Signed mantissa width (2 to 24).
    block_start : bool
        This PE is the first row of its block.
    latency : int
        Cycles per PE row (>= 2).

    Attributes
    ----------
    a_in, a_out : block_operand_layout(mantissa_bits)
    shadow_in, shadow_out : weight_layout(block_operand_layout(mantissa_bits))
    swap : In(1)
    psum_in, psum_out : column_sum_layout(block, mantissa_bits)
    """

    def __init__(self, *, block=8, mantissa_bits=8, block_start=False, latency=MIN_INTEGER_LATENCY):
        self._block = check_int("block", block, 1, MAX_BLOCK)
        self._bits = check_int("mantissa_bits", mantissa_bits, 2, MAX_MANTISSA_BITS)
        self._block_start = check_bool("block_start", block_start)
        self._latency = check_int("latency", latency, MIN_INTEGER_LATENCY, 64)
        operand = block_operand_layout(mantissa_bits)
        total = column_sum_layout(block, mantissa_bits)
        super().__init__({
            "a_in": In(operand), "a_out": Out(operand),
            "shadow_in": In(weight_layout(operand)), "shadow_out": Out(weight_layout(operand)),
            "swap": In(1),
            "psum_in": In(total), "psum_out": Out(total),
        })

    def elaborate(self, platform):
        m = Module()
        weight = Signal(weight_layout(block_operand_layout(self._bits)))
        m.d.sync += [self.a_out.eq(self.a_in), self.shadow_out.eq(self.shadow_in)]
        with m.If(self.swap):
            m.d.sync += weight.eq(self.shadow_in)

        # The product (and, in a block's first PE, the block's scale and skip) is taken from the
        # weight of this cycle: a swap in flight cannot change it.
        product = Signal(signed(2 * self._bits), name="product")
        incoming = Signal.like(self.psum_in, name="sum_delayed")
        m.d.sync += [product.eq(Mux(weight.valid, self.a_out.mantissa * weight.data.mantissa, 0)),
                     incoming.eq(self.psum_in)]
        if self._block_start:
            m.d.sync += [incoming.sum.eq(0), incoming.skip.eq(~weight.valid),
                         incoming.scale.eq(self.a_out.exponent + weight.data.exponent - 2 * (self._bits - 2))]
        for index in range(self._latency - MIN_INTEGER_LATENCY):
            later_product = Signal.like(product, name=f"product_{index}")
            later_sum = Signal.like(incoming, name=f"sum_delayed_{index}")
            m.d.sync += [later_product.eq(product), later_sum.eq(incoming)]
            product, incoming = later_product, later_sum
        m.d.sync += [self.psum_out.eq(incoming), self.psum_out.sum.eq(incoming.sum + product)]
        return m
