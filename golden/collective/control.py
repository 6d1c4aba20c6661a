"""The control units' rules around the reduction table: counters, iteration tags, fetches asked again.

What the GCU and a regional control unit (``rtl.collective.gcu``, ``rtl.collective.region_unit``)
count, in the order of their counter ports, and two of their rules stated on their own:

* :class:`IterationFilter`: a gradient line carries an iteration tag (the version its partition
  reaches with this reduction: the sender's iteration + 1, mod 256). A line of a known partition
  whose tag is not the partition's closed reductions + 1 is dropped and counted
  (``late_gradients``): a late duplicate after a reduction closed must not open it again.
* :class:`FetchRetry`: a regional unit's fetch at the GCU holds its slot until a complete reply
  (every line, in order, intact) has come; only that advances the partition's version. A reply
  with a gap, or no line for ``cycles`` cycles, makes the unit ask again (``retries``), at most
  ``limit`` times per fetch; then the fetch is given up (``lost_fetches``). A reply line to no
  open fetch is dropped (``unexpected_replies``).

Every counter here saturates at 65535 (:data:`COUNTER_MAX`).
"""

__all__ = ["COUNTER_MAX", "TAG_SHIFT", "DAMAGED_BIT", "FETCH_COUNTERS", "REDUCTION_COUNTERS", "GCU_COUNTERS",
           "UNIT_COUNTERS", "REGION_COUNTERS", "IterationFilter", "FetchRetry", "saturated"]

COUNTER_MAX = (1 << 16) - 1
# A gradient line's ``line`` field: the chunk below this bit, the 8-bit iteration tag from it on.
TAG_SHIFT = 16
# The packet bit a simulated cluster's ``damage`` input flips (a data bit: the header still routes).
DAMAGED_BIT = 100
FETCH_COUNTERS = (
    "bad_requests", "early_requests", "stale_requests", "duplicate_requests", "repeated_requests")
REDUCTION_COUNTERS = (
    "bad_leaf", "bad_partition", "bad_chunk", "conflicts", "duplicates", "nonfinite", "reduced")
GCU_COUNTERS = ("malformed", *FETCH_COUNTERS, "late_gradients")
# Every counter port of a GCU, in port order.
UNIT_COUNTERS = (*GCU_COUNTERS, *(f"reduction_{name}" for name in REDUCTION_COUNTERS),
                 "barrier_bad_leaf", "barrier_duplicates")
REGION_COUNTERS = (*UNIT_COUNTERS, "retries", "lost_fetches", "bad_replies", "unexpected_replies",
                   "up_requests", "unexpected_acks")


def saturated(count):
    """A saturating counter's value after ``count`` events."""
    return min(count, COUNTER_MAX)


class IterationFilter:
    """Which tagged gradient lines reach the reduction table (see the module docstring)."""

    def __init__(self, partitions):
        self.partitions = partitions
        self.closed = [0] * partitions
        self.late_gradients = 0

    def admit(self, partition, tag):
        """Whether a line of ``partition`` tagged ``tag`` goes on to the table (else it is counted)."""
        if partition < self.partitions and tag != (self.closed[partition] + 1) % 256:
            self.late_gradients = saturated(self.late_gradients + 1)
            return False
        return True

    def close(self, partition):
        """The table closed a reduction of ``partition`` (its last contribution was merged)."""
        self.closed[partition] = (self.closed[partition] + 1) % 256


class FetchRetry:
    """One slot's fetch at the GCU and its replies (see the module docstring).

    Feed it events in time order: :meth:`line` (an intact reply line), :meth:`silence` (``cycles``
    cycles with no line). :attr:`version` is the partition's version at the unit, :attr:`asks`
    the requests sent for the fetch (the first and the re-asks).
    """

    def __init__(self, *, partition, chunks, limit, version=0):
        self.partition, self.chunks, self.limit = partition, chunks, limit
        self.version = version
        self.open, self.asks, self.tries = True, 1, 0
        self.counters = dict.fromkeys(("retries", "lost_fetches", "unexpected_replies"), 0)
        self._start()

    def _start(self):
        self.expect, self.gap = 0, False

    def _fail(self):
        if self.tries == self.limit:
            self.open = False
            self.counters["lost_fetches"] += 1
            return
        self.tries += 1
        self.asks += 1
        self.counters["retries"] += 1
        self._start()

    def line(self, partition, line):
        """An intact reply line of ``partition``; returns whether it is written into the copy."""
        if not self.open or partition != self.partition:
            self.counters["unexpected_replies"] += 1
            return False
        in_order = line == self.expect
        self.gap |= not in_order
        self.expect = line + 1
        if line == self.chunks - 1:
            if in_order and not self.gap:
                self.open = False
                self.version = (self.version + 1) % 256
            else:
                self._fail()
        return True

    def silence(self):
        """No line of the reply for ``cycles`` cycles while the fetch is open."""
        if self.open:
            self._fail()
