"""``neartrain demo ...``: demonstrations on the simulated kernels."""

import sys

from .common import Parser, UsageError

__all__ = ["register"]


def _jsonable(value):
    """A demo result's value as JSON: an array of more than 64 elements by its shape, dtype and
    SHA-256 (the report is a summary; the arrays are the golden models' to reproduce)."""
    import hashlib

    import numpy as np

    if isinstance(value, np.ndarray):
        if value.size <= 64:
            return value.tolist()
        return {"shape": list(value.shape), "dtype": str(value.dtype),
                "sha256": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()}
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _run_demo(module, options, banner, passed, as_json=False):
    """Check ``options`` with ``module.check_arguments``, print ``banner``, run ``module.run_demo``
    and print its ``format_report`` (with ``as_json``: the result as JSON, the banner on stderr).

    Returns the exit status: 0 when ``passed(result)``, 1 when not or when a simulation failed
    (its one-line reason printed). Raises UsageError for bad arguments.
    """
    import logging

    from scripts.sim.runner import SimulationError

    try:
        module.check_arguments(**options)
    except ValueError as error:
        raise UsageError(str(error)) from None
    print(banner, flush=True, file=sys.stderr if as_json else sys.stdout)
    logging.disable(logging.INFO)  # cocotb's runner logs every command at INFO
    try:
        result = module.run_demo(**options)
    except SimulationError as failure:
        print(f"neartrain: simulation failed: {failure}", file=sys.stderr)
        return 1
    finally:
        logging.disable(logging.NOTSET)
    if as_json:
        import dataclasses
        import json

        print(json.dumps({"passed": bool(passed(result)), **dataclasses.asdict(result)}, indent=1,
                         default=_jsonable))
    else:
        print(module.format_report(result))
    return 0 if passed(result) else 1


def _demo_command(load, options, banner, passed):
    """The handler of a ``neartrain demo``: ``load()`` (the demo's module, imported when the demo
    runs)'s ``run_demo`` with the keywords ``options`` (``{keyword: argument attribute}``), through
    :func:`_run_demo`."""
    def command(args):
        values = {keyword: getattr(args, attribute) for keyword, attribute in options.items()}
        return _run_demo(load(), values, banner(args), passed, as_json=args.json)

    return command


def _load_train():
    from scripts.demo import train

    return train


def _load_gcn():
    from scripts.demo import gcn

    return gcn


def _load_cluster():
    from scripts.demo import cluster

    return cluster


def _load_cluster_gcn():
    from scripts.demo import cluster_gcn

    return cluster_gcn


def _load_smartssd():
    from scripts.demo import smartssd

    return smartssd


def _load_dpt():
    from scripts.demo import dpt

    return dpt


def _load_allreduce():
    from scripts.demo import allreduce

    return allreduce


def _same_names(*names):
    return {name: name for name in names}


_TRAIN = _demo_command(
    _load_train, {**_same_names("optimizer", "steps", "lanes", "seed", "error_feedback", "compare", "lr"),
              "ratio": "topk"},
    lambda args: "neartrain demo train: simulating the updater kernel (the first run builds it with "
                 "Verilator, minutes; then a few seconds per step at most)",
    lambda result: result.bit_exact)
_GCN = _demo_command(
    _load_gcn, _same_names("graph", "features", "hidden", "lanes", "seed"),
    lambda args: "neartrain demo gcn: simulating tiled_gemm and aggregation_pipeline (the first run "
                 "builds both with Verilator, many minutes; then a minute or two per layer)",
    lambda result: result.ok)
_CLUSTER = _demo_command(
    _load_cluster, {**_same_names("nodes", "graph", "features", "placement", "seed", "speedup"),
                    "replicated": "replicate"},
    lambda args: f"neartrain demo cluster: simulating {args.nodes} FCsN runtime nodes on the RTL "
                 "switch (the first run builds them with Verilator, minutes)",
    lambda result: result.bit_exact and result.within_bound and result.counters_match
    and not result.cycle_problems)
_CLUSTER_GCN = _demo_command(
    _load_cluster_gcn, _same_names("nodes", "graph", "features", "seed"),
    lambda args: f"neartrain demo cluster --layers 2: a two-layer GCN on {args.nodes} simulated FCsN nodes "
                 "with GEMM units (the first run builds them with Verilator, many minutes)",
    lambda result: result.ok)


def _cluster(args):
    """``demo cluster``: the aggregation (``--layers 1``) or the two-layer GCN (``--layers 2``)."""
    if args.layers == 2:
        if args.replicate or args.speedup or args.placement != "next":
            raise UsageError("--layers 2 always replicates B and spawns every task at home: "
                             "--replicate, --speedup and --placement are for --layers 1")
        return _CLUSTER_GCN(args)
    return _CLUSTER(args)


