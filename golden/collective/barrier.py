"""The global barrier table: every leaf stays within one iteration of the slowest.

Each leaf sends a barrier when it finishes an iteration, and waits for the table's
acknowledgement before it goes on; the acknowledgement names the iterations the leaf has
completed. The table holds ``base``, the iterations the slowest leaf has completed, and per leaf
whether it is one ahead of ``base``. A barrier from a leaf:

* that is at ``base`` moves it to ``base + 1`` and is acknowledged at once;
* that is already at ``base + 1`` would put it two iterations ahead: it is held (pending) and
  not acknowledged;
* from a leaf whose barrier is already pending is a protocol error: dropped and counted
  (``duplicates``); from a leaf id not below ``leaves``: dropped and counted (``bad_leaf``).

When every leaf is at ``base + 1``, ``base`` advances, and every pending leaf moves on (to the new
``base + 1``) and is acknowledged. Iterations count modulo 256.
"""

__all__ = ["BarrierTable"]

ITERATION_MODULUS = 256


class BarrierTable:
    """The barrier table (see the module docstring).

    Attributes
    ----------
    base : int
        Iterations completed by the slowest leaf (mod 256).
    acks : list of (leaf, iteration)
        Acknowledgements in the order they were given; a leaf released together with others
        when ``base`` advances is acknowledged in leaf-id order.
    counters : dict
        ``bad_leaf``, ``duplicates``.
    """

    def __init__(self, *, leaves):
        self.leaves = leaves
        self.base = 0
        self.ahead = [0] * leaves
        self.pending = [False] * leaves
        self.acks = []
        self.counters = {"bad_leaf": 0, "duplicates": 0}

    def iteration(self, leaf):
        """Iterations ``leaf`` has completed (mod 256)."""
        return (self.base + self.ahead[leaf]) % ITERATION_MODULUS

    def barrier(self, leaf):
        """Take one barrier from ``leaf``."""
        if leaf >= self.leaves:
            self.counters["bad_leaf"] += 1
        elif self.pending[leaf]:
            self.counters["duplicates"] += 1
        elif self.ahead[leaf]:
            self.pending[leaf] = True
        else:
            self.ahead[leaf] = 1
            self.acks.append((leaf, self.iteration(leaf)))
        while all(self.ahead):
            self.base = (self.base + 1) % ITERATION_MODULUS
            released = [leaf for leaf in range(self.leaves) if self.pending[leaf]]
            self.ahead = [int(p) for p in self.pending]
            self.pending = [False] * self.leaves
            self.acks.extend((leaf, self.iteration(leaf)) for leaf in released)
