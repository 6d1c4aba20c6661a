"""Test fixture: ``lanes`` copies of one FP unit behind one wide stream, for the 10^6-vector runs.

cocotb's cost is per clock cycle, not per bit, so a million vectors through one unit take
a million Python-driven cycles (minutes per configuration). Sixteen copies fed in lockstep
check sixteen vectors per cycle. The copies are the unit exactly as registered; the
fixture only fans the handshake out, which is sound because every unit is a fixed-latency
pipeline whose ``i.ready`` and ``o.valid`` depend only on the shared handshake
(``rtl/fp/interface.py``), so all copies agree on them every cycle. The single-unit
cocotb tests (``tb.UNIT_TESTS``) keep checking the unit's own ports under stalls.
"""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.registry import check_int, get_block

__all__ = ["ParallelUnits"]


class ParallelUnits(wiring.Component):
    """``lanes`` copies of registered FP unit ``block`` sharing one valid/ready handshake.

    Parameters
    ----------
    block : str
        Registered FP unit name (``fp_add``, ``fp_fma``, ...).
    unit_params : dict
        The unit's parameters.
    lanes : int
        Copies, 1..64.

    Attributes
    ----------
    i : In(stream.Signature(ArrayLayout(unit input payload, lanes)))
    o : Out(stream.Signature(ArrayLayout(unit output payload, lanes)))
    latency : int
        The unit's latency.
    """

    def __init__(self, *, block, unit_params, lanes):
        self._lanes = check_int("lanes", lanes, 1, 64)
        self._build = lambda: get_block(block).build(dict(unit_params))
        # The first copy doubles as the source of the unit's layouts and latency.
        self._first = probe = self._build()
        self.latency = probe.latency
        self.unit_input_layout = probe.i.payload.shape()
        self.unit_output_layout = probe.o.payload.shape()
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(self.unit_input_layout, self._lanes))),
            "o": Out(stream.Signature(data.ArrayLayout(self.unit_output_layout, self._lanes))),
        })

    def elaborate(self, platform):
        m = Module()
        for lane in range(self._lanes):
            unit = m.submodules[f"lane{lane}"] = self._first if lane == 0 else self._build()
            m.d.comb += [
                unit.i.valid.eq(self.i.valid),
                unit.i.payload.eq(self.i.payload[lane]),
                self.o.payload[lane].eq(unit.o.payload),
                unit.o.ready.eq(self.o.ready),
            ]
            if lane == 0:
                m.d.comb += [self.i.ready.eq(unit.i.ready), self.o.valid.eq(unit.o.valid)]
        return m
