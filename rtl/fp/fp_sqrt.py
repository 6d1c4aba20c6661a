"""Fully pipelined IEEE-754 square root (II = 1) by an unrolled non-restoring recurrence."""

from amaranth.hdl import Cat, Const, Mux

from . import digit_recurrence as dr
from .classify import UnpackedFloat
from .pipeline import register_unit
from .rounding import denormalise, denormalise_shift
from .shift import count_leading_zeros, normalise_left

__all__ = ["FloatSquareRoot"]


class FloatSquareRoot(dr.RecurrenceUnit):
    """IEEE-754 square root of ``a``, rounded to nearest even, one operation per cycle.

    Results and flags match Berkeley SoftFloat (RISC-V NaNs) bit for bit: subnormal
    operands are normalised first, ``sqrt(-0) = -0``, ``sqrt(+Inf) = +Inf``, a negative
    non-zero operand (``-Inf`` included) or a signalling NaN gives the canonical quiet NaN
    with invalid, and a quiet NaN gives the canonical NaN without a flag. The only flag a
    finite root can raise is inexact.

    The operand is normalised to ``m * 2**e`` with ``m`` in [1, 2); when ``e`` is odd the
    radicand becomes ``2m`` so that the exponent halves exactly. The ``p + 1`` root bits
    (``p`` result bits and a guard bit; ``p`` is the precision) come from ``p + 1`` steps of
    the radix-2 non-restoring recurrence of Li and Chu, two radicand bits per step, with
    the partial remainder carried down the pipeline; step ``j`` is a ``(j + 2)``-bit
    add-or-subtract, 27 bits at most for f32. The last remainder gives the sticky bit, and
    :func:`~rtl.fp.rounding.round_aligned` rounds the root.

    Parameters
    ----------
    fmt, flush_subnormals, tag_width, bits_per_stage
        As :class:`~rtl.fp.digit_recurrence.RecurrenceUnit` documents them. The root of a
        non-zero operand is never subnormal in f32, f16 or bf16. Recurrence step ``j`` is a
        ``(j + 2)``-bit add/subtract, at most ``p + 3`` bits.

    Attributes
    ----------
    i : In(stream.Signature(operand_layout(fmt.width, ("a",), tag_width)))
        Operand ``a`` (raw bits) and ``tag``.
    o : Out(stream.Signature(result_layout(fmt.width, tag_width)))
        ``result`` bits, SoftFloat ``flags`` and ``tag``.
    latency : int
        Register stages from ``i`` to ``o``: 1 (unpack and special cases) + 1 (normalise a
        subnormal operand; absent with ``flush_subnormals``) + ``ceil((p + 1) /
        bits_per_stage)`` (recurrence) + 1 (sticky bit) + 1 (round, output). With
        ``bits_per_stage=1``: f32 29, f16 16, bf16 13 (one less each when flushing).

    Throughput is one operation per cycle (II = 1) while ``o.ready`` is high; ``i.ready``
    is ``~o.valid | o.ready`` and a stalled output freezes the whole pipeline.
    """

    OPERANDS = ("a",)
    EXTRA_STEPS = 1

    def _datapath(self, m, pipe):
        fmt, flush = self._fmt, self._flush
        p, bias = fmt.precision, fmt.bias
        a = UnpackedFloat(fmt, self.i.payload.a, flush_subnormals=flush)

        # Biased exponent of the root, over every normalised biased operand exponent
        # (1 - (p - 1) .. max_field - 1).
        def root_exponent(exponent):
            return ((exponent - bias) >> 1) + bias

        lowest, highest = root_exponent(2 - p), root_exponent(fmt.max_exponent_field - 1)
        exp_shape = dr.signed_range_shape(lowest, highest + 2)

        def inverted_radicand(significand, exponent):
            # [1, 4) with two integer bits: doubled when the unbiased exponent is odd. It is
            # registered inverted, which the select LUT does for free (see sqrt_step).
            odd = exponent[0] ^ (bias & 1)
            return ~Mux(odd, Cat(Const(0, 1), significand), Cat(significand, Const(0, 1)))

        # Stage: unpack, settle the special cases.
        special = dr.SpecialCase.decide(
            nan=a.is_nan | (a.sign & ~a.is_zero),
            invalid=a.is_signaling | (a.sign & ~a.is_zero & ~a.is_nan),
            inf=a.is_infinite, divide_by_zero=0, zero=a.is_zero)
        if flush:
            s = pipe.stage(sign=a.sign, special=special,
                           inverted_radicand=inverted_radicand(a.significand, a.exponent),
                           exponent=dr.fit_signed(root_exponent(a.exponent), exp_shape))
        else:
            s = pipe.stage(sign=a.sign, special=special, sig=a.significand, exp=a.exponent,
                           lz=count_leading_zeros(a.significand))
            # Stage: normalise a subnormal significand.
            exponent = s.exp - s.lz
            s = pipe.stage(s, "sign", "special",
                           inverted_radicand=inverted_radicand(normalise_left(s.sig, s.lz), exponent),
                           exponent=dr.fit_signed(root_exponent(exponent), exp_shape))

        # Recurrence stages: the radicand is the (p + 1)-bit value above p + 1 zero bits,
        # consumed two bits per step from the top; only its unconsumed bits ride along.
        # Only formats whose smallest subnormal has a subnormal root (none of f32, f16,
        # bf16) need the denormalising shifter.
        can_be_tiny = fmt.mantissa_bits > bias - 1
        rest = s.inverted_radicand
        remainder, root = dr.SQRT_START, None
        step = 0
        sizes = dr.stage_sizes(p + 1, self._bits_per_stage)
        for index, count in enumerate(sizes):
            for _ in range(count):
                step += 1
                if len(rest) >= 2:
                    pair, rest = ~rest[-2:], rest[:-2]
                else:
                    pair, rest = Cat(Const(0, 2 - len(rest)), ~rest), Const(0, 0)
                remainder, bit = dr.sqrt_step(m, remainder, root, pair, step)
                root = bit if root is None else Cat(bit, root)
            values = dict(remainder=remainder, root=root)
            if len(rest):
                values["rest"] = rest
            if can_be_tiny and index == len(sizes) - 1:
                values["shift"] = denormalise_shift(fmt, s.exponent, p + 2, flush_subnormals=flush)
            s = pipe.stage(s, "sign", "special", "exponent", **values)
            remainder, root, rest = s.remainder, s.root, getattr(s, "rest", Const(0, 0))

        # Stage: the sticky bit from the last remainder (and the subnormal shift, if any).
        significand = Cat(Const(0, 1), s.root)
        sticky = dr.sqrt_remainder_nonzero(s.remainder, s.root)
        if can_be_tiny:
            aligned = denormalise(fmt, exponent=s.exponent, significand=significand, sticky=sticky,
                                  shift=s.shift, flush_subnormals=flush)
            significand, sticky = aligned.significand, aligned.sticky
        s = pipe.stage(s, "sign", "special", "exponent", significand=significand, sticky=sticky)

        self._round_output(pipe, s)


register_unit(
    "fp_sqrt", FloatSquareRoot,
    summary="Pipelined IEEE-754 square root (II = 1, radix-2 non-restoring recurrence, SoftFloat flags).",
    golden="golden.fp.arith:sqrt",
)
