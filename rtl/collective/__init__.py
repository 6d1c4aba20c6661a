"""In-network gradient reduction: the global control unit's blocks (see docs/collective.md).

A family of its own rather than part of ``rtl/runtime``: these blocks sit on a switch port as a
headless SmartNIC (dissertation Section 7.3) and reduce gradients, whereas the runtime's blocks
move tasks and data between compute nodes; the collective blocks speak the runtime's packets but
share none of its handlers.
"""

# Importing the block modules registers the blocks.
from . import (  # noqa: F401
    barrier_table,
    gcu,
    gcu_cluster,
    parameter_store,
    parameter_update,
    reduction_engine,
    reduction_unit,
    region_unit,
    ring_cluster,
    ring_node,
    sliced_gcu_cluster,
    tiered_cluster,
)
