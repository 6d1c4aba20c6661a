"""Fully pipelined IEEE-754 division (II = 1) by an unrolled non-restoring recurrence."""

from amaranth.hdl import Cat, Const, Mux

from . import digit_recurrence as dr
from .classify import UnpackedFloat
from .pipeline import register_unit
from .rounding import denormalise, denormalise_shift
from .shift import count_leading_zeros, normalise_left

__all__ = ["FloatDivider"]


class FloatDivider(dr.RecurrenceUnit):
    """IEEE-754 division ``a / b``, rounded to nearest even, one operation per cycle.

    Results and flags match Berkeley SoftFloat (RISC-V NaNs, tininess after rounding) bit
    for bit: subnormal operands are normalised first and subnormal results are produced,
    every NaN result is the canonical quiet NaN, a signalling NaN operand, ``0/0`` and
    ``Inf/Inf`` raise invalid, and a finite non-zero ``x/0`` is a signed infinity with
    divide-by-zero.

    The quotient significand comes from ``p + 2`` steps (``p`` is the precision) of a
    radix-2 non-restoring recurrence on the normalised significands: each step is one
    ``(p + 1)``-bit add-or-subtract chosen by the sign of the partial remainder, which is
    carried down the pipeline with the divisor. The significand ratio lies in (1/2, 2), so
    the first quotient bit is either the leading one or a zero that a 1-bit shift drops;
    either way ``p`` result bits and a guard bit remain, and the last remainder gives the
    sticky bit. :func:`~rtl.fp.rounding.denormalise` and
    :func:`~rtl.fp.rounding.round_aligned` round the result.

    Parameters
    ----------
    fmt, flush_subnormals, tag_width, bits_per_stage
        As :class:`~rtl.fp.digit_recurrence.RecurrenceUnit` documents them. With
        ``flush_subnormals`` a result that is subnormal after rounding becomes a zero of the
        same sign, with underflow and inexact. A recurrence step is one ``(p + 1)``-bit
        carry-propagate add/subtract (25 bits for f32).

    Attributes
    ----------
    i : In(stream.Signature(operand_layout(fmt.width, ("a", "b"), tag_width)))
        Dividend ``a``, divisor ``b`` (raw bits) and ``tag``.
    o : Out(stream.Signature(result_layout(fmt.width, tag_width)))
        ``result`` bits, SoftFloat ``flags`` and ``tag``.
    latency : int
        Register stages from ``i`` to ``o``: 1 (unpack and special cases) + 1 (normalise
        subnormal operands; absent with ``flush_subnormals``) + ``ceil((p + 2) /
        bits_per_stage)`` (recurrence) + 1 (sticky bit, denormalise) + 1 (round, output).
        With ``bits_per_stage=1``: f32 30, f16 17, bf16 14 (one less each when flushing).

    Throughput is one operation per cycle (II = 1) while ``o.ready`` is high; ``i.ready``
    is ``~o.valid | o.ready`` and a stalled output freezes the whole pipeline.
    """

    OPERANDS = ("a", "b")
    EXTRA_STEPS = 2

    def _datapath(self, m, pipe):
        fmt, flush = self._fmt, self._flush
        p, bias = fmt.precision, fmt.bias
        a = UnpackedFloat(fmt, self.i.payload.a, flush_subnormals=flush)
        b = UnpackedFloat(fmt, self.i.payload.b, flush_subnormals=flush)

        # Biased exponent of the first quotient bit, over every pair of normalised biased
        # operand exponents (1 - (p - 1) .. max_field - 1); one less when that bit is 0.
        lowest, highest = 2 - p, fmt.max_exponent_field - 1
        exp_shape = dr.signed_range_shape(lowest - highest + bias - 1, highest - lowest + bias)

        # Stage: unpack, settle the special cases.
        special = dr.SpecialCase.decide(
            nan=a.is_nan | b.is_nan | (a.is_infinite & b.is_infinite) | (a.is_zero & b.is_zero),
            invalid=(a.is_signaling | b.is_signaling | (a.is_infinite & b.is_infinite)
                     | (a.is_zero & b.is_zero)),
            inf=a.is_infinite | b.is_zero, divide_by_zero=b.is_zero & ~a.is_infinite,
            zero=a.is_zero | b.is_infinite)
        common = dict(sign=a.sign ^ b.sign, special=special)
        if flush:
            s = pipe.stage(**common, a_sig=a.significand, b_sig=b.significand,
                           exp_diff=a.exponent - b.exponent)
        else:
            s = pipe.stage(**common, a_sig=a.significand, a_lz=count_leading_zeros(a.significand),
                           a_exp=a.exponent, b_sig=b.significand, b_lz=count_leading_zeros(b.significand),
                           b_exp=b.exponent)
            # Stage: normalise subnormal significands so that the recurrence sees [1, 2).
            s = pipe.stage(s, "sign", "special",
                           a_sig=normalise_left(s.a_sig, s.a_lz), b_sig=normalise_left(s.b_sig, s.b_lz),
                           exp_diff=(s.a_exp - s.a_lz) - (s.b_exp - s.b_lz))
        # Both candidate exponents now, so that the first quotient bit only selects one.
        exp_if_one = dr.fit_signed(s.exp_diff + bias, exp_shape)
        exp_if_zero = dr.fit_signed(s.exp_diff + (bias - 1), exp_shape)

        # Recurrence stages. The divisor's leading one is implied from here on; quotient
        # bits collect with q_0 at the MSB. The last stage also drops a leading zero, so
        # the significand leaves normalised with p + 2 bits (the lowest beyond the guard).
        b_frac = s.b_sig[:p - 1]
        sizes = dr.stage_sizes(p + 2, self._bits_per_stage)
        remainder = quotient = None
        step = 0
        for index, count in enumerate(sizes):
            b_sig = Cat(b_frac, 1)
            for _ in range(count):
                if remainder is None:
                    remainder, quotient = dr.divide_first_step(s.a_sig, b_sig)
                    exponent = Mux(quotient, exp_if_one, exp_if_zero)
                else:
                    step += 1
                    remainder, bit = dr.divide_step(m, remainder, b_sig, name=f"div_remainder_{step}")
                    quotient = Cat(bit, quotient)
            last = {}
            if index == len(sizes) - 1:
                quotient = Mux(quotient[-1], quotient, Cat(Const(0, 1), quotient[:-1]))
                # The exponent has been settled since the first step, so the subnormal
                # shift distance is ready beside the last adder.
                last["shift"] = denormalise_shift(fmt, exponent, p + 2, flush_subnormals=flush)
            s = pipe.stage(s, "sign", "special", remainder=remainder, quotient=quotient, b_frac=b_frac,
                           exponent=exponent, **last)
            remainder, quotient, b_frac, exponent = s.remainder, s.quotient, s.b_frac, s.exponent

        # Stage: the sticky bit from the last remainder; shift a tiny result onto the
        # subnormal grid.
        aligned = denormalise(fmt, exponent=s.exponent, significand=s.quotient, shift=s.shift,
                              sticky=dr.divide_remainder_nonzero(s.remainder, Cat(s.b_frac, 1)),
                              flush_subnormals=flush)
        s = pipe.stage(s, "sign", "special", **aligned._asdict())

        self._round_output(pipe, s)


register_unit(
    "fp_div", FloatDivider,
    summary="Pipelined IEEE-754 divider (II = 1, radix-2 non-restoring recurrence, SoftFloat flags).",
    golden="golden.fp.arith:div",
)
