"""Binary floating-point formats shared by the RTL units and the golden models.

A format is fully described by its exponent and mantissa (fraction) widths; everything
else (bias, special encodings, canonical NaN) follows IEEE 754-2008 binary interchange
rules. ``golden.fp`` and ``rtl.fp`` both take the short names ``"f32"``, ``"f16"`` and
``"bf16"``, and generic formats can be built directly from :class:`FloatFormat`.
"""

from dataclasses import dataclass

__all__ = ["FloatFormat", "F32", "F16", "BF16", "FORMATS", "float_format"]


@dataclass(frozen=True)
class FloatFormat:
    """An IEEE-754 style binary floating-point format.

    Parameters
    ----------
    name : str
        Short name used by the CLI, the golden model and the manifests.
    exponent_bits : int
        Width of the biased exponent field, 2 to 11.
    mantissa_bits : int
        Width of the stored fraction field (without the hidden bit), 1 to 52.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int

    def __post_init__(self):
        if not 2 <= self.exponent_bits <= 11:
            raise ValueError(f"exponent_bits must be in 2..11, not {self.exponent_bits}")
        if not 1 <= self.mantissa_bits <= 52:
            raise ValueError(f"mantissa_bits must be in 1..52, not {self.mantissa_bits}")

    @property
    def width(self):
        """Total encoding width in bits (sign + exponent + fraction)."""
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def precision(self):
        """Significand precision p in bits, hidden bit included."""
        return self.mantissa_bits + 1

    @property
    def bias(self):
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def max_exponent_field(self):
        """The all-ones exponent field, which encodes Inf and NaN."""
        return (1 << self.exponent_bits) - 1

    @property
    def emin(self):
        """Unbiased exponent of the smallest normal number."""
        return 1 - self.bias

    @property
    def emax(self):
        """Unbiased exponent of the largest finite number."""
        return self.bias

    @property
    def canonical_nan(self):
        """The quiet NaN every unit returns: sign 0, exponent all ones, fraction MSB only."""
        return (self.max_exponent_field << self.mantissa_bits) | (1 << (self.mantissa_bits - 1))

    @property
    def positive_infinity(self):
        return self.max_exponent_field << self.mantissa_bits

    @property
    def max_finite(self):
        return ((self.max_exponent_field - 1) << self.mantissa_bits) | ((1 << self.mantissa_bits) - 1)

    @property
    def sign_mask(self):
        return 1 << (self.width - 1)


F32 = FloatFormat("f32", 8, 23)
F16 = FloatFormat("f16", 5, 10)
BF16 = FloatFormat("bf16", 8, 7)

FORMATS = {fmt.name: fmt for fmt in (F32, F16, BF16)}


def float_format(fmt):
    """Return the :class:`FloatFormat` for ``fmt``, a short name or a format object.

    Raises
    ------
    ValueError
        If ``fmt`` is not one of ``"f32"``, ``"f16"``, ``"bf16"`` or a :class:`FloatFormat`.
    """
    if isinstance(fmt, FloatFormat):
        return fmt
    try:
        return FORMATS[fmt]
    except (KeyError, TypeError):
        raise ValueError(f"fmt must be one of {sorted(FORMATS)} or a FloatFormat, not {fmt!r}") from None