_SMARTSSD = _demo_command(
    _load_smartssd, _same_names("devices", "topk", "backend", "steps", "seed"),
    lambda args: f"neartrain demo smartssd: {args.devices} simulated SmartSSDs, backend {args.backend} (the "
                 "first rtl run builds the kernel with Verilator, minutes; then seconds per step)",
    lambda result: result.bit_exact)


_DPT = _demo_command(
    _load_dpt, _same_names("devices", "partition", "backend", "seed"),
    lambda args: f"neartrain demo dpt: one training step partitioned over {args.devices} simulated smartSSDs "
                 f"and the NPU, backend {args.backend} (the first rtl run builds tiled_gemm with Verilator, "
                 "minutes)",
    lambda result: result.ok)


_ALLREDUCE = _demo_command(
    _load_allreduce, _same_names("leaves", "steps", "hidden", "seed"),
    lambda args: f"neartrain demo allreduce: data-parallel training on {args.leaves} leaves through the "
                 "simulated switch and the GCU with Adam (the first run builds gcu_cluster with Verilator, "
                 "minutes)",
    lambda result: result.ok)


def register(commands):
    """Add ``demo`` and its sub-commands."""
    from scripts.demo.train import DEFAULT_STEPS, MAX_STEPS, OPTIMIZERS

    demo = commands.add_parser("demo", help="demonstrations on the simulated kernels")
    demos = demo.add_subparsers(dest="demo", required=True, parser_class=Parser)
    train = demos.add_parser("train", help="train a NumPy MLP with the RTL updater as its optimizer")
    # Values are checked by scripts.demo.train.check_arguments, whose errors name the allowed range.
    train.add_argument("--optimizer", default="adamw", metavar="|".join(OPTIMIZERS))
    train.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                       help=f"1 to {MAX_STEPS} (default {DEFAULT_STEPS})")
    train.add_argument("--lanes", type=int, default=1, help="updater kernel lanes (default 1)")
    train.add_argument("--seed", type=int, default=1, help="data and initial parameters (default 1)")
    train.add_argument("--lr", type=float, default=None, help="learning rate (default: per optimizer)")
    train.add_argument("--topk", type=float, default=None, metavar="RATIO",
                       help="Top-K gradient compression, kept fraction in (0, 1]")
    train.add_argument("--error-feedback", action="store_true", help="Top-K with error feedback")
    train.add_argument("--compare", action="store_true",
                       help="dense, Top-K (--topk, default 0.01) and Top-K with error feedback side by side")
    train.set_defaults(handler=_TRAIN)
    _register_gcn(demos)
    _register_cluster(demos)
    _register_smartssd(demos)
    _register_dpt(demos)
    _register_allreduce(demos)
    for parser in demos.choices.values():
        parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _register_gcn(demos):
    from scripts.demo.gcn import DEFAULT_FEATURES, DEFAULT_HIDDEN, DEMO_GRAPHS

    gcn = demos.add_parser("gcn", help="a two-layer GCN forward pass on the RTL GEMM and aggregation "
                                       "pipeline")
    # Values are checked by scripts.demo.gcn.check_arguments, whose errors name the allowed range.
    gcn.add_argument("--graph", default="cora", metavar="|".join(DEMO_GRAPHS),
                     help="synthetic graph with this dataset's statistics (default cora)")
    gcn.add_argument("--features", type=int, default=DEFAULT_FEATURES,
                     help=f"input features (default {DEFAULT_FEATURES}; Cora has 1433)")
    gcn.add_argument("--hidden", type=int, default=DEFAULT_HIDDEN,
                     help=f"hidden width (default {DEFAULT_HIDDEN})")
    gcn.add_argument("--lanes", type=int, default=4, help="aggregation pipeline lanes, 1|2|4|8 (default 4)")
    gcn.add_argument("--seed", type=int, default=1, help="graph, features and weights (default 1)")
    gcn.set_defaults(handler=_GCN)


