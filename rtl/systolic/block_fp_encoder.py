"""Block floating point conversion into the array: one block of binary32 values per transfer."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..fp.shift import shift_right_sticky
from ..registration import NO_DROPS, Param, Parameterized, register_block

__all__ = ["BlockFloatEncoder", "MAX_BLOCK"]

MAX_BLOCK = 64
_BIAS = 127
_MAX_GROUP = 8


def _groups(values):
    return [values[start:start + _MAX_GROUP] for start in range(0, len(values), _MAX_GROUP)]


def _wins(values):
    """Per value, whether it is at least every other value of its group of up to ``_MAX_GROUP``
    (all pairs compared at once): the first level of :func:`_largest`, to be registered."""
    return Cat(*[Cat(*[value >= other for other in group[:index] + group[index + 1:]]).all()
                 for group in _groups(values) for index, value in enumerate(group)])


def _largest(m, values, wins):
    """The largest of the unsigned ``values``, given their :func:`_wins`: each group ORs its
    winners (equal winners OR to their common value), then the groups' results are compared
    and ORed the same way: one compare level at the default block of 8 (before the register
    that holds ``wins``), two at 64."""
    while len(values) > 1:
        largest_of_groups = []
        for group, group_wins in zip(_groups(values), _groups(list(wins)), strict=True):
            largest = Signal(len(group[0]))
            winners = Const(0, len(group[0]))
            for value, value_wins in zip(group, group_wins, strict=True):
                winners = winners | Mux(value_wins, value, 0)
            m.d.comb += largest.eq(winners)
            largest_of_groups.append(largest)
        values = largest_of_groups
        wins = _wins(values)
    return values[0]


def encoded_layout(block, mantissa_bits):
    """The encoder's output: the shared exponent, the block's mantissas and the error bit."""
    return data.StructLayout({"exponent": signed(9),
                              "mantissas": data.ArrayLayout(signed(mantissa_bits), block),
                              "invalid": 1})


class BlockFloatCodec(Parameterized, wiring.Component):
    """A conversion between binary32 and block floating point: ``block`` elements per transfer,
    ``mantissa_bits``-bit signed mantissas; a subclass gives its ports (``_ports``)."""

    PARAMS = (
        Param("block", int, 8, "elements per block (k)", minimum=1, maximum=MAX_BLOCK),
        Param("mantissa_bits", int, 8, "signed mantissa width", minimum=2, maximum=24),
    )

    def __init__(self, *, block=8, mantissa_bits=8):
        super().__init__(self._ports(block, mantissa_bits))


class BlockFloatEncoder(BlockFloatCodec):
    """Encode ``block`` binary32 values as block floating point, as :func:`golden.systolic.to_block_fp`.

    For the block ``x``: ``shared = max(max biased exponent field, 1) - 127`` (subnormals count at
    their effective exponent -126; an all-zero block gets -126), ``scale = shared -
    (mantissa_bits - 2)`` and each ``mantissa = clamp(round_half_even(x / 2^scale), ±(2^(mantissa_bits
    - 1) - 1))``. The quotient is the 24-bit significand shifted right by ``max_field - field + 25 -
    mantissa_bits >= 1`` bits, so one right shift with a guard and a sticky bit and an RNE increment
    give it exactly; only a rounding carry on the block's largest element can reach the clamp.

    inf and NaN have no encoding: a block holding one sets ``invalid`` (the golden model raises
    ``ValueError``), and its ``exponent`` and ``mantissas`` are then 0.

    Parameters
    ----------
    block : int
        k, elements per block (1 to 64).
    mantissa_bits : int
        Width of each signed mantissa, sign included (2 to 24).

    Attributes
    ----------
    i : In(stream.Signature(ArrayLayout(unsigned(32), block)))
        One block of raw binary32 bits per transfer.
    o : Out(stream.Signature(StructLayout(exponent: signed(9), mantissas: ArrayLayout(signed(mantissa_bits),
        block), invalid: 1)))
        The shared exponent (-126 .. 127), the mantissas in the order of ``i``, and the error bit.

    Notes
    -----
    Latency 5 (the exponent compares; the exponent maximum; the shift amounts; the shift; round,
    clamp and negate),
    one block per cycle (II = 1). An elastic pipeline: a stage loads whenever it is empty or its
    content moves on, so ``i.ready`` follows ``o.ready`` combinationally and ``o.valid`` never
    waits for ``o.ready``.
    """

    @staticmethod
    def _ports(block, mantissa_bits):
        return {"i": In(stream.Signature(data.ArrayLayout(unsigned(32), block))),
                "o": Out(stream.Signature(encoded_layout(block, mantissa_bits)))}

    def elaborate(self, platform):
        m = Module()
        block, bits = self._block, self._mantissa_bits
        # An elastic pipeline of five stages: each loads when it is empty or its content moves on.
        # What every stage carries along: its valid bit, the block's exponent field, its error bit.
        block_layout = data.StructLayout({"valid": 1, "top": 8, "invalid": 1})
        head1, head2, head3 = (Signal(block_layout, name=f"head{stage}") for stage in (1, 2, 3))
        load4 = ~self.o.valid | self.o.ready
        load3 = ~head3.valid | load4
        load2 = ~head2.valid | load3
        load1 = ~head1.valid | load2
        valid0 = Signal()
        m.d.comb += self.i.ready.eq(~valid0 | load1)

        # Stage 0: hold the block, which exponent fields win all their compares, and the error bit.
        # The maximum compares all pairs at once (in groups of `_MAX_GROUP`): a chain of `block`
        # compare-and-select steps was the block's ECP5 critical path (42.8 MHz at the
        # defaults), a balanced tree of them still 76.9 MHz, and the compares and the choice of
        # the winner in one cycle 97.7 MHz.
        fields = [self.i.payload[index][23:31] for index in range(block)]
        values, wins, invalid = Signal.like(self.i.payload), Signal(block), Signal()
        with m.If(self.i.ready):
            m.d.sync += [valid0.eq(self.i.valid), values.eq(self.i.payload), wins.eq(_wins(fields)),
                         invalid.eq(Cat(*[field == 0xFF for field in fields]).any())]

        # Stage 1: the largest exponent field (at least 1; the floor applies after the maximum,
        # so that 8 fields stay one compare group).
        held_fields = [values[index][23:31] for index in range(block)]
        largest = _largest(m, held_fields, wins)
        largest = Mux(largest == 0, 1, largest)
        values1 = Signal.like(self.i.payload)
        with m.If(load1):
            m.d.sync += [head1.eq(Cat(valid0, largest, invalid)), values1.eq(values)]

        # Stage 2: each element's shift onto the block's grid, `top - field + 25 - bits` (computed
        # in the shift's cycle, the subtraction and the shifter were the ECP5 path, 81.2 MHz).
        aligned_layout = data.StructLayout({"significand": unsigned(24), "amount": unsigned(9), "sign": 1})
        aligned = Signal(data.ArrayLayout(aligned_layout, block))
        with m.If(load2):
            m.d.sync += head2.eq(head1)
        for index in range(block):
            value = values1[index]
            field = value[23:31]
            effective = Mux(field == 0, 1, field)
            with m.If(load2):  # top >= effective, so the amount is never negative
                m.d.sync += aligned[index].eq(Cat(value[:23], field != 0,
                                                  (head1.top - effective + (25 - bits))[:9], value[31]))

        # Stage 3: shift each significand, keeping a guard and a sticky bit. The amount is at least
        # 25 - bits, so the quotient is below 2^(bits - 1): only its bits - 1 low bits are kept, which
        # narrows the rounding addition and the clamp of stage 4 (over 25 bits, they were the ECP5
        # path after the shift amounts were registered, 90.0 MHz).
        shifted_layout = data.StructLayout({"quotient": unsigned(bits - 1), "guard": 1, "sticky": 1,
                                            "sign": 1})
        held = Signal(data.ArrayLayout(shifted_layout, block))
        with m.If(load3):
            m.d.sync += head3.eq(head2)
        for index in range(block):
            item = aligned[index]
            # One guard bit below the significand: the shifted value's LSB is the round bit.
            shifted, sticky = shift_right_sticky(Cat(0, item.significand), item.amount)
            with m.If(load3):
                m.d.sync += held[index].eq(Cat(shifted[1:bits], shifted[0], sticky, item.sign))

        # Stage 4: round half to even, clamp, negate, in one addition. The quotient has bits - 1
        # bits, so the rounded magnitude passes the limit only when the quotient is all ones and
        # rounds up: that increment is dropped instead of clamped. Then -(q + inc) = ~q + ~inc
        # (two's complement), so the sign flips the quotient's bits and the increment, and one
        # adder does what rounding, clamp and negation did in turn (17 cells, 119.7 MHz on ECP5).
        with m.If(load4):
            m.d.sync += [self.o.valid.eq(head3.valid), self.o.payload.invalid.eq(head3.invalid),
                         self.o.payload.exponent.eq(Mux(head3.invalid, 0, head3.top - _BIAS))]
        for index in range(block):
            item = held[index]
            increment = item.guard & (item.sticky | item.quotient[0]) & ~item.quotient.all()
            flip = item.sign.replicate(bits)
            mantissa = Signal(signed(bits), name=f"mantissa_{index}")
            m.d.comb += mantissa.eq((item.quotient ^ flip) + (increment ^ item.sign))
            with m.If(load4):
                m.d.sync += self.o.payload.mantissas[index].eq(Mux(head3.invalid, 0, mantissa))
        return m


register_block(
    "block_fp_encoder", BlockFloatEncoder, family="systolic",
    summary="binary32 blocks to block floating point (shared exponent, integer mantissas), as golden.",
    golden="golden.systolic.block_fp:to_block_fp",
    drops=NO_DROPS,
)
