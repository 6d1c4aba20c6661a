"""Static scheduling of a fixed-latency dataflow graph built from :mod:`rtl.fp` units.

The optimizer datapaths are straight-line sequences of floating-point operations (see the
module docstrings in :mod:`golden.optim`). Every ``rtl.fp`` unit has a fixed ``latency``
and II = 1, so once its ``o.ready`` is tied high the whole graph is a pipeline with no
enable logic: each value is produced at a known cycle, and an operation whose operands
arrive at different cycles only needs the early ones delayed. :class:`Dataflow` does that
bookkeeping (an "as soon as possible" schedule): it instantiates the units, ties their
handshakes off, and inserts shift registers that align the operands.

Run-level constants (the optimizer's host scalars and mode bits, which do not change
while data flows) have no time and are never delayed.
"""

from amaranth.hdl import Const, Mux, Signal, Value

__all__ = ["Timed", "Dataflow", "latency_of", "select"]


def select(index, values):
    """``values[index]`` as a chain of multiplexers (an index past the end reads ``values[0]``).

    Unlike ``Array``, this never produces an incomplete Verilog ``case`` for a count that
    is not a power of two.
    """
    result = values[0]
    for position, value in enumerate(values[1:], start=1):
        result = Mux(index == position, value, result)
    return result


def latency_of(unit):
    """The ``latency`` of an ``rtl.fp`` unit built only to be measured (it is never elaborated)."""
    # Amaranth warns about elaboratables that are created and never used; this one is a probe.
    unit._MustUse__silence = True
    return unit.latency


class Timed:
    """A value and the cycle (relative to the datapath input) at which it is valid.

    ``time`` is None for run-level constants. Taps of the value delayed by ``k`` cycles are
    kept in ``_taps`` so that several consumers share one shift register.
    """

    def __init__(self, value, time, name):
        self.value = Value.cast(value)
        self.time = time
        self.name = name
        self._taps = [self.value]


class Dataflow:
    """Builds one lane's datapath into module ``m`` as an ASAP-scheduled pipeline.

    Parameters
    ----------
    m : Module
        Receives the units (as submodules) and the delay registers.
    prefix : str
        Prefix of submodule and signal names (e.g. ``"lane3"``), so lanes stay apart.

    Delay registers have no reset and no enable, which synthesis maps to shift-register
    LUTs (SRL) on Xilinx devices. With ``m=None`` nothing is built: the graph is only
    scheduled, which is how a component learns its latency before elaboration.
    """

    def __init__(self, m, prefix):
        self._m = m
        self._prefix = prefix

    def input(self, value, name, time=0):
        """A datapath input valid at ``time`` (0 = the cycle the operands enter)."""
        return Timed(value, time, name)

    def constant(self, value, name):
        """A run-level constant: valid at every cycle, never delayed."""
        return Timed(value, None, name)

    def at(self, timed, time):
        """The value of ``timed`` delayed to ``time`` (a constant is returned as it is)."""
        if timed.time is None or self._m is None:
            return timed.value
        delay = time - timed.time
        assert delay >= 0, f"{timed.name} is needed at {time}, before it exists at {timed.time}"
        while len(timed._taps) <= delay:
            previous = timed._taps[-1]
            register = Signal(previous.shape(), reset_less=True,
                              name=f"{self._prefix}_{timed.name}_d{len(timed._taps)}")
            self._m.d.sync += register.eq(previous)
            timed._taps.append(register)
        return timed._taps[delay]

    @staticmethod
    def _time(*operands):
        times = [operand.time for operand in operands if operand.time is not None]
        return max(times) if times else None

    def unit(self, unit, name, **operands):
        """Feed ``operands`` (field name to :class:`Timed`) to the ``rtl.fp`` ``unit``.

        The unit's input is presented at the latest operand time; its result is valid
        ``unit.latency`` cycles later. Returns the result as a :class:`Timed`.
        """
        time = self._time(*operands.values())
        assert time is not None, f"{name}: an operation on constants only belongs on the host"
        if self._m is None:
            return Timed(Const(0, len(unit.o.payload.result)), time + latency_of(unit), name)
        self._m.submodules[f"{self._prefix}_{name}"] = unit
        self._m.d.comb += [unit.i.valid.eq(1), unit.o.ready.eq(1)]
        for field, operand in operands.items():
            self._m.d.comb += getattr(unit.i.payload, field).eq(self.at(operand, time))
        return Timed(unit.o.payload.result, time + unit.latency, name)

    def select(self, condition, if_true, if_false, name):
        """``if_true`` when the run-level ``condition`` holds, else ``if_false``.

        Both are aligned to the later of the two; the multiplexer is combinational (its
        select is constant during a run, so it adds no timing hazard).
        """
        time = self._time(if_true, if_false)
        return Timed(Mux(condition, self.at(if_true, time), self.at(if_false, time)), time, name)

    def choose(self, index, options, name):
        """``options[index]`` for a run-level ``index``; options beyond it read as the first."""
        time = self._time(*options)
        return Timed(select(index, [self.at(option, time) for option in options]), time, name)

    def wire(self, timed, function, name):
        """A combinational function of one value (bit slicing, sign tests): same time."""
        return Timed(function(timed.value), timed.time, name)

    @staticmethod
    def zero(width):
        return Const(0, width)
