"""Functional harnesses: what a block does to the data, beyond the stream rules.

The data arguments follow one symbolic token through the block: ``k`` and ``d`` are free
constants (``AnyConst``), the producer is assumed to send ``d`` as the ``k``-th unit (a
transfer, a word), and the block is asserted to deliver ``d`` as the ``k``-th unit out.
Since ``k`` and ``d`` are arbitrary, this holds for every unit: nothing is lost, duplicated
or reordered. Counters are wide enough that they never wrap within the checked depth.
"""

from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Cover, Mux, Signal, Value

from .streams import stream_harness, transfer_counter

__all__ = ["unit_sequence_harness", "queue_harness", "COUNT", "CHECKED"]

# Transfers a check can see without a counter wrapping (more than any depth used).
COUNT = 6
# The cover of an output transfer whose unit the sequence assertion checks: without it, a
# bound within which nothing comes out would pass the sequence check vacuously.
CHECKED = "o: a unit out checked"


def _units(m, port, unit, step):
    """The units (``unit`` bits each) that ``port`` has moved before this cycle, and ``step`` per transfer."""
    width = len(Value.cast(port.payload))
    moved = Signal(COUNT + width.bit_length(), name=f"{port.valid.name}_units")
    step = width // unit if step is None else step
    with m.If(port.valid & port.ready):
        m.d.sync += moved.eq(moved + step)
    return moved, step


def unit_sequence_harness(component, *, unit, in_units=None, total=None, environment=None, keep=()):
    """The ``k``-th ``unit``-bit unit out of ``o`` is the ``k``-th unit into ``i``, for every ``k``.

    Parameters
    ----------
    component : wiring.Component
        With streams ``i`` and ``o`` whose payloads are whole numbers of units.
    unit : int
        Unit width in bits (8 for the byte sequence, the word width for gearboxes).
    in_units : callable, optional
        ``in_units(taken)``: the units the next input transfer carries, given the units
        taken so far, when not the whole payload (a counted run's last input is trimmed).
    total : Value, optional
        Units of a counted run: the units of the last output beyond it (padding) are not
        checked, and no input is taken beyond it.
    environment : callable, optional
        ``environment(m, component)`` adds the block's documented assumptions.
    keep : iterable of signals
        Inputs ``environment`` drives itself.

    Not vacuous: the harness covers a stall of every output stream
    (:func:`.streams.stream_cover`) and an output transfer the sequence assertion checks
    (:data:`CHECKED`), so a proof of it fails unless both happen within its bound.
    """
    m, _inputs, _outputs = stream_harness(component, keep=keep, cover=True)
    i, o = component.i, component.o
    in_payload, out_payload = Value.cast(i.payload), Value.cast(o.payload)
    taken = Signal(COUNT + len(in_payload).bit_length(), name="units_in")
    in_step = Signal.like(taken, name="units_per_input")
    m.d.comb += in_step.eq(len(in_payload) // unit if in_units is None else in_units(taken))
    with m.If(i.valid & i.ready):
        m.d.sync += taken.eq(taken + in_step)
    given, out_step = _units(m, o, unit, None)
    k = AnyConst(len(taken))
    d = AnyConst(unit)
    offset_width = max(len(in_payload), len(out_payload)).bit_length()
    with m.If(i.valid & i.ready & (taken <= k) & (k < taken + in_step)):
        m.d.comb += Assume(in_payload.word_select((k - taken)[:offset_width], unit) == d,
                           "the k-th unit in is d")
    counted = 1 if total is None else k < total
    with m.If(o.valid & o.ready & (given <= k) & (k < given + out_step) & counted):
        m.d.comb += Assert(out_payload.word_select((k - given)[:offset_width], unit) == d,
                           "the k-th unit out is the k-th unit in (none lost, duplicated or reordered)")
    m.d.comb += Cover(o.valid & o.ready & counted, CHECKED)
    # An output may carry the input of the same cycle (a block of latency 0).
    arrived = taken + Mux(i.valid & i.ready, in_step, 0)
    with m.If(o.valid & o.ready):
        if total is None:
            m.d.comb += Assert(given + out_step <= arrived, "no unit goes out before it came in")
        else:
            # The last output of a run carries padding: all but its real units must have come in.
            m.d.comb += Assert((given + out_step <= arrived) | (arrived == total),
                               "no unit goes out before it came in (padding of the run's end aside)")
    if total is not None:
        m.d.comb += Assert(taken <= total, "no unit is taken beyond the run")
    if environment is not None:
        environment(m, component)
    return m


def queue_harness(component, *, capacity, level=None, refill=False, valid_when_held=True):
    """A first-in first-out block of ``capacity`` transfers: token, occupancy and ``ready`` properties.

    Parameters
    ----------
    component : wiring.Component
        With streams ``i`` and ``o`` of the same payload.
    capacity : int
        Transfers the block may hold; ``i.ready`` is asserted to be high exactly while it
        holds fewer.
    refill : bool
        Allow ``i.ready`` low for one cycle at a time while not full (a buffered FIFO's
        output register refilling from its memory), instead of never.
    level : Value, optional
        The block's own occupancy output, asserted to equal the transfers it holds.
    valid_when_held : bool
        ``o.valid`` is asserted high exactly while it holds a transfer (latency 1, no bubble).

    Covered as :func:`unit_sequence_harness` is, and the block is also covered full (its
    ``ready`` and occupancy assertions at the capacity).
    """
    m = unit_sequence_harness(component, unit=len(Value.cast(component.i.payload)))
    i, o = component.i, component.o
    taken = transfer_counter(m, i, COUNT, "transfers_in")
    given = transfer_counter(m, o, COUNT, "transfers_out")
    held = Signal(COUNT)
    m.d.comb += held.eq(taken - given)
    m.d.comb += Assert(held <= capacity, "occupancy never exceeds the depth")
    m.d.comb += Assert(~i.ready | (held < capacity), "i.ready is low while full")
    m.d.comb += Cover(held == capacity, "full")
    stalled = Signal()
    m.d.sync += stalled.eq(~i.ready)
    if refill:
        m.d.comb += Assert(i.ready | (held == capacity) | ~stalled,
                           "i.ready is low only while full, or for one cycle while the output refills")
    else:
        m.d.comb += Assert(i.ready | (held == capacity), "i.ready is high while there is room")
    if valid_when_held:
        m.d.comb += Assert(o.valid == (held != 0), "o.valid is high exactly while a transfer is held")
    else:
        m.d.comb += Assert(~o.valid | (held != 0), "o.valid only while a transfer is held")
    if level is not None:
        m.d.comb += Assert(level == held, "level counts the transfers held")
    return m


