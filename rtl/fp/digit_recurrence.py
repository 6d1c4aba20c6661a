"""Pieces shared by the digit-recurrence units, :mod:`rtl.fp.fp_div` and :mod:`rtl.fp.fp_sqrt`.

Both units are a fixed-latency pipeline (see :mod:`rtl.fp.interface`): the operands are
classified and their significands normalised, then an unrolled radix-2 non-restoring
recurrence produces one result bit per step with the partial remainder carried down the
pipeline, and finally the result is rounded by the shared rounding core.

The recurrences are non-restoring rather than restoring because every step is then a
single add-or-subtract, selected by the sign of the previous partial remainder: one LUT
per bit on a carry chain, with no compare-then-select multiplexer behind it. The quotient
(root) bit of each step is simply the complement of the new remainder's sign, which is
exactly the bit a restoring recurrence would have produced, so no digit conversion is
needed at the end; only the sticky bit needs the "restored" remainder, and that is an
equality test, not an addition.

Every step function here is combinational; it names its new partial remainder with a
``comb`` signal so that several chained steps share it rather than repeat its expression
(which the simulator would inline). The unit decides how many steps go into one pipeline
stage (``bits_per_stage``). Partial remainders are kept in an "offset" form described
below, which saves an inverter per step.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, Value, signed

from ..registration import Parameterized
from .classify import SpecialResult, canonical_nan, infinity, zero
from .pipeline import BITS_PER_STAGE_PARAM, FLUSH_PARAM, FORMAT_PARAM, TAG_PARAM, FloatUnit

__all__ = ["RecurrenceUnit", "SpecialCase", "stage_sizes", "signed_range_shape", "fit_signed", "sum_is_zero",
           "signed_remainder", "divide_first_step", "divide_step", "divide_remainder_nonzero",
           "SQRT_START", "sqrt_step", "sqrt_remainder_nonzero"]


class RecurrenceUnit(Parameterized, FloatUnit):
    """Base of the digit-recurrence units (divider, square root): parameters, ports, latency.

    A subclass names its ``OPERANDS`` and its ``EXTRA_STEPS`` (recurrence steps beyond the
    precision ``p``) and implements ``_datapath``. The latency is 1 (unpack) + 1 (normalise
    subnormal operands; absent with ``flush_subnormals``) + one per recurrence stage + 2.

    Parameters
    ----------
    fmt : str or FloatFormat
        Operand and result format: ``"f32"`` (default), ``"f16"``, ``"bf16"`` or any
        :class:`~rtl.fp.format.FloatFormat`.
    flush_subnormals : bool
        Read subnormal operands as zeros of the same sign (no flag); removes the operand
        normalisation stage. Default ``False``. (Each unit says what it does with a
        subnormal result.)
    tag_width : int
        Width of a side-band ``tag`` carried from ``i`` to ``o``, 0 (default, no tag) to
        :data:`~rtl.fp.pipeline.MAX_TAG_WIDTH`.
    bits_per_stage : int
        Recurrence steps per pipeline stage, 1 to 4 (each unit says what a step is). 1
        (default) keeps a stage to about one adder; larger values trade Fmax for latency
        and registers.
    """

    PARAMS = (
        FORMAT_PARAM,
        FLUSH_PARAM,
        TAG_PARAM,
        BITS_PER_STAGE_PARAM,
    )
    OPERANDS = ()
    EXTRA_STEPS = 0

    def __init__(self, *, fmt="f32", flush_subnormals=False, tag_width=0, bits_per_stage=1):
        self._fmt, self._flush = self._check_common(fmt, flush_subnormals)
        steps = self._fmt.precision + self.EXTRA_STEPS
        latency = (1 if self._flush else 2) + len(stage_sizes(steps, self._bits_per_stage)) + 2
        super().__init__(input_width=self._fmt.width, output_width=self._fmt.width, operands=self.OPERANDS,
                         tag_width=tag_width, latency=latency)

    def _round_output(self, pipe, s):
        """The last stage: round and pack ``s`` (its sign, exponent, significand and sticky bit), then
        let its special case (a :class:`SpecialCase`) override."""
        pipe.round_stage(self._fmt, s.special.result(self._fmt, s.sign), s, flush_subnormals=self._flush)


class SpecialCase:
    """A special-case decision in three bits, expanded to a :class:`SpecialResult` at the output.

    The digit-recurrence pipelines are 15 to 30 stages deep, so they carry this compact
    code (NaN or infinity or zero, plus one exception bit) instead of a whole result word
    and flag set; the result sign rides along with the datapath anyway.

    Use :meth:`decide` to build one; the pipeline registers it through :meth:`map_values`.
    """

    _NONE, _ZERO, _INF, _NAN = range(4)

    def __init__(self, code, exception):
        self.code = Value.cast(code)
        self.exception = Value.cast(exception)

    @classmethod
    def decide(cls, *, nan, invalid, inf, divide_by_zero, zero):
        """Priority NaN, infinity, zero; ``invalid`` goes with a NaN, ``divide_by_zero`` with infinity."""
        code = Mux(nan, cls._NAN, Mux(inf, cls._INF, Mux(zero, cls._ZERO, cls._NONE)))
        return cls(code, Mux(nan, invalid, divide_by_zero))

    def map_values(self, function):
        """A copy with ``function(value, name)`` applied to each field (used for pipelining)."""
        return SpecialCase(function(self.code, "code"), function(self.exception, "exception"))

    def result(self, fmt, sign):
        """The :class:`SpecialResult` this code stands for, ``sign`` being the result sign."""
        nan, inf = self.code == self._NAN, self.code == self._INF
        bits = Mux(nan, canonical_nan(fmt), Mux(inf, infinity(fmt, sign), zero(fmt, sign)))
        flags = Cat(Const(0, 3), inf & self.exception, nan & self.exception)
        return SpecialResult(self.code != self._NONE, bits, flags)


def stage_sizes(steps, per_stage):
    """Split ``steps`` recurrence steps into stages of ``per_stage`` (the last may be shorter)."""
    return [min(per_stage, steps - done) for done in range(0, steps, per_stage)]


def signed_range_shape(lo, hi):
    """The narrowest signed shape holding every integer in ``lo..hi``."""
    width = 1
    while not -(1 << (width - 1)) <= lo <= hi < (1 << (width - 1)):
        width += 1
    return signed(width)


def fit_signed(value, shape):
    """``value`` truncated to the signed ``shape`` (which must hold all its values)."""
    return Value.cast(value).as_signed()[:shape.width].as_signed()


def sum_is_zero(a, b):
    """``(a + b) % 2**n == 0`` for two n-bit values, without a carry chain.

    A zero sum needs, at every bit, a carry in equal to ``a[i] ^ b[i]``; the carry into
    bit ``i`` of a zero sum is ``a[i-1] | b[i-1]`` (and 0 into bit 0). Checking that for
    every bit at once is one LUT level plus an AND tree.
    """
    a, b = Value.cast(a), Value.cast(b)
    assert len(a) == len(b)
    carry = Cat(Const(0, 1), (a | b)[:-1])
    return ~((a ^ b ^ carry).any())


# Both recurrences keep their partial remainder s in two's complement with the sign bit
# inverted ("offset" form, r = s + 2**(w-1) mod 2**w for a w-bit s). The top bit of r is
# then directly "s >= 0": the next step's subtract select and this step's result bit,
# with no inverter; the flip costs nothing because adding 2**(w-1) only toggles the top
# bit of one adder operand, inside a LUT that exists anyway.
#
# Each step is one adder "plain + other", mod 2**w. `plain` is the shifted remainder
# with its top bit moved into the top bit of `other` (the same sum mod 2**w): being the
# narrower operand, Yosys puts it on the carry chain's DI inputs, so every bit costs one
# LUT, shared by the XOR that selects add or subtract and the propagate signal.


def _named(m, value, name):
    signal = Signal(len(value), name=name)
    m.d.comb += signal.eq(value)
    return signal


def signed_remainder(r):
    """The two's complement value of an offset-form partial remainder ``r``."""
    r = Value.cast(r)
    return Cat(r[:-1], ~r[-1]).as_signed()


