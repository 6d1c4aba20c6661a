"""The lane-parallel element datapath of an optimizer updater, with credit-based backpressure."""

import dataclasses

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..fp.pipeline import DSP_TILE_PARAM, LUT_BITS_PARAM
from ..fp.product import DEFAULT_TILE
from ..registration import NO_DROPS, Param, Parameterized, register_block
from .credit import credit_depth, credited_pipeline
from .dataflow import Dataflow
from .optimizers import OPTIMIZERS, param_copy, widen_gradient

__all__ = ["UpdaterCore", "core_input_layout", "core_output_layout", "gradient_layout", "MAX_LANES",
           "ARITHMETIC_PARAM", "PRODUCT_PARAMS"]

MAX_LANES = 32
ARITHMETIC_PARAM = Param("arithmetic", bool, True, "build the FP datapath (False: its timing only)")
# The multipliers' and FMAs' significand-product mapping, shared with the kernels.
PRODUCT_PARAMS = [DSP_TILE_PARAM, dataclasses.replace(LUT_BITS_PARAM, maximum=24)]
# The gradient tap: widened gradient lanes, the lane mask and a valid bit; it never waits.
_WIDEN_NAME = "g0"


def core_input_layout(optimizer, lanes):
    """``{"mask": lanes, "lanes": [{"param", "grad", <states>} x lanes]}``, 32 bits each."""
    spec = OPTIMIZERS[optimizer]
    element = data.StructLayout({name: 32 for name in ("param", "grad") + spec.states})
    return data.StructLayout({"mask": lanes, "lanes": data.ArrayLayout(element, lanes)})


def core_output_layout(optimizer, lanes):
    """``{"mask": lanes, "lanes": [{"param", <states>, "param16"} x lanes]}``; param16 is 16 bits."""
    spec = OPTIMIZERS[optimizer]
    fields = {name: 32 for name in ("param",) + spec.states}
    fields["param16"] = 16
    return data.StructLayout({"mask": lanes, "lanes": data.ArrayLayout(data.StructLayout(fields), lanes)})


def gradient_layout(lanes):
    """Payload of the gradient tap: ``{"mask": lanes, "lanes": [binary32 x lanes]}``."""
    return data.StructLayout({"mask": lanes, "lanes": data.ArrayLayout(32, lanes)})


