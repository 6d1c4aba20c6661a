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

``python -m testbenches.test_layering`` prints the graph's arrows between folders.
"""

import ast
import collections
import pathlib

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


def test_the_checker_sees_a_loop_and_a_wrong_arrow():
    edges = {"rtl.a": {"golden.b"}, "golden.b": {"golden.c"}, "golden.c": {"golden.b"}}
    assert cycles(edges) == [["golden.b", "golden.c"]]
    assert folder_arrows(edges) == {("rtl", "golden"): 1}


if __name__ == "__main__":
    edges, dynamic = import_graph()
    for (source, sink), count in sorted(folder_arrows(edges).items()):
        print(f"{source:>12} -> {sink:<12} {count}")
    print("dynamic imports:", dynamic or "none")
    print("loops:", cycles(edges) or "none")
