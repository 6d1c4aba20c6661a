"""The project's layering, read from the code itself (every import, at any depth, by ast).

The rules (README, "Layout"):

* ``rtl/`` imports nothing of the project but ``rtl/``;
* ``golden/`` imports nothing of the project but ``golden/``;
* ``boards/`` imports neither ``scripts/`` nor ``testbenches/``;
* ``scripts/`` never imports ``testbenches/``;
* no project code is imported through ``importlib`` or ``__import__``, where an import graph
  cannot see it (a call that loads third-party code named by data, such as an
  ``amaranth_boards`` platform class, says so on its line: ``# imports: third-party only``);
* no two project modules import each other, directly or around a loop.

Inside the folders (the architecture rules of issue 35):

* tests import no other test module, no bench and no demo: what tests share lives in the
  family's ``tb.py`` or another module of the family that is neither a test nor a bench, in
  ``golden/`` or in ``scripts/sim/`` (a host driver in ``scripts/sim/devices/``); no module of
  ``testbenches/`` imports a test module, and a module that tests import (``tb.py`` and the like)
  imports no bench and no demo either (benches may share a bench module, such as
  ``bench_systolic_common``);
* an ``rtl/`` family imports another family's module only to compose a block out of it
  (:data:`COMPOSITIONS`); generic pieces come from ``rtl/lib``, ``rtl/net``, ``rtl/bus`` and
  ``rtl/fp`` (:data:`GENERIC`), which import no family;
* the top of ``scripts/`` holds no module but ``__init__.py`` and ``install_verilator.py``: the
  CLI, the flows, the simulation library, the demos, the proofs and Vitis each have a folder;
* a bench names no test module in a string (``run_cocotb(block, "testbenches.<family>.test_<x>", ...)``:
  an arrow from the bench to the test that the import graph cannot see); it measures through a
  host device's ``run_*`` (:func:`scripts.sim.devices.run_session`).

``python -m testbenches.test_layering`` prints the graph's arrows between folders.
"""

import ast
import collections
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("rtl", "golden", "boards", "scripts", "testbenches")
FORBIDDEN = {
    "rtl": {"golden", "boards", "scripts", "testbenches"},
    "golden": {"rtl", "boards", "scripts", "testbenches"},
    "boards": {"scripts", "testbenches"},
    "scripts": {"testbenches"},
    "testbenches": set(),
}


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _resolve(module, path, node):
    """The absolute module names an ``import``/``from`` node names (relative ones resolved)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".")
        if path.name != "__init__.py":
            base = base[:-1]
        base = base[:len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module
    # `from package import module` imports that module (and runs the package's __init__, which
    # is not an import *by* this module); `from module import name` imports the module.
    return [f"{prefix}.{alias.name}" for alias in node.names]


THIRD_PARTY_ONLY = "# imports: third-party only"


def _dynamic_imports(tree, source_lines):
    """Calls of ``importlib.import_module``/``__import__``, with the line of each."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            function = node.func
            name = (function.attr if isinstance(function, ast.Attribute)
                    else function.id if isinstance(function, ast.Name) else None)
            if name in ("import_module", "__import__") and \
                    not source_lines[node.lineno - 1].rstrip().endswith(THIRD_PARTY_ONLY):
                lines.append(node.lineno)
    return lines


def import_graph():
    """``(edges, dynamic)``: module -> set of project modules it imports; dynamic imports by file."""
    modules = _modules()
    edges, dynamic = {}, {}
    for module, path in modules.items():
        text = path.read_text()
        tree = ast.parse(text, filename=str(path))
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name in _resolve(module, path, node):
                    # The longest project module the name denotes: a name defined in a module
                    # counts as an import of that module, a submodule as an import of itself.
                    while name and name not in modules:
                        name = name.rpartition(".")[0]
                    if name and name != module:
                        targets.add(name)
        edges[module] = targets
        if lines := _dynamic_imports(tree, text.splitlines()):
            dynamic[str(path.relative_to(ROOT))] = lines
    return edges, dynamic


def folder_arrows(edges):
    """Counts of imports between top-level folders: ``{(from, to): count}``."""
    arrows = collections.Counter()
    for module, targets in edges.items():
        for target in targets:
            source, sink = module.split(".")[0], target.split(".")[0]
            if source != sink:
                arrows[source, sink] += 1
    return arrows


def cycles(edges):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


@pytest.fixture(scope="module")
def graph():
    return import_graph()


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_against_the_layers(graph, package):
    edges, _ = graph
    wrong = sorted(f"{module} -> {target}" for module, targets in edges.items()
                   if module.split(".")[0] == package for target in targets
                   if target.split(".")[0] in FORBIDDEN[package])
    assert not wrong, f"{package}/ imports what it must not:\n" + "\n".join(wrong)


def test_no_dynamic_import_of_project_code(graph):
    _, dynamic = graph
    assert not dynamic, f"importlib/__import__ calls (hidden imports): {dynamic}"


