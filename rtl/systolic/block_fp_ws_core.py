"""The weight-stationary block floating point PE grid: integer column sums, one f32 adder per block."""

from amaranth.hdl import Cat, Mux, Signal, unsigned
from amaranth.lib import data

from ..fp.fp_add import FloatAdder
from ..registration import check_int
from .block_fp_encoder import MAX_BLOCK
from .block_fp_pe import MAX_MANTISSA_BITS, block_operand_layout, sum_width
from .block_fp_sum_converter import BlockSumConverter
from .block_fp_ws_pe import MIN_INTEGER_LATENCY, BlockFloatWeightStationaryPE
from .os_core import MAX_DIMENSION, delayed
from .ws_core import WeightStationaryCore
from .ws_pe import NEGATIVE_ZERO_F32

__all__ = ["BlockFloatWeightStationaryCore", "check_block_parameters"]


def check_block_parameters(*, rows, block, mantissa_bits):
    """Reject a block format the weight-stationary grid cannot run, naming the parameter."""
    check_int("block", block, 1, MAX_BLOCK)
    check_int("mantissa_bits", mantissa_bits, 2, MAX_MANTISSA_BITS)
    check_int("rows", rows, 1, MAX_DIMENSION)
    if rows % block:
        raise ValueError(f"rows must be a multiple of block = {block} (whole blocks per k-tile), not {rows}")