class UpdaterCore(Parameterized, wiring.Component):
    """One optimizer step on ``lanes`` elements per cycle: Adam/AdamW, SGD or AdaGrad, bit-exact.

    Each lane is a pipeline of :mod:`rtl.fp` units in the operation order of the golden
    model (:mod:`rtl.optim.optimizers` quotes it line by line): the gradient is widened to
    binary32 (f32, f16 or bf16, chosen at run time), the optimizer's arithmetic follows,
    and the new parameter is also rounded to a 16-bit copy (f16, bf16 or none). The host
    scalars of :func:`golden.optim.step_scalars` are inputs, as binary32 bits. The
    pipeline has no enable: inputs are accepted only while a credit-managed output FIFO
    of :func:`~rtl.optim.credit.credit_depth` entries has room for their results, so
    backpressure never stalls the arithmetic.

    Lanes whose ``mask`` bit is clear (the tail of a tensor whose length is not a multiple
    of ``lanes``) go through the arithmetic like the others, but are ignored by the
    non-finite status and the gradient tap's consumers; their outputs are don't-care.

    Parameters
    ----------
    optimizer : {"adam", "sgd", "adagrad"}
        Which update (AdamW is Adam with the AdamW scalars).
    lanes : int
        Elements per transfer, 1 to 32.
    arithmetic : bool
        Build the floating-point datapath (default). ``False`` builds only its timing: the
        same latency, credits and FIFO, with zero results and no status. It exists so that
        cycle benchmarks of wide kernels need not compile the arithmetic; it computes nothing.

    Attributes
    ----------
    i : In(stream.Signature(core_input_layout(optimizer, lanes)))
        Per lane ``param``, ``grad`` and the states as raw 32-bit words (a 16-bit gradient
        in the low half), and the lane ``mask``.
    o : Out(stream.Signature(core_output_layout(optimizer, lanes)))
        Per lane the new ``param``, the new states and ``param16``, with the input's mask.
        SGD with ``momentum == 0`` returns its buffer unchanged.
    scalars : In(Signature({name: Out(32)}))
        The step's host scalars (``OPTIMIZERS[optimizer].scalars``), binary32 bits.
    grad_format : In(2)
        0 f32, 1 f16, 2 bf16.
    copy_format : In(2)
        0 none (``param16`` is 0), 1 f16, 2 bf16.
    first_step, nesterov : In(1)
        SGD only: step 1 (the buffer becomes the gradient) and Nesterov momentum.
    nonfinite : Out(1)
        Sticky: a masked-in gradient element was NaN or Inf after widening
        (:data:`golden.optim.STATUS_NONFINITE_GRADIENT`).
    clear : In(1)
        Clears ``nonfinite``.
    gradient : Out(Signature({"valid": Out(1), "payload": Out(gradient_layout(lanes))}))
        Tap of the widened gradient, ``gradient_latency`` cycles after each accepted input,
        for the statistics unit. It cannot be stalled.
    latency : int
        Cycles from an accepted input to its result entering the output FIFO (Adam 143,
        SGD 57, AdaGrad 106 with the current ``rtl.fp`` units; computed from their
        latencies at construction).
    gradient_latency : int
        Cycles from an accepted input to its tap (3).

    All run-level inputs (scalars, formats, flags) must be stable while elements are in
    flight. Throughput: one transfer per cycle while ``o.ready`` is high.
    """

    PARAMS = (
        Param("optimizer", str, "adam", "which optimizer", choices=tuple(OPTIMIZERS)),
        Param("lanes", int, 1, "elements per transfer", minimum=1, maximum=MAX_LANES),
        ARITHMETIC_PARAM,
        *PRODUCT_PARAMS,
    )

    throughput = 1

    def __init__(self, *, optimizer="adam", lanes=1, arithmetic=True, dsp_tile=DEFAULT_TILE, lut_bits=0):
        self._spec = OPTIMIZERS[optimizer]
        self._products = {"dsp_tile": dsp_tile,
                          "lut_bits": lut_bits}
        members = {
            "i": In(stream.Signature(core_input_layout(optimizer, lanes))),
            "o": Out(stream.Signature(core_output_layout(optimizer, lanes))),
            "scalars": In(wiring.Signature({name: Out(32) for name in self._spec.scalars})),
            "grad_format": In(2),
            "copy_format": In(2),
            "nonfinite": Out(1),
            "clear": In(1),
            "gradient": Out(wiring.Signature({"valid": Out(1), "payload": Out(gradient_layout(lanes))})),
        }
        members.update({flag: In(1) for flag in self._spec.flags})
        super().__init__(members)
        schedule = self._lane(Dataflow(None, "schedule"), 0)
        self.latency = schedule["latency"]
        self.gradient_latency = schedule[_WIDEN_NAME].time
        self.fifo_depth = credit_depth(self.latency)

    @property
    def optimizer(self):
        return self._spec.name

    def _lane(self, df, lane):
        """Build lane ``lane``; returns its outputs (Timed) and the total latency."""
        element = self.i.payload.lanes[lane]
        x = {name: df.input(getattr(element, name), name) for name in ("param",) + self._spec.states}
        x[_WIDEN_NAME] = widen_gradient(df, df.input(element.grad, "grad"), self.grad_format)
        k = {name: df.constant(getattr(self.scalars, name), name) for name in self._spec.scalars}
        flags = {flag: getattr(self, flag) for flag in self._spec.flags}
        outputs = self._spec.datapath(df, x, k, flags, self._products)
        outputs["param16"] = param_copy(df, outputs["param"], self.copy_format)
        outputs[_WIDEN_NAME] = x[_WIDEN_NAME]
        outputs["latency"] = max(value.time for value in outputs.values())
        return outputs

    def elaborate(self, platform):
        m = Module()
        issue, result = credited_pipeline(m, i=self.i, o=self.o, latency=self.latency)

        # The mask and the accept bit travel beside the lanes: to the tap, then to the FIFO.
        mask, valid = self.i.payload.mask, issue
        taps = {}
        for stage in range(1, self.latency + 1):
            delayed_mask = Signal(self._lanes, reset_less=True, name=f"mask_d{stage}")
            delayed_valid = Signal(name=f"valid_d{stage}")
            m.d.sync += [delayed_mask.eq(mask), delayed_valid.eq(valid)]
            mask, valid = delayed_mask, delayed_valid
            taps[stage] = (mask, valid)
        m.d.comb += result.mask.eq(mask)

        gradient = self.gradient
        tap_mask, tap_valid = taps[self.gradient_latency]
        m.d.comb += [gradient.valid.eq(tap_valid), gradient.payload.mask.eq(tap_mask)]
        nonfinite_lanes = []
        for lane in range(self._lanes if self._arithmetic else 0):
            df = Dataflow(m, f"lane{lane}")
            outputs = self._lane(df, lane)
            for name, value in outputs.items():
                if name not in ("latency", _WIDEN_NAME):
                    m.d.comb += getattr(result.lanes[lane], name).eq(df.at(value, self.latency))
            widened = outputs[_WIDEN_NAME].value
            m.d.comb += gradient.payload.lanes[lane].eq(widened)
            nonfinite_lanes.append(tap_mask[lane] & (widened[23:31] == 0xFF))

        # Sticky status: any masked-in gradient element NaN or Inf.
        seen = Signal()
        m.d.comb += seen.eq(tap_valid & Cat(*nonfinite_lanes).any() if nonfinite_lanes else 0)
        with m.If(self.clear):
            m.d.sync += self.nonfinite.eq(0)
        with m.Elif(seen):
            m.d.sync += self.nonfinite.eq(1)
        return m


register_block(
    "updater_core", UpdaterCore, family="optim",
    summary="Lane-parallel bit-exact Adam/AdamW, SGD or AdaGrad element datapath, II = 1, credit FIFO.",
    golden="golden.optim.host:reference_update",
    drops=NO_DROPS,
)
