"""DLRM training on the SmartNIC (dissertation Section 5.5): embedding cache, dedupe, loss reduction.

A family of its own: these blocks stand between the network and the GPU's HBM of a DLRM training
node; they speak the runtime's 512-bit lines but share none of its handlers.
"""

from . import dedupe_unit, embedding_bag, embedding_bag_update, embedding_cache, loss_reduction  # noqa: F401  (registers the blocks)
