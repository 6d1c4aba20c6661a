"""Event counters: the counter width, pulse counts, and counters that saturate instead of wrapping."""

from amaranth.hdl import Const, Mux, Signal

__all__ = ["COUNTER_BITS", "pulse_count", "popcount", "count_saturating", "saturating_counter",
           "saturating_count", "count_events", "add_saturating"]

# The width of the event and drop counters of the runtime, aggregate and dlrm blocks (the collective
# family's narrower counters are ``rtl.collective.reduction_table.COLLECTIVE_COUNTER_BITS``).
COUNTER_BITS = 32


def pulse_count(*pulses):
    """Number of high bits among ``pulses`` (for a counter fed by several events per cycle)."""
    total = Const(0, 1)
    for pulse in pulses:
        total = total + pulse
    return total


def popcount(bits):
    """Number of set bits of the value ``bits`` (:func:`pulse_count` of its bits)."""
    return pulse_count(*(bits[index] for index in range(len(bits))))


def count_saturating(m, counter, events):
    """``counter += sum(events)`` each cycle, stopping at ``2**len(counter) - 1``: a counter at its
    limit reads "at least this many", never a small wrapped number. ``events`` are pulses or counts."""
    full = counter + pulse_count(*events)
    limit = (1 << len(counter)) - 1
    m.d.sync += counter.eq(Mux(full > limit, limit, full))


def saturating_counter(m, name, width, increment):
    """A ``width``-bit event counter, zero after reset, adding ``increment`` each cycle and saturating
    (:func:`count_saturating`). Returns the counter (a ``Signal``)."""
    counter = Signal(width, name=name)
    count_saturating(m, counter, [increment])
    return counter


def saturating_count(m, counter, event):
    """Count ``event`` pulses (one a cycle at most) in ``counter``, which stops at its largest value
    instead of wrapping. For a single pulse: an all-ones test gates the increment, where
    :func:`count_saturating` compares the sum with the limit."""
    with m.If(event & ~counter.all()):
        m.d.sync += counter.eq(counter + 1)


def count_events(m, owner, events):
    """:func:`saturating_count` of each pulse in ``events`` (``{name: pulse}``) in the counter
    ``owner.<name>`` (a block's output port of that name), in the order of ``events``."""
    for name, event in events.items():
        saturating_count(m, getattr(owner, name), event)


def add_saturating(m, counter, increment, name="total"):
    """``counter += increment`` each cycle, stopping at its largest value: the sum is formed one bit
    wider (a signal called ``name``) and its carry selects the limit. The same function as
    :func:`count_saturating`, with a carry test where that has a compare."""
    total = Signal(len(counter) + 1, name=name)
    m.d.comb += total.eq(counter + increment)
    m.d.sync += counter.eq(Mux(total[-1], (1 << len(counter)) - 1, total))
