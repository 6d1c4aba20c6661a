"""The block floating point PE: an integer mantissa MAC per cycle, block sums out along the row."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..registration import check_bool, check_int
from .block_fp_encoder import MAX_BLOCK
from .os_pe import MAX_SLOTS, _Bank, drain_layout, token_window

__all__ = ["BlockFloatPE", "block_operand_layout", "beat_layout", "block_sum_layout", "sum_width",
           "EXPONENT_SHAPE", "MAX_MANTISSA_BITS"]

EXPONENT_SHAPE = signed(9)
MAX_MANTISSA_BITS = 24


def block_operand_layout(mantissa_bits):
    """One operand of the array: a mantissa and the shared exponent of its block."""
    return data.StructLayout({"mantissa": signed(mantissa_bits), "exponent": EXPONENT_SHAPE})


def beat_layout(mantissa_bits):
    """An A operand moving right along a PE row with the control bits of its beat.

    ``block_first`` / ``block_last``: the beat's k is the first / last of its block;
    ``tile_first`` / ``tile_last``: the beat belongs to the tile's first / last block.
    """
    return data.StructLayout({"valid": 1, "block_first": 1, "block_last": 1, "tile_first": 1,
                              "tile_last": 1, "data": block_operand_layout(mantissa_bits)})


def sum_width(block, mantissa_bits):
    """Bits of a two's complement block sum of ``block`` products, exact for any mantissas."""
    largest = block * (1 << (2 * mantissa_bits - 2))  # (-2^(m-1))^2 per product
    return largest.bit_length() + 1


def block_sum_layout(block, mantissa_bits, index_width, accumulate=False):
    """A block sum moving right along a PE group to the group's converter and f32 adder.

    With ``accumulate`` it also carries ``d``, the raw binary32 initial accumulator of its output,
    meaningful next to the sums of a tile's first block.
    """
    fields = {"valid": 1, "tile_first": 1, "tile_last": 1, "index": unsigned(index_width),
              "sum": signed(sum_width(block, mantissa_bits)), "scale": signed(12)}
    if accumulate:
        fields["d"] = unsigned(32)
    return data.StructLayout(fields)


