"""Pipelined conversion between floating-point formats."""

from amaranth.hdl import Cat, Const

from ..registration import Param, Parameterized
from .classify import SpecialResult, UnpackedFloat, infinity
from .format import FloatFormat
from .pipeline import FLUSH_PARAM, FORMAT_NAMES, TAG_PARAM, FloatUnit, register_unit
from .rounding import Aligned, denormalise, denormalise_shift
from .shift import count_leading_zeros, normalise_left

__all__ = ["FloatConverter"]


class FloatConverter(Parameterized, FloatUnit):
    """Pipelined conversion of one floating-point format to another, rounded to nearest even.

    The source is unpacked, normalised if its subnormals can be normal numbers in the
    target, rebiased, shifted onto the target's subnormal grid if it is tiny there, and
    rounded by the shared rounding core. Only the steps a given pair of formats can need
    are built, so widening conversions cost little more than the unpacking.

    Parameters
    ----------
    source, target : str or FloatFormat
        Input and output formats: ``"f32"``, ``"f16"``, ``"bf16"`` or any
        :class:`FloatFormat`; they must differ.
    flush_subnormals : bool
        Read subnormal inputs as zero and flush subnormal results to zero (with underflow
        and inexact).
    tag_width : int
        Width of the tag carried from ``i`` to ``o`` (0 for none).

    Attributes
    ----------
    i : In(stream.Signature(operand_layout(source.width, ("a",), tag_width)))
        The value to convert, in field ``a``.
    o : Out(stream.Signature(result_layout(target.width, tag_width)))
        Converted value and flags. NaNs become the target's canonical quiet NaN; signaling
        NaNs raise invalid.
    latency : int
        1 plus the cycles of the steps the pair needs: 2 to normalise source subnormals that
        are normal in the target (f16 to f32 and bf16, not when flushing), 2 to shift
        results that are tiny in the target onto its subnormal grid (f32 and bf16 to f16;
        1 when flushing). f16 -> f32 or bf16: 3 (1 when flushing), f32 or bf16 -> f16: 3
        (2 when flushing), f32 <-> bf16: 1.

    Throughput is one conversion per cycle (II = 1) while ``o.ready`` is high.
    """

    PARAMS = (
        Param("source", str, "f32", "input format", choices=FORMAT_NAMES, accepts=(FloatFormat,)),
        Param("target", str, "bf16", "output format (must differ from source)", choices=FORMAT_NAMES,
              accepts=(FloatFormat,)),
        FLUSH_PARAM,
        TAG_PARAM,
    )

    def __init__(self, *, source="f32", target="bf16", flush_subnormals=False, tag_width=0):
        self._source, self._flush = self._check_common(source, flush_subnormals, name="source")
        self._target, _ = self._check_common(target, flush_subnormals, name="target")
        if self._source == self._target:
            raise ValueError(f"target must differ from source, not both {self._source.name}")
        source, target = self._source, self._target
        self._rebias = target.bias - source.bias
        # Source subnormals that are normal in the target need a normalising shift.
        self._normalise = not self._flush and target.emin < source.emin
        lowest_exponent = 1 - (source.precision - 1 if self._normalise else 0) + self._rebias
        self._can_be_tiny = lowest_exponent < 1
        # The full subnormal shift gets its own stage; the flushing one-bit shift does not.
        self._denormalise_stage = not self._flush and self._can_be_tiny
        latency = 1 + 2 * self._normalise + self._can_be_tiny + self._denormalise_stage
        super().__init__(input_width=source.width, output_width=target.width, operands=("a",),
                         tag_width=tag_width, latency=latency)

    def _datapath(self, m, pipe):
        source, target, flush = self._source, self._target, self._flush
        a = UnpackedFloat(source, self.i.payload.a, flush_subnormals=flush)
        special = SpecialResult.nan_or(target, nan=a.is_nan, invalid=a.is_signaling,
                                       active=a.is_infinite, bits=infinity(target, a.sign))
        width = max(source.precision, target.precision + 2)
        significand = Cat(Const(0, width - source.precision), a.significand)

        s = pipe.stage(enabled=self._normalise, sign=a.sign, special=special, significand=significand,
                       exponent=a.exponent + self._rebias,
                       shift=count_leading_zeros(a.significand) if self._normalise else 0)
        s = pipe.stage(s, "sign", "special", enabled=self._normalise,
                       significand=normalise_left(s.significand, s.shift), exponent=s.exponent - s.shift)

        if self._can_be_tiny:
            # The subnormal shift is worked out a stage ahead of the shifter.
            s = pipe.stage(s, "sign", "special", "significand", "exponent",
                           shift=denormalise_shift(target, s.exponent, len(s.significand),
                                                   flush_subnormals=flush))
            aligned = denormalise(target, exponent=s.exponent, significand=s.significand, sticky=0,
                                  shift=s.shift, flush_subnormals=flush)
        else:
            aligned = Aligned(s.exponent, s.significand, Const(0))
        s = pipe.stage(s, "sign", "special", enabled=self._denormalise_stage, **aligned._asdict())

        pipe.round_stage(target, s.special, s, flush_subnormals=flush)


register_unit(
    "fp_convert", FloatConverter,
    summary="Pipelined conversion between f32, f16 and bf16 (II = 1, round to nearest even).",
    golden="golden.fp.convert:convert",
)
