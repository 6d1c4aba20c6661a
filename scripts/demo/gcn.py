"""``neartrain demo gcn``: a two-layer GCN forward pass with every matrix product in RTL simulation.

``logits = Â relu(Â (X W1)) W2`` on a synthetic Cora-like graph (:func:`golden.aggregate.generate`:
2,708 nodes, 5,429 edges, power-law degrees; ``Â = D^-1/2 (A + I) D^-1/2``), as the seed's
FCsN runs it (Section 2.4.1, combination before aggregation):

1. **Combination** ``X W1`` on the Verilated ``tiled_gemm`` (binary32, a 4 x 4 output-stationary
   array), ``X`` and ``W1`` streamed in element by element;
2. **Aggregation** ``Â (X W1)`` on the Verilated ``aggregation_pipeline`` (4 lanes, 16 features,
   weighted): the host's task spawner (:func:`golden.aggregate.spawn`) turns ``Â`` into
   packets, ``X W1`` is loaded as B, the packets stream in, and OUT is drained through the
   pipeline's ReLU;
3. the same for the second layer (``H W2``, then ``Â (H W2)``, no ReLU), on the same two builds.

Every intermediate is compared bit for bit with :func:`golden.aggregate.gcn_forward`, and the
logits with a float64 reference (:func:`golden.aggregate.gcn_reference`) within the rounding
bound :func:`golden.aggregate.gcn_bound`. Each step is one Verilator run through the host
devices of :mod:`scripts.sim.devices.aggregate`; the host moves the matrices between them, as the FCsN runtime
moves them through memory.

Cora's 1,433 input features would make the first GEMM's element-by-element fill alone about
3.9 million simulated transfers (this machine simulates the GEMM at about a millisecond per
cycle), so the default is 32 input features (``--features 1433`` runs the full width); the
graph, the hidden width (16) and the 7 classes are Cora's. docs/aggregate.md gives the times.
"""

import dataclasses
import time

import numpy as np

from golden.aggregate import (
    GRAPHS,
    PacketFormat,
    gcn_bound,
    gcn_forward,
    gcn_normalise,
    gcn_reference,
    gcn_weights,
    generate,
    spawn,
)

__all__ = ["DEFAULT_FEATURES", "DEFAULT_HIDDEN", "DEMO_GRAPHS", "Stage", "GcnDemoResult", "check_arguments",
           "gemm_params", "pipeline_params", "run_demo", "format_report"]

DEFAULT_FEATURES = 32
DEFAULT_HIDDEN = 16
MAX_WIDTH = 4096
DEMO_GRAPHS = ("cora", "citeseer")
# Words per node in Cora's bag-of-words features: about 18 of 1,433.
WORDS_PER_NODE = 18


@dataclasses.dataclass
class Stage:
    """One simulated step: what ran, its simulated cycles, wall time, and whether it equals the golden."""

    name: str
    block: str
    cycles: int
    seconds: float
    bit_exact: bool
    detail: str = ""


@dataclasses.dataclass
class GcnDemoResult:
    graph: str
    nodes: int
    edges: int
    features: int
    hidden: int
    classes: int
    lanes: int
    stages: list
    max_error: float
    max_bound: float
    within_bound: bool
    argmax_agreement: float

    @property
    def bit_exact(self):
        return all(stage.bit_exact for stage in self.stages)

    @property
    def ok(self):
        return self.bit_exact and self.within_bound