def test_no_import_loops(graph):
    edges, _ = graph
    loops = cycles(edges)
    assert not loops, "modules that import each other around a loop:\n" + "\n".join(map(str, loops))


# ---- testbenches: tests import no tests, benches or demos ----


def _test_side_kind(module):
    """``"test"``, ``"bench"`` or ``"support"`` for a module of ``testbenches/`` (by its file stem)."""
    stem = module.rpartition(".")[2]
    return "test" if stem.startswith("test_") else "bench" if stem.startswith("bench_") else "support"


def is_demo(module):
    """A demo: a module of ``scripts/demo/``. The host drivers the demos share
    (``scripts.sim.devices``) are no demo."""
    return module == "scripts.demo" or module.startswith("scripts.demo.")


def demo_tested_by(module, target):
    """``testbenches/<family>/test_demo_<name>`` is the test of the demo ``scripts.demo.<name>``: the one
    module that may import it (as a block's test imports its block). Nothing else uses a demo as a library."""
    stem = module.rpartition(".")[2]
    return stem.startswith("test_demo_") and target == "scripts.demo." + stem.removeprefix("test_demo_")


def bad_testbench_imports(edges):
    """``module -> target: why`` for every import of ``testbenches/`` that breaks the test rules."""
    wrong = []
    for module, targets in edges.items():
        if module.split(".")[0] != "testbenches":
            continue
        kind = _test_side_kind(module)
        for target in sorted(targets):
            target_kind = _test_side_kind(target) if target.split(".")[0] == "testbenches" else None
            if target_kind == "test":
                wrong.append(f"{module} -> {target}: a test module is no library")
            elif kind != "bench" and target_kind == "bench":
                wrong.append(f"{module} -> {target}: a {kind} module imports a bench")
            elif kind != "bench" and is_demo(target) and not demo_tested_by(module, target):
                wrong.append(f"{module} -> {target}: a {kind} module imports a demo "
                             f"(use the host drivers of scripts/sim/devices/)")
    return sorted(wrong)


def test_tests_import_no_test_bench_or_demo(graph):
    edges, _ = graph
    wrong = bad_testbench_imports(edges)
    assert not wrong, ("testbenches/ imports what tests must not (move what they share to the family's "
                       "tb.py or another non-test module, golden/ or scripts/sim/):\n" + "\n".join(wrong))


# ---- rtl: a family imports another family only to compose a block out of it ----

# The generic packages every family may import; they import no family themselves.
GENERIC = {"lib", "net", "bus", "fp"}
# Blocks composed out of another family's blocks: (importer, imported module).
COMPOSITIONS = {
    # The runtime attaches the aggregation kernel and feeds it its packets.
    ("rtl.runtime.node_kernels", "rtl.aggregate.aggregation_pipeline"),
    ("rtl.runtime.node_kernels", "rtl.aggregate.packet"),
    # ... and its dense GEMM unit (kernel 1) is the systolic family's tiled GEMM.
    ("rtl.runtime.node_gemm", "rtl.systolic.tiled_gemm"),
    # The aggregation kernel reads and writes memory through the optim kernels' AXI memory port.
    ("rtl.aggregate.aggregation_kernel", "rtl.optim.memory_port"),
    # The GCU's parameter update and the Top-K updaters are the optim updater.
    ("rtl.collective.parameter_update", "rtl.optim.optimizers"),
    ("rtl.collective.parameter_update", "rtl.optim.updater_core"),
    ("rtl.compress.fused_updater_core", "rtl.optim.optimizers"),
    ("rtl.compress.fused_updater_core", "rtl.optim.updater_core"),
    ("rtl.compress.topk_updater", "rtl.optim.optimizers"),
    ("rtl.compress.topk_updater", "rtl.optim.updater_core"),
    ("rtl.compress.topk_updater", "rtl.optim.updater_kernel"),
    # The board demo puts the Adam updater on a board.
    ("rtl.board.adam_demo", "rtl.optim.optimizers"),
    ("rtl.board.adam_demo", "rtl.optim.updater_core"),
}


def rtl_family(module):
    """The folder of ``rtl/`` a module lies in (``"optim"`` for ``rtl.optim.adam``), or None at the top."""
    parts = module.split(".")
    return parts[1] if parts[0] == "rtl" and len(parts) > 1 and (ROOT / "rtl" / parts[1]).is_dir() else None


def sideways_imports(edges):
    """``(importer, imported)`` pairs where an rtl family or generic package imports another family."""
    pairs = set()
    for module, targets in edges.items():
        family = rtl_family(module)
        if family is None:
            continue
        for target in targets:
            other = rtl_family(target)
            if other is not None and other != family and other not in GENERIC:
                pairs.add((module, target))
    return pairs


