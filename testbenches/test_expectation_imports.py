"""No test takes its expectations from ``rtl/``: what a test may import from the design, read from the code.

A test that decodes an output with the RTL's own layout, counter list, error bits or latency
moves with the design: a moved bit or a reordered counter changes the expectation as well and
nothing fails. So tests state those facts themselves, in the test or in ``golden/`` (tables such
as ``golden.fp.latencies``, ``golden.compress.registers``), and exactly one test,
``testbenches/test_design_constants.py``, imports the RTL's constants to hold them equal to the
tables.

The rule, for every ``*.py`` under ``testbenches/`` except that one (tests, their ``tb.py``
helpers and the benches alike), checked on every ``import``/``from`` at any depth (by ``ast``,
the definitions looked up in the ``rtl/`` sources, so nothing of ``rtl/`` is imported here):

* allowed: a **class that builds the design**: a component, a signature, a parameter type (such
  as ``rtl.fp.format.FloatFormat``, to build a unit in a generic format);
* allowed: a **function of** :data:`TOOLS`, which finds, builds or converts a design (the
  registry, ``to_verilog``) or is itself the thing under test with its expected values stated in
  the test (``ecp5_pll_dividers``);
* refused: any **module-level value** (an int, a tuple of counter names, a dict of register
  addresses, a ``StructLayout``, a format instance such as ``F32``), any **other function**
  (a layout builder such as ``errors_layout``), any **enum** and any ``data.Struct``/``data.Union``
  class (their members and fields are an encoding and a layout: a test that writes ``Op.ADD`` or
  compares with ``Status.OVERFLOW`` follows a renumbering, so even enums that only drive stimuli
  are refused; state the codes in a table), any **module** (``import rtl.x`` would let a test read
  any constant as ``x.NAME``), ``import *``, and an upper-case **class attribute** of an imported
  class (``FloatAdder.LATENCY``).

What the rule cannot see: attributes of built instances (``dut.latency``, a signature's members,
a stream payload layout read by ``scripts.sim.stream.stream_layout``) and constants that reach a
test through ``scripts/``. Reviewers still read those.

:data:`PERMITTED` lists the reviewed exceptions, each with its reason; an entry that is no longer
needed fails, so that the list only shrinks.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXEMPT = "testbenches/test_design_constants.py"

#: Functions of ``rtl/`` a test may call: they find, build or convert a design, or are under test.
TOOLS = {
    "rtl.registry.get_block": "looks a registered block up, to build it",
    "rtl.registry.blocks": "lists the registered blocks, to build or check each",
    "rtl.registry.check_int": "validates a wrapper's own parameter as the registry does",
    "rtl.elaborate.to_verilog": "converts a design",
    "rtl.elaborate.port_table": "under test: lists a design's ports (test_valid_only.py states them)",
    "rtl.eval_top.ecp5_pll_dividers": "under test: its expected dividers are stated in test_bitstream.py",
    "rtl.lib.counters.count_events": "under test: builds counters whose counts lib/test_counters.py states",
}

#: Reviewed exceptions: (file, imported name) -> why it states no expectation.
PERMITTED = {
    ("testbenches/formal/test_broken.py", "rtl.bus.axi_burst_planner"):
        "monkeypatched (PAGE_BYTES = 8192) to break the planner on purpose; the proof must fail",
}

def _source(module):
    """``(path, is_package)`` of an ``rtl`` module, or ``(None, False)``."""
    path = ROOT.joinpath(*module.split("."))
    if (path / "__init__.py").exists():
        return path / "__init__.py", True
    if path.with_suffix(".py").exists():
        return path.with_suffix(".py"), False
    return None, False


_TREES = {}


def _tree(path):
    if path not in _TREES:
        _TREES[path] = ast.parse(path.read_text(), filename=str(path))
    return _TREES[path]


def _absolute(module, is_package, node):
    """The module a ``from`` node inside ``module`` names (relative imports resolved)."""
    if not node.level:
        return node.module
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _bound(target, name):
    if isinstance(target, ast.Name):
        return target.id == name
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_bound(element, name) for element in target.elts)
    return False


def definition(module, name, depth=0):
    """What ``name`` is in ``rtl`` module ``module``: ``(kind, node, module)``.

    ``kind`` is ``"module"``, ``"function"``, ``"class"``, ``"value"`` or ``"missing"``; re-exports
    (``from .x import name``) are followed to the definition.
    """
    path, is_package = _source(module)
    if path is None or depth > 8:
        return "missing", None, module
    if is_package and _source(f"{module}.{name}")[0] is not None:
        return "module", None, f"{module}.{name}"
    for node in _tree(path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return "function", node, module
        if isinstance(node, ast.ClassDef) and node.name == name:
            return "class", node, module
        if isinstance(node, ast.Assign) and any(_bound(target, name) for target in node.targets):
            return "value", node, module
        if isinstance(node, ast.AnnAssign) and _bound(node.target, name):
            return "value", node, module
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    source = _absolute(module, is_package, node)
                    if source.split(".")[0] != "rtl":
                        return "value", node, module  # a third-party name re-exported by rtl
                    return definition(source, alias.name, depth + 1)
    return "missing", None, module


def _class_kind(module, node, depth=0):
    """``"enum"``, ``"layout"`` (``data.Struct``/``data.Union``/``data.View``) or ``"class"``."""
    for base in node.bases:
        text = ast.unparse(base)
        last = text.rpartition(".")[2]
        if last.endswith(("Enum", "Flag")):
            return "enum"
        if last in ("Struct", "Union", "View"):
            return "layout"
        if isinstance(base, ast.Name) and depth < 8:
            kind, parent, where = definition(module, base.id)
            if kind == "class":
                inherited = _class_kind(where, parent, depth + 1)
                if inherited != "class":
                    return inherited
    return "class"


def verdict(full_name):
    """``None`` if a test may import ``full_name`` (``rtl.a.b.Name`` or a module), else the reason."""
    if _source(full_name)[0] is not None:
        return "a module of rtl/ (its constants would be read as attributes)"
    module, _, name = full_name.rpartition(".")
    if name == "*":
        return "import * (every constant of the module)"
    kind, node, where = definition(module, name)
    if kind == "module":
        return "a module of rtl/ (its constants would be read as attributes)"
    if kind == "class":
        kind = _class_kind(where, node)
        return {"class": None, "enum": "an enum (its values are an encoding)",
                "layout": "a data.Struct/Union (a layout)"}[kind]
    if kind == "function":
        return None if f"{where}.{name}" in TOOLS or full_name in TOOLS else \
            "a function that is not a tool of TOOLS (it may compute a layout or a latency)"
    if kind == "value":
        return "a module-level value (a constant, table or layout)"
    return "not found in rtl/ sources (cannot be classified)"


def imports_of(path):
    """``[(line, full name, reason)]``: the refused ``rtl`` imports and class-attribute reads of ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found, classes = [], {}
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [(f"{node.module}.{alias.name}", alias.asname or alias.name) for alias in node.names]
        for full_name, local in names:
            if full_name.split(".")[0] != "rtl":
                continue
            reason = verdict(full_name)
            if reason:
                found.append((node.lineno, full_name, reason))
            elif local is not None:
                classes[local] = full_name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in classes \
                and node.attr.isupper():
            name = f"{classes[node.value.id]}.{node.attr}"
            found.append((node.lineno, name, "an upper-case class attribute"))
    return found


