"""GNN aggregation: the FCsN aggregation pipeline fed by task packets (see docs/aggregate.md)."""

from . import aggregation_pipeline  # noqa: F401  (registers the block)
