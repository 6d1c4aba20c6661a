"""Evaluation tops: a block on a real board with every port kept alive, for place and route.

A block alone has hundreds of ports and no pins to put them on. :class:`EvaluationCore`
drives every input of the block from a pseudo-random sequence and folds every output
into one registered bit, so that synthesis can neither tie an input to a constant nor
drop an unobserved output, and the timing nextpnr reports is the block's own:

* inputs come from a 32-bit maximal-length LFSR extended by a shift register to the total
  input width (each input bit is a different time shift of the same sequence);
* outputs are XOR-folded 8 bits at a time, with a register after every fold, so the fold
  adds at most two LUT4 levels between registers (never the critical path of a real block).

:class:`EvaluationTop` puts the core on an ECP5 board: an ``EHXPLLL`` PLL makes the
requested clock from the board oscillator, its lock signal holds the core in reset,
and the folded bit drives an LED. nextpnr derives the core clock's constraint from the
oscillator's through the PLL dividers (its log says "Derived frequency constraint").

This is measurement scaffolding, not a NearTrain block: it is not registered.
"""

import math

from amaranth.hdl import Cat, ClockDomain, Const, Elaboratable, Instance, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import Out

from .elaborate import port_members

__all__ = ["EvaluationCore", "EvaluationTop", "ecp5_pll_dividers", "LFSR_TAPS", "FOLD_WIDTH"]

# x^32 + x^22 + x^2 + x + 1 is primitive, so the sequence repeats only after 2^32 - 1 cycles.
LFSR_TAPS = (31, 21, 1, 0)
LFSR_WIDTH = 32
FOLD_WIDTH = 8
_SEED = 0xACE1_5EED


