"""Golden models of in-network gradient reduction (dissertation Chapter 7, Sections 7.3.2 to 7.3.4).

:mod:`golden.collective.reduction` states the reduction table's semantics: which contributions
are merged, which are dropped and counted, the two summation orders (leaf-id order, the
default, and arrival order), the order in which reduced partitions leave the table, and the
two-level table (per region, then over the regions).
:mod:`golden.collective.barrier` states the global barrier table's: no leaf runs more than one
iteration ahead of the slowest. :mod:`golden.collective.delayed_update` is the GCU's step of
delayed-update training: the reduced gradient through Adam, in place. :mod:`golden.collective.control`
states the control units' counters, their iteration tags and a regional unit's fetches asked again.
"""

from .barrier import BarrierTable
from .control import FetchRetry, IterationFilter
from .delayed_update import delayed_update_step, mean_scale
from .reduction import (
    CANONICAL_NAN_BITS,
    LINE_WORDS,
    NEG_ZERO_BITS,
    Contribution,
    ReductionTable,
    TieredTable,
    add_lines,
    line_value,
    reduce_arrival_order,
    reduce_hierarchical,
    reduce_leaf_order,
)
from .ring import RingMessage, ring_all_reduce, ring_counts, ring_messages, seed_ring_counts

__all__ = [
    "BarrierTable",
    "IterationFilter",
    "FetchRetry",
    "delayed_update_step",
    "mean_scale",
    "LINE_WORDS",
    "NEG_ZERO_BITS",
    "CANONICAL_NAN_BITS",
    "Contribution",
    "line_value",
    "ReductionTable",
    "add_lines",
    "reduce_leaf_order",
    "reduce_arrival_order",
    "reduce_hierarchical",
    "TieredTable",
    "RingMessage",
    "ring_all_reduce",
    "ring_messages",
    "ring_counts",
    "seed_ring_counts",
]