class BlockFloatPE(wiring.Component):
    """One PE of :class:`~.block_fp_core.BlockFloatCore`: ``sum[u] += mant_a mant_b``, one MAC per cycle.

    The operands sit for one cycle in the PE's input registers (which feed the right and lower
    neighbours), their mantissas are multiplied (one register: a DSP's M register) and the
    product meets the integer sum of its slot at the accumulator register. As in
    :class:`~.os_pe.OutputStationaryPE`, the T slot sums live in a ring of ``beat_len`` stages
    (the accumulator plus delay registers). The first beat of a block adds to 0 instead of the
    ring; the last writes the exact block sum, with its scale ``exponent_a + exponent_b -
    2 (mantissa_bits - 2)``, into a T-entry hold bank. From there a token window puts the T sums
    on the row's block-sum chain (``chain_in`` / ``chain_out``), which carries them to the group's
    shared converter and f32 adder; the f32 results come back on ``result_data`` /
    ``result_write`` into the shadow bank, which the column drain reads exactly as in the
    output-stationary PE.

    With ``accumulate``, a T-entry d bank is filled from a column chain exactly as the
    output-stationary PE's (``fill_in`` / ``fill_token_in``, one slot per cycle in a token window),
    and every chain window puts each slot's d beside its block sum (the adder uses it for a tile's
    first block only). The core times the fill so that a slot's d is written before the first
    block's read and the next tile's d after it.

    Parameters
    ----------
    block : int
        k, the K elements sharing one exponent (1 to 64).
    mantissa_bits : int
        Signed mantissa width (2 to 24).
    slots : int
        T, interleaved outputs per PE (1 to 64).
    beat_len : int
        Cycles per k step (``>= slots``), chosen by the core.
    index : int
        This PE's position in its group, sent with its block sums.
    index_width : int
        Width of the chain's ``index`` field.
    accumulate : bool
        Build the d bank and fill chain and carry d on the block-sum chain.

    Attributes
    ----------
    a_in, a_out : beat_layout(mantissa_bits)
        From the left neighbour; to the right one (registered).
    b_in, b_out : block_operand_layout(mantissa_bits)
        From above; to below (registered).
    chain_in, chain_out, chain_token_in, chain_token_out
        Block sums moving right (``chain_out`` registered) and the token opening this PE's
        ``slots``-cycle window onto the chain (passed on ``slots + 1`` cycles later).
    hold0_written : Out(1)
        Pulses when slot 0's block sum lands in the hold bank (starts the group's chain).
    result_data : In(32), result_write : In(1)
        Final binary32 sums of this PE's slots, in slot order.
    drain_in, drain_out, drain_token_in, drain_token_out, slot0_written
        As in :class:`~.os_pe.OutputStationaryPE`.
    fill_in, fill_out, fill_token_in, fill_token_out
        Only with ``accumulate``: as in :class:`~.os_pe.OutputStationaryPE` (raw binary32 d).
    """

    def __init__(self, *, block=8, mantissa_bits=8, slots=1, beat_len=1, index=0, index_width=1,
                 accumulate=False):
        self._block = check_int("block", block, 1, MAX_BLOCK)
        self._bits = check_int("mantissa_bits", mantissa_bits, 2, MAX_MANTISSA_BITS)
        self._slots = check_int("slots", slots, 1, MAX_SLOTS)
        self._beat_len = check_int("beat_len", beat_len, slots, 1 << 16)
        self._index, self._index_width = index, index_width
        self._accumulate = check_bool("accumulate", accumulate)
        operand = block_operand_layout(mantissa_bits)
        self.sum_layout = block_sum_layout(block, mantissa_bits, index_width, accumulate)
        ports = {
            "a_in": In(beat_layout(mantissa_bits)), "a_out": Out(beat_layout(mantissa_bits)),
            "b_in": In(operand), "b_out": Out(operand),
            "chain_in": In(self.sum_layout), "chain_out": Out(self.sum_layout),
            "chain_token_in": In(1), "chain_token_out": Out(1), "hold0_written": Out(1),
            "result_data": In(32), "result_write": In(1),
            "drain_in": In(drain_layout(32)), "drain_out": Out(drain_layout(32)),
            "drain_token_in": In(1), "drain_token_out": Out(1), "slot0_written": Out(1),
        }
        if accumulate:
            ports.update({"fill_in": In(32), "fill_out": Out(32),
                          "fill_token_in": In(1), "fill_token_out": Out(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        slots = self._slots
        m.d.sync += [self.a_out.eq(self.a_in), self.b_out.eq(self.b_in)]

        # Multiply stage (the DSP's M register), with the beat's control and the block's scale.
        beat, b = self.a_out, self.b_out
        width = sum_width(self._block, self._bits)
        product = Signal(signed(2 * self._bits), name="product")
        control = Signal.like(beat.as_value()[:5], name="product_control")
        scale = Signal(signed(12), name="product_scale")
        m.d.sync += [product.eq(beat.data.mantissa * b.mantissa), control.eq(beat.as_value()[:5]),
                     scale.eq(beat.data.exponent + b.exponent - 2 * (self._bits - 2))]
        p_valid, p_first, p_last, p_tile_first, p_tile_last = (control[i] for i in range(5))

        # Accumulate stage: the ring of beat_len stages holds the T slot sums.
        total = Signal(signed(width), name="block_sum")
        ring = total
        for index in range(self._beat_len - 1):
            delayed = Signal.like(total, name=f"ring_{index}")
            m.d.sync += delayed.eq(ring)
            ring = delayed
        m.d.sync += total.eq(product + Mux(p_first, 0, ring))
        done = Signal(name="block_done")
        done_fields = Signal(data.StructLayout({"tile_first": 1, "tile_last": 1, "scale": signed(12)}))
        m.d.sync += [done.eq(p_valid & p_last), done_fields.tile_first.eq(p_tile_first),
                     done_fields.tile_last.eq(p_tile_last), done_fields.scale.eq(scale)]

        # Hold bank: written at each block end, read onto the row chain in this PE's window.
        entry = data.StructLayout({"sum": signed(width), "fields": done_fields.shape()})
        chain_active, token_out = token_window(m, self.chain_token_in, slots, "chain")
        hold = _Bank(m, "hold", unsigned(entry.size), slots, write=done,
                     write_data=Cat(total, done_fields.as_value()), read=chain_active)
        held = entry(hold.data)
        m.d.comb += [self.chain_token_out.eq(token_out), self.hold0_written.eq(done & (hold.write_at == 0))]
        if self._accumulate:
            # The d bank of the output-stationary PE. Its read pointer steps with the hold bank's:
            # every chain window reads all T slots, so it is back at slot 0 for each block, and the
            # adder uses the d read beside a tile's first block only.
            fill_active, token_out = token_window(m, self.fill_token_in, slots, "fill")
            m.d.sync += self.fill_out.eq(self.fill_in)
            m.d.comb += self.fill_token_out.eq(token_out)
            d_bank = _Bank(m, "d_bank", unsigned(32), slots, write=fill_active, write_data=self.fill_in,
                           read=chain_active)
        with m.If(chain_active):
            m.d.sync += [self.chain_out.valid.eq(1), self.chain_out.tile_first.eq(held.fields.tile_first),
                         self.chain_out.tile_last.eq(held.fields.tile_last),
                         self.chain_out.index.eq(self._index), self.chain_out.sum.eq(held.sum),
                         self.chain_out.scale.eq(held.fields.scale)]
            if self._accumulate:
                m.d.sync += self.chain_out.d.eq(d_bank.data)
        with m.Else():
            m.d.sync += self.chain_out.eq(self.chain_in)

        # Shadow bank and column drain, as in the output-stationary PE.
        drain_active, token_out = token_window(m, self.drain_token_in, slots, "drain")
        shadow = _Bank(m, "shadow", 32, slots, write=self.result_write, write_data=self.result_data,
                       read=drain_active)
        m.d.comb += [self.drain_token_out.eq(token_out),
                     self.slot0_written.eq(self.result_write & (shadow.write_at == 0))]
        with m.If(drain_active):
            m.d.sync += [self.drain_out.valid.eq(1), self.drain_out.data.eq(shadow.data)]
        with m.Else():
            m.d.sync += self.drain_out.eq(self.drain_in)
        return m

