"""The fixed-latency pipeline shared by every floating-point unit.

:class:`FloatUnit` builds the ``i``/``o`` ports of :mod:`rtl.fp.interface` and checks the
parameters every unit has. Its subclasses describe their datapath in ``_datapath`` with a
:class:`Pipeline`, which registers a group of values per stage and carries the valid bit
and the tag along, so the datapath code never handles either.
"""

from types import SimpleNamespace

from amaranth.hdl import Module, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import NO_DROPS, Param, Parameterized, check_bool, check_int, register_block
from .format import FloatFormat, float_format
from .interface import operand_layout, result_layout
from .product import DEFAULT_TILE, MAX_TILE, MIN_TILE
from .rounding import round_aligned

__all__ = ["Pipeline", "FloatUnit", "MAX_TAG_WIDTH", "FORMAT_NAMES", "FORMAT_PARAM", "FLUSH_PARAM",
           "TAG_PARAM", "DSP_TILE_PARAM", "LUT_BITS_PARAM", "BITS_PER_STAGE_PARAM",
           "PRODUCT_UNIT_PARAMS", "check_lut_bits", "ProductUnit", "register_unit"]

MAX_TAG_WIDTH = 1024
FORMAT_NAMES = ("f32", "f16", "bf16")

# Registry parameters every unit shares.
FORMAT_PARAM = Param("fmt", str, "f32", "operand and result format", choices=FORMAT_NAMES,
                     accepts=(FloatFormat,))
FLUSH_PARAM = Param("flush_subnormals", bool, False,
                    "read subnormal inputs as zero and flush subnormal results to zero")
TAG_PARAM = Param("tag_width", int, 0, "side-band tag bits carried with each operation", minimum=0,
                  maximum=MAX_TAG_WIDTH)
# Shared by the units with a significand product (multiplier, fused multiply-add) ...
DSP_TILE_PARAM = Param("dsp_tile", int, DEFAULT_TILE, "widest factor of one DSP multiplier (18 for ECP5)",
                       minimum=MIN_TILE, maximum=MAX_TILE)
LUT_BITS_PARAM = Param("lut_bits", int, 0, "low bits of one significand multiplied in LUTs, not DSPs",
                       minimum=0, maximum=MAX_TILE)
# All the parameters of those two units.
PRODUCT_UNIT_PARAMS = (FORMAT_PARAM, FLUSH_PARAM, DSP_TILE_PARAM, LUT_BITS_PARAM, TAG_PARAM)
# ... and by the digit-recurrence units (divider, square root).
BITS_PER_STAGE_PARAM = Param("bits_per_stage", int, 1, "recurrence steps per pipeline stage",
                             minimum=1, maximum=4)


def check_lut_bits(values):
    """The ``check_params`` rule of a product unit: ``lut_bits`` is at most the format's precision."""
    check_int("lut_bits", values["lut_bits"], 0, float_format(values["fmt"]).precision)


def register_unit(name, component, *, summary, golden):
    """Register an FP unit: family ``fp``, and no drops (every unit back-pressures its input)."""
    register_block(name, component, family="fp", summary=summary, golden=golden, drops=NO_DROPS)


