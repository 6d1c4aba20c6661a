"""The RTL and the golden model each state the float formats, flags and canonical NaNs in their
own words (``rtl/fp/format.py`` + ``rtl/fp/interface.py``; ``golden/fp/formats.py``), so that
the model stays an independent reading of IEEE 754. This holds the two statements equal."""

import pytest

import golden.fp.formats as model
import rtl.fp.format as hardware
import rtl.fp.interface as ports
from golden.compress.values import CANONICAL_NAN_F32 as COMPRESS_NAN
from golden.systolic.numerics import CANONICAL_NAN_F32 as SYSTOLIC_NAN

PROPERTIES = ("width", "precision", "bias", "max_exponent_field", "emin", "emax", "sign_mask",
              "positive_infinity", "canonical_nan", "max_finite")


@pytest.mark.parametrize("name", ["f32", "f16", "bf16"])
def test_formats_agree(name):
    rtl_format, golden_format = hardware.FORMATS[name], model.FORMATS[name]
    assert (rtl_format.exponent_bits, rtl_format.mantissa_bits) == \
        (golden_format.exponent_bits, golden_format.mantissa_bits)
    for prop in PROPERTIES:
        assert getattr(rtl_format, prop) == getattr(golden_format, prop), (name, prop)
    assert model.float_format(name) == golden_format
    assert model.float_format(rtl_format) == golden_format


@pytest.mark.parametrize("exponent_bits,mantissa_bits", [(2, 1), (3, 4), (4, 3), (5, 2), (11, 52)])
def test_generic_formats_agree(exponent_bits, mantissa_bits):
    rtl_format = hardware.FloatFormat("x", exponent_bits, mantissa_bits)
    golden_format = model.float_format(rtl_format)
    for prop in PROPERTIES:
        assert getattr(rtl_format, prop) == getattr(golden_format, prop), prop


def test_flags_agree():
    for name in ("INEXACT", "UNDERFLOW", "OVERFLOW", "DIVIDE_BY_ZERO", "INVALID"):
        assert getattr(ports, f"FLAG_{name}") == getattr(model, f"FLAG_{name}") == model.Flag[name]
    assert ports.FLAGS_WIDTH == len(model.Flag)


def test_canonical_nans_agree():
    assert COMPRESS_NAN == SYSTOLIC_NAN == hardware.F32.canonical_nan == 0x7FC00000


def test_bad_format_is_refused():
    with pytest.raises(ValueError, match="fmt must be one of"):
        model.float_format("f64")
    with pytest.raises(ValueError, match="exponent_bits must be in 2..11"):
        model.FloatFormat("x", 12, 3)
