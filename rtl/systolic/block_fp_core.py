"""The block floating point PE grid: integer MACs, one converter and f32 adder per group of PEs."""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..fp.fp_add import FloatAdder
from ..registration import check_bool, check_int
from .block_fp_encoder import MAX_BLOCK
from .block_fp_pe import MAX_MANTISSA_BITS, BlockFloatPE, block_operand_layout
from .block_fp_sum_converter import BlockSumConverter
from .os_core import MAX_DIMENSION, delayed
from .os_pe import MAX_SLOTS

__all__ = ["BlockFloatCore", "groups"]


def groups(cols, block):
    """The PE groups of one row that share a converter and an adder: ``(first column, size)``.

    A group of g PEs delivers ``g T`` block sums per block, i.e. per ``block beat_len`` cycles, so
    ``g <= block`` keeps its chain and shared unit within one sum per cycle.
    """
    return [(c0, min(block, cols - c0)) for c0 in range(0, cols, block)]


class BlockFloatCore(wiring.Component):
    """``rows x cols`` block floating point PEs on the output-stationary schedule (lockstep, no stalls).

    The beat contract is :class:`~.os_core.OutputStationaryCore`'s (a beat presented in cycle t is
    in PE(r, c)'s input registers in cycle ``t + 1 + r + c``; ``first`` / ``last`` mark k = 0 and
    k = K - 1), with operands ``{mantissa, exponent}`` (the block's shared exponent repeated on
    each of its k) and K a whole number of blocks per tile. Counters at the input follow the
    position of each beat in its block (they rely on every tile being whole blocks, which
    :class:`~.block_fp_array.BlockFloatArray` guarantees).

    Each PE forms the exact integer sum of its block (``BlockFloatPE``); the block sums of a group
    of up to ``block`` PEs of a row travel along a chain to one :class:`~.block_fp_sum_converter.
    BlockSumConverter` and one f32 :class:`~rtl.fp.fp_add.FloatAdder`, whose T x group f32
    accumulators live in a ring of ``block beat_len`` stages (the adder's six and delay
    registers): a sum's accumulator comes back round when that output's next block sum arrives.
    The first block of a tile adds to +0, or with ``accumulate`` to the output's d. The final sum
    returns to its PE's shadow bank and leaves through the column drains and the output de-skew of
    the output-stationary core.

    **D** (``accumulate``): row ``(r, u)`` of a tile's D, in row-major order, is presented on
    ``fill`` (``first`` on the tile's first row) in the ``rows T`` consecutive cycles from
    ``t0 - fill_lead``, t0 being the tile's first beat, as in :class:`~.os_core.OutputStationaryCore`.
    Column ``c = c0 + j`` (PE j of the group starting at c0) is delayed ``c + j T`` cycles on its
    way in (the dense core: c), then moves down a fill chain into each PE's d bank, row r's window
    opening ``(T + 1) r`` cycles after row 0's: slot u of PE(r, c) is written in cycle
    ``t0 - fill_lead + c + j T + (T + 1) r + u``. The group chain reads it beside the first
    block's sum in cycle ``t0 + (block - 1) beat_len + 4 + r + c0 + j (T + 1) + u`` (PE j's window
    opens ``j (T + 1)`` cycles after the head's). The extra ``j T`` of skew makes the gap between
    write and read independent of j: ``fill_lead + (block - 1) beat_len + 4 - T r``. It must be at
    least 1 for every row (write before read) and at most the tile period P (the next tile's d
    written no earlier than this one's read, in row 0), so ``fill_lead = (rows - 1) T -
    (block - 1) beat_len - 3``, the latest fill, and ``P >= beat_len + (rows - 1) T`` leaves the
    second bound met for any K. The count of the cycle model is unchanged: the fill never stalls
    the beats when D is there in time.

    Parameters
    ----------
    rows, cols : int
        PE grid, 1 to 256 each.
    block : int
        k, elements per shared exponent along K (1 to 64).
    mantissa_bits : int
        Signed mantissa width (2 to 24).
    slots : int
        T, outputs per PE (1 to 64).
    accumulate : bool
        ``C = A B + D`` with D through ``fill``; otherwise ``C = A B``.

    Attributes
    ----------
    beat : In(StructLayout(valid, first, last, a: ArrayLayout(operand, rows), b: ArrayLayout(operand, cols)))
    fill : In(StructLayout(first, data: ArrayLayout(unsigned(32), cols)))
        Only with ``accumulate``: raw binary32 rows of D.
    result : Out(StructLayout(valid, data: ArrayLayout(unsigned(32), cols)))
    operand_shape, accumulator_shape
        ``{mantissa: signed(mantissa_bits), exponent: signed(9)}`` and raw binary32.
    acc_latency : int
        A of the cycle model, ``ceil(6 / block)``: each output takes one f32 addition per block,
        and the adder's six stages must come round within ``block beat_len`` cycles.
    beat_len : int
        ``max(T, acc_latency)``.
    mac_latency : int
        L of the cycle model, ``6 + converter + adder latency + max offset - cols`` (see
        docs/systolic.md, section 7c): the array's cycles are ``gemm_cycles(M, K, N, ...,
        mac_latency=L, acc_latency=A)`` with K rounded up to whole blocks.
    fill_lead : int
        ``(rows - 1) T - (block - 1) beat_len - 3`` with ``accumulate`` (negative: the fill follows
        the first beat), 0 without.
    """

    def __init__(self, *, rows=2, cols=2, block=8, mantissa_bits=8, slots=1, accumulate=False):
        self._rows = check_int("rows", rows, 1, MAX_DIMENSION)
        self._cols = check_int("cols", cols, 1, MAX_DIMENSION)
        self._block = check_int("block", block, 1, MAX_BLOCK)
        self._bits = check_int("mantissa_bits", mantissa_bits, 2, MAX_MANTISSA_BITS)
        self._slots = check_int("slots", slots, 1, MAX_SLOTS)
        self._accumulate = check_bool("accumulate", accumulate)
        self.operand_shape = block_operand_layout(mantissa_bits)
        self.accumulator_shape = unsigned(32)
        self.acc_latency = -(-FloatAdder.LATENCY // block)
        self.beat_len = max(slots, self.acc_latency)
        self._groups = groups(cols, block)
        self._index_width = max(1, (block - 1).bit_length())
        # Offset of column c's final sums relative to the row's first block sum (see elaborate).
        self._offset = {}
        for c0, size in self._groups:
            for j in range(size):
                self._offset[c0 + j] = c0 + size + j * slots
        self._max_offset = max(self._offset.values())
        self.mac_latency = (6 + BlockSumConverter.LATENCY + FloatAdder.LATENCY + self._max_offset - cols)
        # The latest fill that still writes every d before the chain reads it (see the docstring).
        self.fill_lead = (rows - 1) * slots - (block - 1) * self.beat_len - 3 if accumulate else 0
        ports = {
            "beat": In(data.StructLayout({"valid": 1, "first": 1, "last": 1,
                                          "a": data.ArrayLayout(self.operand_shape, rows),
                                          "b": data.ArrayLayout(self.operand_shape, cols)})),
            "result": Out(data.StructLayout({"valid": 1, "data": data.ArrayLayout(unsigned(32), cols)})),
        }
        if accumulate:
            ports["fill"] = In(data.StructLayout({"first": 1, "data": data.ArrayLayout(unsigned(32), cols)}))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        rows, cols, slots, block = self._rows, self._cols, self._slots, self._block
        bl = self.beat_len

        # Position of each beat in its block. Tiles are whole blocks, so the counters wrap to 0
        # at every tile end and never need a restart.
        beat = self.beat
        in_slot = Signal(range(slots))
        in_block = Signal(range(block))
        first_block = Signal()
        block_first = in_block == 0
        tile_first = Mux(block_first, beat.first, first_block)
        with m.If(beat.valid):
            m.d.sync += [in_slot.eq(Mux(in_slot == slots - 1, 0, in_slot + 1)), first_block.eq(tile_first)]
            with m.If(in_slot == slots - 1):
                m.d.sync += in_block.eq(Mux(in_block == block - 1, 0, in_block + 1))
        control = Cat(beat.valid, block_first, in_block == block - 1, tile_first, beat.last)

        grid = []
        for r in range(rows):
            row = []
            for c0, size in self._groups:
                for j in range(size):
                    pe = BlockFloatPE(block=block, mantissa_bits=self._bits, slots=slots, beat_len=bl,
                                      index=j, index_width=self._index_width, accumulate=self._accumulate)
                    m.submodules[f"pe_{r}_{c0 + j}"] = pe
                    row.append(pe)
            grid.append(row)

        for r in range(rows):
            first = grid[r][0]
            operand = delayed(m, beat.a[r].as_value(), r, f"skew_a{r}", reset_less=True)
            m.d.comb += [first.a_in.as_value()[:5].eq(delayed(m, control, r, f"skew_control{r}")),
                         first.a_in.data.eq(operand)]
            for c in range(1, cols):
                m.d.comb += grid[r][c].a_in.eq(grid[r][c - 1].a_out)
            for index, (c0, size) in enumerate(self._groups):
                self._group_unit(m, r, index, grid[r][c0:c0 + size])

        for c in range(cols):
            top = grid[0][c]
            m.d.comb += top.b_in.eq(delayed(m, beat.b[c].as_value(), c, f"skew_b{c}", reset_less=True))
            # As in the output-stationary core, the drain starts beat_len cycles after the top
            # PE's slot 0 is final, so the shadow bank is read before the next tile rewrites it.
            m.d.comb += top.drain_token_in.eq(delayed(m, top.slot0_written, bl, f"drain_start{c}"))
            if self._accumulate:
                # c + j T cycles: the chain reads PE j of a group j (T + 1) cycles after its head.
                j = c - max(c0 for c0, _ in self._groups if c0 <= c)
                column = delayed(m, Cat(self.fill.first, self.fill.data[c]), c + j * slots, f"skew_d{c}")
                m.d.comb += [top.fill_token_in.eq(column[0]), top.fill_in.eq(column[1:])]
            for r in range(1, rows):
                above, pe = grid[r - 1][c], grid[r][c]
                m.d.comb += [pe.b_in.eq(above.b_out), pe.drain_in.eq(above.drain_out),
                             pe.drain_token_in.eq(above.drain_token_out)]
                if self._accumulate:
                    m.d.comb += [pe.fill_in.eq(above.fill_out), pe.fill_token_in.eq(above.fill_token_out)]
            # De-skew: column c's results trail the row's first block sum by offset(c) cycles.
            bottom = delayed(m, grid[rows - 1][c].drain_out.as_value(),
                             self._max_offset - self._offset[c], f"deskew{c}")
            m.d.comb += self.result.data[c].eq(bottom[1:])
            if self._offset[c] == self._max_offset:
                m.d.comb += self.result.valid.eq(bottom[0])
        return m

    def _group_unit(self, m, r, index, pes):
        """The block-sum chain of one group of PEs, its converter, its f32 adder and accumulator ring.

        PE j of the group opens its T-cycle chain window ``j (T + 1)`` cycles after the first PE,
        which starts one cycle after its slot 0 block sum is written, so the group's sums reach
        the converter one per cycle, PE by PE, slots in order.
        """
        name = f"r{r}_g{index}"
        iw = self._index_width
        head = pes[0]
        m.d.comb += head.chain_token_in.eq(delayed(m, head.hold0_written, 1, f"chain_start_{name}"))
        for previous, pe in zip(pes, pes[1:], strict=False):
            m.d.comb += [pe.chain_in.eq(previous.chain_out), pe.chain_token_in.eq(previous.chain_token_out)]
        end = pes[-1].chain_out

        # With accumulate, d rides in the converter's tag beside its first block's sum.
        d_width = 32 if self._accumulate else 0
        converter = BlockSumConverter(width=len(end.sum), tag_width=2 + iw + d_width)
        adder = FloatAdder(fmt="f32", tag_width=1 + iw)
        m.submodules[f"converter_{name}"] = converter
        m.submodules[f"adder_{name}"] = adder
        m.d.comb += [
            converter.i.valid.eq(end.valid), converter.i.payload.a.eq(end.sum),
            converter.i.payload.b.eq(end.scale),
            converter.i.payload.tag.eq(Cat(end.tile_first, end.tile_last, end.index,
                                           *([end.d] if self._accumulate else []))),
            converter.o.ready.eq(1), adder.o.ready.eq(1),
        ]
        tag = converter.o.payload.tag
        ring = delayed(m, adder.o.payload.result, self._block * self.beat_len - FloatAdder.LATENCY,
                       f"ring_{name}", reset_less=True)
        start = tag[2 + iw:] if self._accumulate else 0  # +0.0 without D
        m.d.comb += [
            adder.i.valid.eq(converter.o.valid), adder.i.payload.a.eq(Mux(tag[0], start, ring)),
            adder.i.payload.b.eq(converter.o.payload.result), adder.i.payload.tag.eq(tag[1:2 + iw]),
        ]
        final = adder.o.valid & adder.o.payload.tag[0]
        for j, pe in enumerate(pes):
            m.d.comb += [pe.result_data.eq(adder.o.payload.result),
                         pe.result_write.eq(final & (adder.o.payload.tag[1:] == j))]