# The division recurrence works on p-bit integer significands A, B in [2**(p-1), 2**p)
# and keeps a (p+1)-bit partial remainder s in [-B, B):
#     s_0 = A - B,    s_i = 2*s_(i-1) - B  if s_(i-1) >= 0  else  2*s_(i-1) + B,
# with quotient bit q_i = (s_i >= 0). After n steps A * 2**n = Q * B + rho, where the
# restoring remainder rho is s_n, or s_n + B when s_n < 0.

def divide_first_step(a_sig, b_sig):
    """First division step: ``(r_0, q_0)`` from the two normalised p-bit significands."""
    a_sig = Value.cast(a_sig)
    p = len(a_sig)
    # A + 2**p - B: the offset form of A - B, as a plain subtraction.
    r = (Cat(a_sig, Const(1, 1)) - b_sig)[:p + 1]
    return r, r[-1]


def divide_step(m, r, b_sig, *, name):
    """One non-restoring division step: ``(r_i, q_i)`` from ``r_(i-1)`` and divisor ``b_sig``.

    Remainders are in offset form; ``r_i`` is a ``comb`` signal of ``m`` called ``name``.
    """
    r = Value.cast(r)
    width = len(r)                          # p + 1
    subtract = r[-1]
    # 2*s + (B ^ subtract) + subtract: the zero LSB of 2*s takes the +1 of the two's
    # complement of B, so there is no carry input. The top bit of 2*s (r[width - 2]) and
    # the offset's 1 join the top bit of `other`, whose own top bit is `subtract`.
    plain = Cat(subtract, r[:width - 2])
    other = Cat(Value.cast(b_sig) ^ subtract.replicate(width - 1), ~(subtract ^ r[width - 2]))
    new = _named(m, (plain + other)[:width], name)
    return new, new[-1]