def test_families_import_each_other_only_to_compose(graph):
    edges, _ = graph
    wrong = sorted(f"{module} -> {target}" for module, target in sideways_imports(edges)
                   if (module, target) not in COMPOSITIONS)
    assert not wrong, ("an rtl family imports another family's module, not to compose a block (take "
                       "generic pieces from rtl/lib, rtl/net, rtl/bus or rtl/fp, or add the block to "
                       "COMPOSITIONS with the reason):\n" + "\n".join(wrong))


def test_the_composition_list_is_current(graph):
    edges, _ = graph
    found = sideways_imports(edges)
    stale = sorted(f"{module} -> {target}" for module, target in COMPOSITIONS
                   if (module, target) not in found)
    assert not stale, "COMPOSITIONS names imports that no longer exist:\n" + "\n".join(stale)


# ---- scripts/: a folder for each room, nothing at the top ----

SCRIPTS_TOP = {"__init__.py", "install_verilator.py"}


def test_scripts_top_holds_no_flow_or_demo_module():
    found = {path.name for path in (ROOT / "scripts").glob("*.py")}
    extra = sorted(found - SCRIPTS_TOP)
    assert not extra, ("modules at the top of scripts/ (a flow goes in scripts/flow/, a demo in "
                       "scripts/demo/, a host driver in scripts/sim/devices/):\n" + "\n".join(extra))


# ---- benches: a simulation is run through a device, never through a test module named in a string ----

TEST_MODULE_IN_A_STRING = re.compile(r"testbenches\.\w+\.test_")


def named_test_modules(source):
    """``(line, text)`` of every string of ``source`` (docstrings aside) that names a test module to
    run, such as ``"testbenches.dlrm.test_embedding_cache"`` or ``f"testbenches.bus.test_{block}"``."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    pieces = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    skipped = docstrings | pieces
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            text = node.value
        else:
            continue
        if TEST_MODULE_IN_A_STRING.search(text):
            found.append((node.lineno, text))
    return sorted(set(found))


def _benches_naming_test_modules():
    return {str(path.relative_to(ROOT)): named_test_modules(path.read_text())
            for path in sorted((ROOT / "testbenches").glob("*/bench_*.py"))}


def test_benches_run_no_test_module():
    wrong = [f"{name}:{line}: {text!r}" for name, found in _benches_naming_test_modules().items()
             for line, text in found]
    assert not wrong, ("a bench runs a test module named in a string (move the measuring session into the "
                       "family's device in scripts/sim/devices/ and call its run_*):\n" + "\n".join(wrong))


def test_the_architecture_checkers_see_a_wrong_import():
    edges = {"testbenches.a.test_x": {"testbenches.a.test_y", "testbenches.a.tb",
                                      "scripts.sim.devices.updater"},
             "testbenches.a.tb": {"testbenches.a.bench_a", "scripts.demo.train"},
             "testbenches.a.bench_a": {"testbenches.a.bench_common", "scripts.demo_gcn"},
             "testbenches.a.bench_b": {"testbenches.a.test_y"}}
    assert bad_testbench_imports(edges) == [
        "testbenches.a.bench_b -> testbenches.a.test_y: a test module is no library",
        "testbenches.a.tb -> scripts.demo.train: a support module imports a demo "
        "(use the host drivers of scripts/sim/devices/)",
        "testbenches.a.tb -> testbenches.a.bench_a: a support module imports a bench",
        "testbenches.a.test_x -> testbenches.a.test_y: a test module is no library"]
    edges = {"rtl.dlrm.x": {"rtl.collective.reduction_table", "rtl.fp.fp_add", "rtl.registration"},
             "rtl.bus.y": {"rtl.optim.updater_core"}, "rtl.registry": {"rtl.optim.updater_core"}}
    assert sideways_imports(edges) == {("rtl.dlrm.x", "rtl.collective.reduction_table"),
                                       ("rtl.bus.y", "rtl.optim.updater_core")}


def test_the_checker_sees_a_loop_and_a_wrong_arrow():
    edges = {"rtl.a": {"golden.b"}, "golden.b": {"golden.c"}, "golden.c": {"golden.b"}}
    assert cycles(edges) == [["golden.b", "golden.c"]]
    assert folder_arrows(edges) == {("rtl", "golden"): 1}


def test_the_bench_checker_sees_a_test_module_in_a_string():
    source = ('"""Runs ``testbenches.a.test_b`` no more."""\n'
              'MODULE = "testbenches.a.test_b"\n'
              'def f(block):\n'
              '    """Not testbenches.a.test_c either."""\n'
              '    run_cocotb(block, f"testbenches.bus.test_{block}")\n'
              '    run_session(block, "stream.throughput")\n')
    assert named_test_modules(source) == [(2, "testbenches.a.test_b"), (5, "testbenches.bus.test_{}")]


if __name__ == "__main__":
    edges, dynamic = import_graph()
    for (source, sink), count in sorted(folder_arrows(edges).items()):
        print(f"{source:>12} -> {sink:<12} {count}")
    print("dynamic imports:", dynamic or "none")
    print("loops:", cycles(edges) or "none")
