"""What the aggregation tests share beyond the host device: small seeded graphs.

The testbench of a pipeline build (:class:`scripts.sim.devices.aggregate.AggregationTB`: stall
patterns, the spawner and the check of a job's OUT bits and counters against
:func:`golden.aggregate.execute`) and :func:`~scripts.sim.devices.aggregate.special_features`
are the host device's, which the bench drives too.
"""

from golden.aggregate import GraphSpec, generate

__all__ = ["small_graph"]


def small_graph(nodes, edges, seed, max_degree=None):
    """A seeded power-law graph (:func:`golden.aggregate.generate`) without self-loops."""
    default = min(nodes - 1, max(4, nodes // 4, 3 * edges // nodes + 1))
    spec = GraphSpec("test", nodes, edges, 0, 0, max_degree or default, False)
    return generate(spec, seed=seed)