def divide_remainder_nonzero(r, b_sig):
    """Sticky bit of the division: the restoring remainder (``s`` or ``s + B``) is non-zero."""
    s = signed_remainder(r).as_unsigned()
    b_ext = Cat(b_sig, Const(0, len(s) - len(Value.cast(b_sig))))
    return s.any() & ~sum_is_zero(s, b_ext)


# The square-root recurrence (non-restoring, after Li and Chu) takes the radicand X two
# bits at a time from the top and builds the root Q = isqrt(X) one bit per step. With
# pair_j the j-th bit pair and s_0 = 0 (taken as non-negative):
#     s_j = 4*s_(j-1) + pair_j - (4*Q_(j-1) + 1)   if s_(j-1) >= 0
#     s_j = 4*s_(j-1) + pair_j + (4*Q_(j-1) + 3)   otherwise,
# q_j = (s_j >= 0) and Q_j = 2*Q_(j-1) + q_j. s_j fits in j + 2 signed bits, so the
# adders grow by one bit per step. The restoring remainder X - Q**2 is s_k, or
# s_k + 2*Q_k + 1 when s_k < 0.

SQRT_START = Const(0b10, 2)
"""``r_0``: the offset form of the 2-bit zero the square-root recurrence starts from."""


def sqrt_step(m, r, root, pair, step):
    """Square-root step ``step`` (1-based): ``(r_j, q_j)`` from ``r_(j-1)``, ``Q_(j-1)`` and a bit pair.

    ``r`` (offset form) is ``step + 1`` bits wide (``r_0`` is :data:`SQRT_START`) and
    ``root`` holds the ``step - 1`` root bits found so far (``None`` at the first step).
    ``r_j`` is a ``comb`` signal of ``m``.
    """
    r = Value.cast(r)
    width = step + 2
    assert len(r) == step + 1
    subtract = r[-1]
    # -(4Q + 1) == ~(4Q) and +(4Q + 3) == 4Q + 3: both are Q (inverted when subtracting,
    # sign-extended with `subtract`) above two constant one bits. `plain` is 4*s with
    # those two ones below it; its top bit (r[step - 1]) and the offset move into the top
    # of `other`, and the radicand pair goes into the bottom of `other`. (With the
    # constant ones on the DI side, a radicand stored inverted needs no LUT at all there.)
    plain = Cat(Const(0b11, 2), r[:step - 1])
    root_bits = [] if root is None else [Value.cast(root) ^ subtract.replicate(step - 1)]
    other = Cat(pair, *root_bits, ~(subtract ^ r[step - 1]))
    new = _named(m, (plain + other)[:width], f"sqrt_remainder_{step}")
    return new, new[-1]


def sqrt_remainder_nonzero(r, root):
    """Sticky bit of the square root: the restoring remainder is non-zero.

    ``s_k < 0`` restores to ``s_k + 2*Q + 1``, which is zero exactly when
    ``s_k == -(2*Q + 1) == ~(2*Q)``; a non-negative ``s_k`` can never equal that.
    """
    s, root = signed_remainder(r).as_unsigned(), Value.cast(root)
    pattern = ~Cat(Const(0, 1), root, Const(0, len(s) - len(root) - 1))
    return s.any() & (s != pattern)
