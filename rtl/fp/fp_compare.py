"""Pipelined IEEE-754 comparisons."""

from amaranth.hdl import Mux

from ..registration import Param, Parameterized
from .classify import UnpackedFloat
from .interface import FLAG_INVALID
from .pipeline import FLUSH_PARAM, FORMAT_PARAM, TAG_PARAM, FloatUnit, register_unit

__all__ = ["FloatCompare", "ordering", "COMPARE_OPERATIONS"]

COMPARE_OPERATIONS = ("eq", "lt", "le", "lt_quiet", "le_quiet")


def ordering(a, b):
    """``(less, equal)`` of two non-NaN :class:`~rtl.fp.classify.UnpackedFloat` values.

    Zeros of either sign are equal (and subnormals count as zeros when flushing); the
    caller handles NaNs.
    """
    both_zero = a.is_zero & b.is_zero
    magnitude_a, magnitude_b = a.flushed_magnitude, b.flushed_magnitude
    same_sign_less = Mux(a.sign, magnitude_a > magnitude_b, magnitude_a < magnitude_b)
    less = ~both_zero & Mux(a.sign == b.sign, same_sign_less, a.sign)
    equal = both_zero | (a.canonical_bits == b.canonical_bits)
    return less, equal


class FloatCompare(Parameterized, FloatUnit):
    """Pipelined floating-point comparison with a 1-bit result.

    Parameters
    ----------
    fmt : str or FloatFormat
        Operand format: ``"f32"``, ``"f16"``, ``"bf16"`` or any :class:`FloatFormat`.
    flush_subnormals : bool
        Read subnormal operands as zero.
    operation : str
        ``"eq"`` (``a == b``, quiet), ``"lt"`` (``a < b``) and ``"le"`` (``a <= b``), which
        signal invalid for any NaN operand as SoftFloat's ``f32_lt``/``f32_le`` do, or
        ``"lt_quiet"``/``"le_quiet"``, which signal it only for signaling NaNs.
    tag_width : int
        Width of the tag carried from ``i`` to ``o`` (0 for none).

    Attributes
    ----------
    i : In(stream.Signature(operand_layout(fmt.width, ("a", "b"), tag_width)))
        Operands.
    o : Out(stream.Signature(result_layout(fmt.width, tag_width, result_shape=1)))
        ``result`` is 1 when the relation holds; any comparison with a NaN is false.
        ``-0 == +0``. ``flags`` holds invalid or nothing.
    latency : int
        1 cycle.

    Throughput is one comparison per cycle (II = 1) while ``o.ready`` is high.
    """

    PARAMS = (
        FORMAT_PARAM,
        FLUSH_PARAM,
        Param("operation", str, "lt", "relation: eq is quiet, lt and le signal on any NaN",
                  choices=COMPARE_OPERATIONS),
        TAG_PARAM,
    )

    def __init__(self, *, fmt="f32", flush_subnormals=False, operation="lt", tag_width=0):
        self._fmt, self._flush = self._check_common(fmt, flush_subnormals)
        super().__init__(input_width=self._fmt.width, output_width=1, operands=("a", "b"),
                         tag_width=tag_width, latency=1)

    def _datapath(self, m, pipe):
        a = UnpackedFloat(self._fmt, self.i.payload.a, flush_subnormals=self._flush)
        b = UnpackedFloat(self._fmt, self.i.payload.b, flush_subnormals=self._flush)
        less, equal = ordering(a, b)
        relation = {"eq": equal, "lt": less, "le": less | equal}[self._operation.removesuffix("_quiet")]
        nan = a.is_nan | b.is_nan
        signaling = self._operation in ("lt", "le")
        invalid = nan if signaling else a.is_signaling | b.is_signaling
        pipe.output(result=relation & ~nan, flags=Mux(invalid, FLAG_INVALID, 0))


register_unit(
    "fp_compare", FloatCompare,
    summary="Pipelined IEEE-754 comparison eq/lt/le with a 1-bit result (SoftFloat flags).",
    golden="golden.fp.compare:lt",
)