class EvaluationCore(wiring.Component):
    """A block whose inputs are pseudo-random and whose outputs are folded into ``out``.

    Parameters
    ----------
    block : wiring.Component
        The block under evaluation; its ports are all in the ``sync`` domain.

    Attributes
    ----------
    out : Out(1)
        XOR of every output bit of the block, a few cycles later, from a register.
    input_width, output_width : int
        Total bits driven and observed.
    fold_latency : int
        Cycles from the block's outputs to ``out``.
    """

    out: Out(1)

    def __init__(self, block):
        if not isinstance(block, wiring.Component):
            self._MustUse__silence = True  # a rejected wrapper is not an unused one
            raise TypeError(f"block must be an amaranth.lib.wiring.Component, not {block!r}")
        self.block = block
        self._inputs, self._outputs = [], []
        for _, member, value in port_members(block):  # constant members are no ports
            (self._inputs if member.flow == wiring.In else self._outputs).append(value)
        self.input_width = sum(len(value) for value in self._inputs)
        self.output_width = sum(len(value) for value in self._outputs)
        self.fold_latency = 1
        width = self.output_width
        while width > 1:
            width = (width + FOLD_WIDTH - 1) // FOLD_WIDTH
            self.fold_latency += 1
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.block = self.block

        state = Signal(max(LFSR_WIDTH, self.input_width), init=_SEED)
        feedback = 0
        for tap in LFSR_TAPS:
            feedback ^= state[tap]
        m.d.sync += state.eq(Cat(feedback, state[:-1]))
        offset = 0
        for value in self._inputs:
            m.d.comb += value.eq(state[offset:offset + len(value)])
            offset += len(value)

        folded = Cat(*self._outputs) if self._outputs else Const(0, 1)
        while len(folded) > 1:
            stage = Signal((len(folded) + FOLD_WIDTH - 1) // FOLD_WIDTH)
            m.d.sync += stage.eq(Cat(folded[start:start + FOLD_WIDTH].xor()
                                     for start in range(0, len(folded), FOLD_WIDTH)))
            folded = stage
        result = Signal()
        m.d.sync += result.eq(folded)
        m.d.comb += self.out.eq(result)
        return m


# ECP5 EHXPLLL limits (Lattice TN1263, ECP5 sysCLOCK PLL/DLL Design and Usage Guide).
_PFD_HZ = (3.125e6, 400e6)
_VCO_HZ = (400e6, 800e6)
_OUTPUT_HZ = (3.125e6, 400e6)


def ecp5_pll_dividers(*, input_hz, output_hz):
    """Choose ``EHXPLLL`` dividers for ``output_hz`` from ``input_hz`` (feedback from CLKOP).

    Returns
    -------
    dict
        ``CLKI_DIV``, ``CLKFB_DIV``, ``CLKOP_DIV`` and the ``output_hz`` actually reached,
        the closest to the request; among equals, the one whose VCO is nearest 600 MHz.

    Raises
    ------
    ValueError
        When ``output_hz`` is outside what the PLL can produce.
    """
    if not _OUTPUT_HZ[0] <= output_hz <= _OUTPUT_HZ[1]:
        raise ValueError(f"the ECP5 PLL output must be in {_OUTPUT_HZ[0] / 1e6:g}..{_OUTPUT_HZ[1] / 1e6:g} "
                         f"MHz, not {output_hz / 1e6:g} MHz")
    best = None
    for clki_div in range(1, 129):
        pfd = input_hz / clki_div
        if not _PFD_HZ[0] <= pfd <= _PFD_HZ[1]:
            continue
        for clkfb_div in range(1, 81):
            reached = pfd * clkfb_div
            lowest = max(1, math.ceil(_VCO_HZ[0] / reached))
            for clkop_div in range(lowest, min(128, math.floor(_VCO_HZ[1] / reached)) + 1):
                vco = reached * clkop_div
                score = (abs(reached - output_hz), abs(vco - 600e6))
                if best is None or score < best[0]:
                    best = (score, {"CLKI_DIV": clki_div, "CLKFB_DIV": clkfb_div, "CLKOP_DIV": clkop_div,
                                    "output_hz": reached})
    if best is None:
        raise ValueError(f"no ECP5 PLL setting reaches {output_hz / 1e6:g} MHz from {input_hz / 1e6:g} MHz")
    return best[1]


class EvaluationTop(Elaboratable):
    """:class:`EvaluationCore` on an ECP5 board, clocked by a PLL, observed on one pin.

    Parameters
    ----------
    core : EvaluationCore
        The wrapped block.
    clock_resource : str
        Platform resource of the board oscillator.
    led : tuple
        ``(resource, number, subsignal or None)`` of the output pin.
    frequency_hz : float
        Requested core clock; :attr:`frequency_hz` is what the PLL reaches.
    """

    def __init__(self, core, *, clock_resource, led, frequency_hz):
        if not isinstance(core, EvaluationCore):
            self._MustUse__silence = True  # a rejected wrapper is not an unused one
            raise TypeError(f"core must be an EvaluationCore, not {core!r}")
        self.core = core
        self.clock_resource = clock_resource
        self.led = led
        self.requested_hz = frequency_hz
        self.pll = None
        self.frequency_hz = None

    def elaborate(self, platform):
        m = Module()
        clock = platform.request(self.clock_resource, 0)
        input_hz = platform.lookup(self.clock_resource, 0).clock.frequency
        self.pll = ecp5_pll_dividers(input_hz=input_hz, output_hz=self.requested_hz)
        self.frequency_hz = self.pll["output_hz"]

        m.domains.sync = sync = ClockDomain("sync")
        locked = Signal()
        # Loop-filter attributes and the CPHASE rule are what Project Trellis's `ecppll` writes.
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_FEEDBK_PATH="CLKOP",
            p_CLKOP_ENABLE="ENABLED", p_CLKI_DIV=self.pll["CLKI_DIV"], p_CLKFB_DIV=self.pll["CLKFB_DIV"],
            p_CLKOP_DIV=self.pll["CLKOP_DIV"], p_CLKOP_CPHASE=(self.pll["CLKOP_DIV"] - 1) // 2,
            p_CLKOP_FPHASE=0,
            i_CLKI=clock.i, i_CLKFB=sync.clk, i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0,
            i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1, i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=sync.clk, o_LOCK=locked,
        )
        m.submodules.reset_sync = ResetSynchronizer(~locked, domain="sync")

        m.submodules.core = self.core
        name, number, subsignal = self.led
        pin = platform.request(name, number)
        if subsignal is not None:
            pin = getattr(pin, subsignal)
        m.d.comb += pin.o.eq(self.core.out)
        return m