def offenders():
    """``{file: [(line, name, reason)]}`` over ``testbenches/``, less :data:`PERMITTED` and ``EXEMPT``."""
    result = {}
    for path in sorted((ROOT / "testbenches").rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        if relative == EXEMPT:
            continue
        found = [entry for entry in imports_of(path) if (relative, entry[1]) not in PERMITTED]
        if found:
            result[relative] = found
    return result


@pytest.fixture(scope="module")
def found():
    return offenders()


def test_no_test_imports_an_expectation_from_rtl(found):
    wrong = [f"{file}:{line}: {name}: {reason}" for file, entries in found.items()
             for line, name, reason in entries]
    assert not wrong, ("tests import expectations from rtl/ (state them in the test or in golden/, and hold "
                       f"the RTL equal to them in {EXEMPT}):\n" + "\n".join(wrong))


def test_permitted_exceptions_are_still_needed():
    unused = [f"{file}: {name}" for file, name in PERMITTED
              if name not in {entry[1] for entry in imports_of(ROOT / file)}]
    assert not unused, "no longer imported: remove from PERMITTED:\n" + "\n".join(unused)


@pytest.mark.parametrize("name, refused", [
    ("rtl.compress.chunk_parser.ChunkParser", False),          # a component
    ("rtl.bus.axi.AXI4Signature", False),                      # a signature
    ("rtl.fp.format.FloatFormat", False),                      # a parameter type
    ("rtl.registry.get_block", False),                         # a tool
    ("rtl.registry.check_int", False),                         # a tool, re-exported by the registry
    ("rtl.compress.chunk_parser.ERROR_NAMES", True),           # a counter list
    ("rtl.compress.chunk_parser.errors_layout", True),         # a layout builder
    ("rtl.optim.updater_kernel.ERROR_READ", True),             # an error bit, re-exported
    ("rtl.fp.format.F32", True),                               # a format instance
    ("rtl.bus.axi.Resp", True),                                # an enum
    ("rtl.net.packet.Header", True),                           # a data.Struct
    ("rtl.fp.format", True),                                   # a module
    ("rtl.fp.nothing_here", True),                             # unknown: refused, not waved through
])
def test_the_rule_classifies(name, refused):
    assert (verdict(name) is not None) == refused, verdict(name)


def test_the_checker_sees_imports_and_class_constants(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import rtl.fp.format as hardware\n"
        "from rtl.fp.fp_add import FloatAdder\n"
        "from rtl.registry import get_block\n"
        "def test_x():\n"
        "    from rtl.compress.chunk_parser import ERROR_NAMES\n"
        "    assert FloatAdder.LATENCY == 6 and get_block and ERROR_NAMES and hardware\n")
    assert [(line, name) for line, name, _ in imports_of(sample)] == [
        (1, "rtl.fp.format"), (5, "rtl.compress.chunk_parser.ERROR_NAMES"),
        (6, "rtl.fp.fp_add.FloatAdder.LATENCY")]


if __name__ == "__main__":
    for file, entries in offenders().items():
        for line, name, reason in entries:
            print(f"{file}:{line}: {name}: {reason}")
