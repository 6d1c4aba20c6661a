"""The binary floating-point formats and exception flags, as the golden model reads IEEE 754.

The golden model states these facts itself instead of importing them from ``rtl/``: it is
meant to be an independent reading of IEEE 754-2008 (binary interchange formats, section
3.6; exceptions, section 7), so a shared mistake cannot hide in a shared constant.
``testbenches/test_design_constants.py`` holds the RTL's statement and this one equal.

A format is its exponent width ``w`` and its trailing-significand width ``t``: bias
``2**(w-1) - 1``, precision ``t + 1``, Inf and NaN at the all-ones exponent. The canonical
NaN every NearTrain unit returns is the RISC-V one: sign 0, exponent all ones, only the
quiet bit (the fraction's most significant bit) set.
"""

import enum
from dataclasses import dataclass

__all__ = ["FloatFormat", "F32", "F16", "BF16", "FORMATS", "float_format", "Flag",
           "FLAG_INEXACT", "FLAG_UNDERFLOW", "FLAG_OVERFLOW", "FLAG_DIVIDE_BY_ZERO", "FLAG_INVALID"]


class Flag(enum.IntFlag):
    """IEEE 754 exception flags, in the bit order of SoftFloat and RISC-V ``fflags`` (NV DZ OF UF NX)."""

    INEXACT = 1 << 0
    UNDERFLOW = 1 << 1
    OVERFLOW = 1 << 2
    DIVIDE_BY_ZERO = 1 << 3
    INVALID = 1 << 4


# Plain ints, for NumPy arithmetic on flag arrays.
FLAG_INEXACT = int(Flag.INEXACT)
FLAG_UNDERFLOW = int(Flag.UNDERFLOW)
FLAG_OVERFLOW = int(Flag.OVERFLOW)
FLAG_DIVIDE_BY_ZERO = int(Flag.DIVIDE_BY_ZERO)
FLAG_INVALID = int(Flag.INVALID)


@dataclass(frozen=True)
class FloatFormat:
    """A binary interchange format: ``exponent_bits`` (w) and ``mantissa_bits`` (t, no hidden bit)."""

    name: str
    exponent_bits: int
    mantissa_bits: int

    def __post_init__(self):
        if not (2 <= self.exponent_bits <= 11 and 1 <= self.mantissa_bits <= 52):
            raise ValueError(f"format {self.name}: exponent_bits must be in 2..11, mantissa_bits in 1..52, "
                             f"not {self.exponent_bits} and {self.mantissa_bits}")

    @property
    def width(self):
        return self.exponent_bits + self.mantissa_bits + 1

    @property
    def precision(self):
        return self.mantissa_bits + 1

    @property
    def bias(self):
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def max_exponent_field(self):
        return 2 ** self.exponent_bits - 1

    @property
    def emin(self):
        return 1 - self.bias

    @property
    def emax(self):
        return self.bias

    @property
    def sign_mask(self):
        return 2 ** (self.width - 1)

    @property
    def positive_infinity(self):
        return self.max_exponent_field * 2 ** self.mantissa_bits

    @property
    def canonical_nan(self):
        return self.positive_infinity + 2 ** (self.mantissa_bits - 1)

    @property
    def max_finite(self):
        return self.positive_infinity - 1


F32 = FloatFormat("f32", 8, 23)
F16 = FloatFormat("f16", 5, 10)
BF16 = FloatFormat("bf16", 8, 7)

FORMATS = {"f32": F32, "f16": F16, "bf16": BF16}


def float_format(fmt):
    """The :class:`FloatFormat` named ``fmt`` (``"f32"``, ``"f16"``, ``"bf16"``), or ``fmt`` itself.

    Any other object with ``name``, ``exponent_bits`` and ``mantissa_bits`` (such as a format
    of the RTL's own, for a generic format like e4m3) is read as the format of those widths.

    Raises
    ------
    ValueError
        For any other value.
    """
    if isinstance(fmt, FloatFormat):
        return fmt
    if isinstance(fmt, str) and fmt in FORMATS:
        return FORMATS[fmt]
    if all(hasattr(fmt, field) for field in ("name", "exponent_bits", "mantissa_bits")):
        return FloatFormat(fmt.name, fmt.exponent_bits, fmt.mantissa_bits)
    raise ValueError(f"fmt must be one of {sorted(FORMATS)} or a FloatFormat, not {fmt!r}")