class BlockFloatWeightStationaryCore(WeightStationaryCore):
    """``rows x cols`` block floating point PEs on the weight-stationary schedule (lockstep).

    The ports, the weight load and swap, the A skew and the buffers between k-tiles are
    :class:`~.ws_core.WeightStationaryCore`'s, with encoded operands ``{mantissa, exponent}`` (a
    lane carries its k's block exponent) and binary32 sums. ``rows`` is a whole number of
    blocks, so every k-tile holds ``rows / block`` whole blocks.

    Down each column the PEs of a block form the block's exact integer sum, ``L`` cycles per PE
    row (:class:`~.block_fp_ws_pe.BlockFloatWeightStationaryPE`). Below a block's last row a
    :class:`~.block_fp_sum_converter.BlockSumConverter` rounds the sum times ``2^scale`` to
    binary32 and an f32 :class:`~rtl.fp.fp_add.FloatAdder` adds it to the output's accumulator:
    ``d`` (or +0) or the previous k-tile's result from the buffer for a k-tile's first block,
    the previous block's adder output (delayed ``block L - 6`` cycles) for the others. A block
    wholly past K adds -0.0, which leaves every accumulator unchanged. So the order of the f32
    additions is :func:`golden.systolic.block_fp_gemm`'s: increasing blocks, one conversion and
    one addition each.

    The integer sums do not wait for the f32 additions: row ``r`` sees row m's operand in cycle
    ``s + m + r L + c`` as in the floating-point array, and the last block's accumulator leaves
    ``converter + adder`` cycles after the last PE row, so results of row m appear in cycle
    ``s + m + cols - 1 + rows L + 10``. The buffer is read for a k-tile's first block
    ``block L + 3`` cycles after the row's operand reached PE(0, c), so consecutive k-tiles'
    starts need only ``(rows - block) L + 7`` cycles between them (``chain_cycles``).

    Parameters
    ----------
    rows, cols : int
        PE grid; ``rows`` a multiple of ``block``.
    block : int
        Elements per shared exponent along K (1 to 64).
    mantissa_bits : int
        Signed mantissa width, sign included (2 to 24).
    accumulate : bool
        Take ``d`` (binary32) on ``row`` for the first k-tile.
    max_m : int
        Depth of each column's buffer.

    Attributes
    ----------
    load, row, m_size, result
        As :class:`~.ws_core.WeightStationaryCore`'s.
    mac_latency : int
        L, cycles per PE row: ``max(2, ceil(6 / block))``, so the accumulator of a block is ready
        before the next block's sum is converted.
    tail_latency : int
        Converter plus adder latency, 10: cycles from the last PE row to the result.
    last_row_offset, chain_cycles : int
        ``(rows - 1) L`` and ``(rows - block) L + 7``, for the array's tile clock.
    """

    def __init__(self, *, rows=2, cols=2, block=2, mantissa_bits=8, accumulate=False, max_m=64):
        check_block_parameters(rows=rows, block=block, mantissa_bits=mantissa_bits)
        self._check_geometry(rows, cols, accumulate, max_m)
        self._block, self._bits = block, mantissa_bits
        latency = max(MIN_INTEGER_LATENCY, -(-FloatAdder.LATENCY // block))
        self.mac_latency = latency
        self.tail_latency = BlockSumConverter.LATENCY + FloatAdder.LATENCY
        self.last_row_offset = (rows - 1) * latency
        self.chain_cycles = (rows - block) * latency + FloatAdder.LATENCY + 1
        self._init_ports(block_operand_layout(mantissa_bits), unsigned(32))

    def _pe(self, row):
        return BlockFloatWeightStationaryPE(block=self._block, mantissa_bits=self._bits,
                                            block_start=row % self._block == 0, latency=self.mac_latency)

    def _column(self, m, c, column, ahead, here):
        block, latency = self._block, self.mac_latency
        convert_latency = BlockSumConverter.LATENCY
        m.d.comb += [column[0].psum_in.valid.eq(here[0]), column[0].psum_in.first.eq(here[1]),
                     column[0].psum_in.last.eq(here[2])]
        start = 0  # +0.0
        if self._accumulate:
            # d meets the first block's converted sum at its adder input.
            start = delayed(m, self.row.d[c], c + 1 + block * latency + convert_latency, f"skew_d{c}",
                            reset_less=True)
        final = Signal(data.StructLayout({"valid": 1, "last": 1, "data": 32}), name=f"final{c}")
        accumulator = None
        for index, end in enumerate(column[block - 1::block]):
            total = end.psum_out
            name = f"c{c}_b{index}"
            converter = BlockSumConverter(width=sum_width(block, self._bits), tag_width=3)
            adder = FloatAdder(fmt="f32", tag_width=1)
            m.submodules[f"converter_{name}"] = converter
            m.submodules[f"adder_{name}"] = adder
            m.d.comb += [converter.i.valid.eq(total.valid), converter.i.payload.a.eq(total.sum),
                         converter.i.payload.b.eq(total.scale),
                         converter.i.payload.tag.eq(Cat(total.first, total.last, total.skip)),
                         converter.o.ready.eq(1), adder.o.ready.eq(1)]
            first, last, skip = (converter.o.payload.tag[i] for i in range(3))
            if accumulator is None:
                # A k-tile's first block starts from d (or +0) or the buffer, read one cycle
                # before its converted sum is ready.
                read = delayed(m, Cat(total.valid, total.first), convert_latency - 1, f"read_control{c}")
                stored = self._psum_buffer(m, c, read=read[0] & ~read[1], write=final.valid,
                                           write_data=final.data)
                accumulator = Mux(first, start, stored)
            m.d.comb += [adder.i.valid.eq(converter.o.valid), adder.i.payload.tag.eq(last),
                         adder.i.payload.a.eq(accumulator),
                         adder.i.payload.b.eq(Mux(skip, NEGATIVE_ZERO_F32, converter.o.payload.result))]
            # The next block's sum is converted block L cycles later; its accumulator waits.
            accumulator = delayed(m, adder.o.payload.result, block * latency - FloatAdder.LATENCY,
                                  f"accumulator_{name}", reset_less=True)
        m.d.comb += [final.valid.eq(adder.o.valid), final.last.eq(adder.o.payload.tag[0]),
                     final.data.eq(adder.o.payload.result)]
        self._result(m, c, final.valid & final.last, final.data)
