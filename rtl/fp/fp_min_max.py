"""Pipelined IEEE-754 minimum and maximum."""

from amaranth.hdl import Mux

from ..registration import Param, Parameterized
from .classify import UnpackedFloat, canonical_nan
from .fp_compare import ordering
from .interface import FLAG_INVALID
from .pipeline import FLUSH_PARAM, FORMAT_PARAM, TAG_PARAM, FloatUnit, register_unit

__all__ = ["FloatMinMax"]


class FloatMinMax(Parameterized, FloatUnit):
    """Pipelined minimum or maximum: IEEE 754-2019 minimumNumber/maximumNumber (RISC-V fmin/fmax).

    A NaN and a number give the number; two NaNs give the canonical quiet NaN; a
    signaling NaN operand raises invalid even when the result is a number; ``-0 < +0``.

    Parameters
    ----------
    fmt : str or FloatFormat
        Operand and result format: ``"f32"``, ``"f16"``, ``"bf16"`` or any :class:`FloatFormat`.
    flush_subnormals : bool
        Read subnormal operands as zeros of the same sign (a subnormal result comes out as
        that zero).
    operation : str
        ``"min"`` or ``"max"``.
    tag_width : int
        Width of the tag carried from ``i`` to ``o`` (0 for none).

    Attributes
    ----------
    i : In(stream.Signature(operand_layout(fmt.width, ("a", "b"), tag_width)))
        Operands.
    o : Out(stream.Signature(result_layout(fmt.width, tag_width)))
        The chosen operand's encoding and the invalid flag.
    latency : int
        1 cycle.

    Throughput is one operation per cycle (II = 1) while ``o.ready`` is high.
    """

    PARAMS = (
        FORMAT_PARAM,
        FLUSH_PARAM,
        Param("operation", str, "min", "min or max", choices=("min", "max")),
        TAG_PARAM,
    )

    def __init__(self, *, fmt="f32", flush_subnormals=False, operation="min", tag_width=0):
        self._fmt, self._flush = self._check_common(fmt, flush_subnormals)
        super().__init__(input_width=self._fmt.width, output_width=self._fmt.width, operands=("a", "b"),
                         tag_width=tag_width, latency=1)

    def _datapath(self, m, pipe):
        a = UnpackedFloat(self._fmt, self.i.payload.a, flush_subnormals=self._flush)
        b = UnpackedFloat(self._fmt, self.i.payload.b, flush_subnormals=self._flush)
        less, equal = ordering(a, b)
        # Equal values (including zeros of opposite signs): the sign decides, -0 < +0.
        if self._operation == "min":
            take_a = less | (equal & a.sign)
        else:
            take_a = (~less & ~equal) | (equal & ~a.sign)
        take_a = (take_a & ~a.is_nan) | b.is_nan
        result = Mux(a.is_nan & b.is_nan, canonical_nan(self._fmt),
                     Mux(take_a, a.canonical_bits, b.canonical_bits))
        invalid = a.is_signaling | b.is_signaling
        pipe.output(result=result, flags=Mux(invalid, FLAG_INVALID, 0))


register_unit(
    "fp_min_max", FloatMinMax,
    summary="Pipelined IEEE-754 minimumNumber/maximumNumber (RISC-V fmin/fmax semantics).",
    golden="golden.fp.compare:min",
)