class Pipeline:
    """Pipeline registers with one global advance condition.

    ``advance = ~o.valid | o.ready`` enables every register and drives ``i.ready``, so
    the pipeline accepts an operation every cycle unless the output is stalled.

    Parameters
    ----------
    m : Module
        Module receiving the registers.
    i, o : stream interfaces
        The unit's ports; ``i.valid`` and ``i.payload.tag`` (if any) travel with the data.
    """

    def __init__(self, m, i, o):
        self._m = m
        self._o = o
        self.advance = Signal()
        m.d.comb += [self.advance.eq(~o.valid | o.ready), i.ready.eq(self.advance)]
        self._valid = i.valid
        self._tag = i.payload.tag if hasattr(i.payload, "tag") else None
        self.depth = 0

    def _register(self, value, name, **kwargs):
        if hasattr(value, "map_values"):
            # Small structures (e.g. SpecialResult) register field by field.
            return value.map_values(lambda field, field_name: self._register(field, f"{name}_{field_name}",
                                                                               **kwargs))
        value = Value.cast(value)
        reg = Signal(value.shape(), name=f"s{self.depth}_{name}", **kwargs)
        with self._m.If(self.advance):
            self._m.d.sync += reg.eq(value)
        return reg

    def stage(self, previous=None, *carried, enabled=True, **values):
        """Register ``values`` (name to value) into the next stage and return them by name.

        ``carried`` names attributes of ``previous`` (an earlier stage's return value)
        that move on unchanged. With ``enabled=False`` no register is built and the
        values are returned as they are, so optional cuts cost nothing when turned off.
        """
        values = {**{name: getattr(previous, name) for name in carried}, **values}
        if not enabled:
            return SimpleNamespace(**values)
        self.depth += 1
        self._valid = self._register(self._valid, "valid")
        if self._tag is not None:
            self._tag = self._register(self._tag, "tag", reset_less=True)
        return SimpleNamespace(**{name: self._register(value, name, reset_less=True)
                                  for name, value in values.items()})

    def output(self, *, result, flags):
        """Register the final ``result`` and ``flags`` into ``o``; returns the total latency."""
        self.depth += 1
        payload = self._o.payload
        with self._m.If(self.advance):
            self._m.d.sync += [self._o.valid.eq(self._valid), payload.result.eq(result),
                               payload.flags.eq(flags)]
            if self._tag is not None:
                self._m.d.sync += payload.tag.eq(self._tag)
        return self.depth

    def round_output(self, fmt, special, *, sign, exponent, significand, sticky, flush_subnormals):
        """Last stage of a rounding unit: round to ``fmt``, let ``special`` override, register into ``o``.

        The operands are those of :func:`~rtl.fp.rounding.round_aligned`; ``special`` is the
        stage's :class:`~rtl.fp.classify.SpecialResult` (NaN, infinity, zero override).
        """
        rounded = round_aligned(fmt, sign=sign, exponent=exponent, significand=significand, sticky=sticky,
                                flush_subnormals=flush_subnormals)
        result, flags = special.select(*rounded)
        return self.output(result=result, flags=flags)

    def round_stage(self, fmt, special, s, *, flush_subnormals):
        """:meth:`round_output` of the stage ``s``: its sign, exponent, significand and sticky bit."""
        return self.round_output(fmt, special, sign=s.sign, exponent=s.exponent, significand=s.significand,
                                 sticky=s.sticky, flush_subnormals=flush_subnormals)


class FloatUnit(wiring.Component):
    """Base of the pipelined floating-point units: ports, parameter checks, pipeline.

    Subclasses call ``super().__init__`` with their widths and latency, and implement
    ``_datapath(m, pipe)``, which builds the stages and ends with ``pipe.output(...)``.

    Parameters
    ----------
    input_width, output_width : int
        Raw operand and result widths.
    operands : tuple of str
        Operand field names of ``i.payload``.
    tag_width : int
        Width of the side-band tag, 0 to :data:`MAX_TAG_WIDTH`.
    latency : int
        Number of register stages from ``i`` to ``o``.
    result_shape : shape, optional
        Overrides the ``output_width``-bit result (e.g. 1 bit for comparisons).
    """

    def __init__(self, *, input_width, output_width, operands, tag_width, latency, result_shape=None):
        self._tag_width = check_int("tag_width", tag_width, 0, MAX_TAG_WIDTH)
        self.latency = latency
        super().__init__({
            "i": In(stream.Signature(operand_layout(input_width, operands, tag_width))),
            "o": Out(stream.Signature(result_layout(output_width, tag_width, result_shape))),
        })

    @staticmethod
    def _check_common(fmt, flush_subnormals, name="fmt"):
        """Validate the format and flush parameters every unit takes."""
        try:
            fmt = float_format(fmt)
        except ValueError as error:
            raise ValueError(str(error).replace("fmt", name, 1)) from None
        return fmt, check_bool("flush_subnormals", flush_subnormals)

    def elaborate(self, platform):
        m = Module()
        pipe = Pipeline(m, self.i, self.o)
        self._datapath(m, pipe)
        assert pipe.depth == self.latency, (pipe.depth, self.latency)
        return m

    def _datapath(self, m, pipe):
        raise NotImplementedError


class ProductUnit(Parameterized, FloatUnit):
    """Base of the units with a tiled significand product (multiplier, fused multiply-add).

    Declares and checks their parameters (``lut_bits`` at most the precision) and builds the
    ports. A subclass names its ``OPERANDS``, returns its latency from ``_latency()`` (the
    format, flush mode, tile and LUT bits are set by then) and implements ``_datapath``.

    Parameters
    ----------
    fmt, flush_subnormals, dsp_tile, lut_bits, tag_width
        As the subclass documents them.
    """

    PARAMS = PRODUCT_UNIT_PARAMS
    OPERANDS = ()

    @classmethod
    def check_params(cls, values):
        check_lut_bits(values)

    def __init__(self, *, fmt="f32", flush_subnormals=False, dsp_tile=DEFAULT_TILE, lut_bits=0, tag_width=0):
        self._fmt, self._flush = self._check_common(fmt, flush_subnormals)
        self._tile = dsp_tile
        super().__init__(input_width=self._fmt.width, output_width=self._fmt.width, operands=self.OPERANDS,
                         tag_width=tag_width, latency=self._latency())

    def _latency(self):
        raise NotImplementedError
