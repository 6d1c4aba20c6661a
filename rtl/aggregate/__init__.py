"""GNN aggregation: the FCsN aggregation pipeline and its RTL kernel (see docs/aggregate.md)."""

from . import aggregation_kernel, aggregation_pipeline  # noqa: F401  (registers the blocks)