def _register_cluster(demos):
    from golden.runtime.workload import PLACEMENTS
    from scripts.demo.cluster import DEFAULT_FEATURES, GRAPHS, NODE_CHOICES

    cluster = demos.add_parser("cluster", help="a GCN aggregation distributed over N simulated FCsN "
                                               "SmartNIC nodes (runtime and RTL switch), Table 4.1 host API")
    # Values are checked by scripts.demo.cluster.check_arguments, whose errors name the allowed range.
    cluster.add_argument("--nodes", type=int, default=4,
                         help=f"{'|'.join(map(str, NODE_CHOICES))} (default 4)")
    cluster.add_argument("--graph", default="small", metavar="|".join(GRAPHS) + "|FILE.npz",
                         help="synthetic graph (default small), or a square adjacency saved with "
                              "scipy.sparse.save_npz")
    cluster.add_argument("--features", type=int, default=DEFAULT_FEATURES,
                         help=f"float32 words per row, 1..14 (default {DEFAULT_FEATURES})")
    cluster.add_argument("--placement", default="next", metavar="|".join(PLACEMENTS),
                         help="which node spawns a row's tasks (default next: every task crosses the "
                              "network)")
    cluster.add_argument("--seed", type=int, default=1, help="graph and features (default 1)")
    cluster.add_argument("--replicate", action="store_true",
                         help="load all of B into every node before the start (no range fetched)")
    cluster.add_argument("--speedup", action="store_true",
                         help="also run the 1-node cluster on the same job and print the speed-up over it")
    cluster.add_argument("--layers", type=int, default=1, choices=(1, 2),
                         help="1: the aggregation Â B (default); 2: a two-layer GCN forward pass, "
                              "X W1, Â(.), ReLU, . W2, Â(.), with a GEMM unit in every node")
    cluster.set_defaults(handler=_cluster)


def _register_smartssd(demos):
    from scripts.demo.smartssd import DEFAULT_STEPS, MAX_DEVICES, MAX_STEPS

    smartssd = demos.add_parser("smartssd", help="Smart-Infinity: train a torch MLP with AdamW updated on "
                                                 "N simulated SmartSSDs, beside torch AdamW (needs torch)")
    # Values are checked by scripts.demo.smartssd.check_arguments, whose errors name the allowed range.
    smartssd.add_argument("--devices", type=int, default=4, help=f"SmartSSDs, 1 to {MAX_DEVICES} (default 4)")
    smartssd.add_argument("--topk", type=float, default=None, metavar="RATIO",
                          help="Top-K gradient compression with error feedback, kept fraction in (0, 1]")
    smartssd.add_argument("--backend", default="rtl", metavar="rtl|golden",
                          help="Verilated kernels, checked against golden (default), or the golden models")
    smartssd.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                          help=f"1 to {MAX_STEPS} (default {DEFAULT_STEPS})")
    smartssd.add_argument("--seed", type=int, default=1, help="data and initial weights (default 1)")
    smartssd.set_defaults(handler=_SMARTSSD)


def _register_dpt(demos):
    from scripts.demo.dpt import BACKENDS, DEVICE_CHOICES

    dpt = demos.add_parser("dpt", help="DPT: one training step of a small CNN partitioned between simulated "
                                       "smartSSDs (data parallel) and the NPU, GEMMs on the RTL tiled_gemm")
    # Values are checked by scripts.demo.dpt.check_arguments, whose errors name the allowed range.
    dpt.add_argument("--devices", type=int, default=4,
                     help=f"smartSSDs, {'|'.join(map(str, DEVICE_CHOICES))} (default 4)")
    dpt.add_argument("--partition", type=int, default=None, metavar="I",
                     help="layers 0..I-1 on the smartSSDs, 0..3 (default: the index equation 3 picks)")
    dpt.add_argument("--backend", default="rtl", metavar="|".join(BACKENDS),
                     help="rtl: one GEMM of each kind on the Verilated tiled_gemm, checked against the "
                          "golden (default); golden: the golden models only")
    dpt.add_argument("--seed", type=int, default=1, help="data and initial weights (default 1)")
    dpt.set_defaults(handler=_DPT)


def _register_allreduce(demos):
    from scripts.demo.allreduce import (
        DEFAULT_HIDDEN,
        DEFAULT_LEAVES,
        DEFAULT_STEPS,
        HIDDEN_RANGE,
        LEAF_CHOICES,
        MAX_STEPS,
    )

    allreduce = demos.add_parser("allreduce", help="data-parallel training of a NumPy MLP: the leaves' "
                                                   "gradients all-reduced through the simulated switch, Adam "
                                                   "in the GCU, beside torch.optim.Adam (needs torch)")
    # Values are checked by scripts.demo.allreduce.check_arguments, whose errors name the allowed range.
    allreduce.add_argument("--leaves", type=int, default=DEFAULT_LEAVES,
                           help=f"{LEAF_CHOICES[0]} to {LEAF_CHOICES[-1]} (default {DEFAULT_LEAVES})")
    allreduce.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                           help=f"1 to {MAX_STEPS} (default {DEFAULT_STEPS})")
    allreduce.add_argument("--hidden", type=int, default=DEFAULT_HIDDEN,
                           help=f"hidden width, {HIDDEN_RANGE[0]} to {HIDDEN_RANGE[-1]} "
                                f"(default {DEFAULT_HIDDEN})")
    allreduce.add_argument("--seed", type=int, default=1, help="data and initial parameters (default 1)")
    allreduce.set_defaults(handler=_ALLREDUCE)