def check_arguments(*, graph="cora", features=DEFAULT_FEATURES, hidden=DEFAULT_HIDDEN, lanes=4, seed=1):
    """Raise ValueError naming the first bad argument."""
    if graph not in DEMO_GRAPHS:
        raise ValueError(f"graph must be one of {', '.join(DEMO_GRAPHS)}, not {graph!r}")
    for name, value, low in (("features", features, 1), ("hidden", hidden, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_WIDTH:
            raise ValueError(f"{name} must be an integer in {low}..{MAX_WIDTH}, not {value!r}")
    if hidden > 64 or GRAPHS[graph].classes > 64:
        raise ValueError(f"hidden must be at most 64 (the pipeline's feature width), not {hidden}")
    if lanes not in (1, 2, 4, 8):
        raise ValueError(f"lanes must be one of 1, 2, 4, 8, not {lanes!r}")


def gemm_params(nodes, features, hidden, classes):
    """The ``tiled_gemm`` build both layers share (binary32, 4 x 4 array, 6 accumulator slots)."""
    return {"rows": 4, "cols": 4, "element": "f32", "slots": 6, "max_m": nodes,
            "max_k": max(features, hidden), "max_n": max(hidden, classes)}


def pipeline_params(spawned, lanes, width):
    """The ``aggregation_pipeline`` build both layers share (weighted, ``width`` features)."""
    bits = max(1, (max(spawned.n_rows, spawned.n_cols) - 1).bit_length())
    return {"lanes": lanes, "features": width, "rows": spawned.n_rows, "cols": spawned.n_cols,
            "row_bits": bits, "col_bits": bits, "weighted": True}


def _timed(function, *args, **options):
    """``function(*args, **options)`` and its wall time in seconds."""
    start = time.perf_counter()
    result = function(*args, **options)
    return result, time.perf_counter() - start


def _bits(array):
    return np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)


def run_demo(*, graph="cora", features=DEFAULT_FEATURES, hidden=DEFAULT_HIDDEN, lanes=4, seed=1):
    """Run the forward pass on the simulated blocks; returns a :class:`GcnDemoResult`."""
    from scripts.sim.devices import aggregate as aggregate_device

    check_arguments(graph=graph, features=features, hidden=hidden, lanes=lanes, seed=seed)
    spec = GRAPHS[graph]
    adjacency = generate(graph, seed=seed)
    normalised = gcn_normalise(adjacency)
    nodes, classes = spec.nodes, spec.classes
    rng = np.random.default_rng(seed)
    x = (rng.random((nodes, features)) < min(0.5, WORDS_PER_NODE / features)).astype(np.float32)
    w1, w2 = gcn_weights(features, hidden, classes, seed=seed)
    golden = gcn_forward(normalised, x, w1, w2, lanes=lanes)
    reference = gcn_reference(normalised, x, w1, w2)
    bound = gcn_bound(normalised, x, w1, w2, golden)

    spawned = spawn(normalised, lanes=lanes, weighted=True)
    width = max(hidden, classes)
    aggregation = pipeline_params(spawned, lanes, width)
    packet_format = PacketFormat(lanes, aggregation["row_bits"], aggregation["col_bits"], True)
    words = packet_format.encode(spawned.packets)
    combination = gemm_params(nodes, features, hidden, classes)
    stages = []

    def combine(name, left, right, expected):
        results, seconds = _timed(aggregate_device.run_gemms, combination, [(_bits(left), _bits(right))])
        product = results[0]["c"].view(np.float32)
        stages.append(Stage(name, "tiled_gemm", results[0]["cycles"], seconds,
                            np.array_equal(results[0]["c"], _bits(expected)),
                            f"{left.shape[0]}x{left.shape[1]}x{right.shape[1]}, "
                            f"{results[0]['compute_cycles']} compute cycles"))
        return product

    def aggregate(name, dense, relu, expected):
        b = np.zeros((nodes, width), np.float32)
        b[:, :dense.shape[1]] = dense
        results, seconds = _timed(aggregate_device.run_aggregation, aggregation, _bits(b), words,
                                  spawned.n_rows, relu=relu)
        out = spawned.unpermute(results["out"].view(np.float32))[:, :dense.shape[1]]
        counters = results["counters"]
        stages.append(Stage(name, "aggregation_pipeline", results["cycles"], seconds,
                            np.array_equal(_bits(out), _bits(expected)),
                            f"{counters['packet_count']} packets in {results['stream_cycles']} cycles, "
                            f"{counters['stall_cycles']} stalls, {counters['nonzero_count']} nonzeros"
                            + (", ReLU on drain" if relu else "")))
        return out

    xw = combine("layer 1: X W1", x, w1, golden.xw)
    hidden_out = aggregate("layer 1: relu(Â XW1)", xw, True, golden.hidden)
    hw = combine("layer 2: H W2", hidden_out, w2, golden.hw)
    logits = aggregate("layer 2: Â HW2", hw, False, golden.logits)

    error = np.abs(logits.astype(np.float64) - reference)
    finite = np.isfinite(error)
    return GcnDemoResult(
        graph=graph, nodes=nodes, edges=int(adjacency.nnz // 2), features=features, hidden=hidden,
        classes=classes, lanes=lanes, stages=stages, max_error=float(error[finite].max()),
        max_bound=float(bound.max()), within_bound=bool(np.all(finite) and np.all(error <= bound)),
        argmax_agreement=float(np.mean(np.argmax(logits, axis=1) == np.argmax(reference, axis=1))))


def format_report(result):
    """The demo's printout."""
    lines = [
        f"graph: synthetic {result.graph} ({result.nodes} nodes, {result.edges} edges, power-law degrees), "
        f"Â = D^-1/2 (A + I) D^-1/2",
        f"GCN: {result.features} -> {result.hidden} -> {result.classes}, logits = Â relu(Â X W1) W2, "
        "binary32",
        f"RTL: tiled_gemm (f32, 4x4 array) for X W, aggregation_pipeline ({result.lanes} lanes, weighted) "
        "for Â (XW), both on Verilator; every stage checked bit for bit against "
        "golden.aggregate.gcn_forward",
        "",
        f"{'stage':<24}  {'block':<20}  {'sim cycles':>10}  {'wall s':>7}  {'== golden':>9}  detail",
    ]
    for stage in result.stages:
        lines.append(f"{stage.name:<24}  {stage.block:<20}  {stage.cycles:>10}  {stage.seconds:>7.1f}  "
                     f"{'yes' if stage.bit_exact else 'NO':>9}  {stage.detail}")
    lines += [
        "",
        f"logits vs float64 reference: max |error| {result.max_error:.3e}, max bound {result.max_bound:.3e}: "
        f"{'within the bound everywhere' if result.within_bound else 'OUTSIDE THE BOUND'}",
        f"predicted class (argmax) equal to the float64 reference's on {result.argmax_agreement:.2%} "
        "of the nodes",
        f"result: {'PASS' if result.ok else 'FAIL'}",
    ]
    return "\n".join(lines)
