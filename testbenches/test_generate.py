"""``neartrain generate``: module names that let any set of generated blocks sit in one design,
and a manifest that says how to connect one.

The test a user's first step would be: generate ``skid_buffer``, ``stream_fifo`` and ``fp_add``
(two of them at two parameter sets), instantiate all five in one Verilog top, and lint that top
with Verilator (``-Wall``, the project's waivers) without a warning.
"""

import json
import pathlib
import subprocess
import sys

import pytest

from scripts.cli.main import main
from scripts.sim.verilator import LINT_FLAGS, environment_with_verilator, verilator_executable

# (block, --set assignments): two blocks at two parameter sets each, one at its defaults.
DESIGN = (
    ("skid_buffer", ()),
    ("skid_buffer", ("width=64",)),
    ("stream_fifo", ("depth=32",)),
    ("fp_add", ()),
    ("fp_add", ("fmt=bf16",)),
)


def _generate(folder, block, sets=(), name=None):
    argv = ["generate", block, "-o", str(folder)] + [f"--set={one}" for one in sets]
    argv += ["--name", name] if name else []
    assert main(argv) == 0
    return sorted(folder.glob("*.json"))


def _wrapper(manifests):
    """A Verilog top that instantiates every manifest's module, each port on a top-level port."""
    ports, body = [], []
    for index, manifest in enumerate(manifests):
        connections = []
        for port in manifest["ports"]:
            outer = f"u{index}_{port['name']}"
            width = f"[{port['width'] - 1}:0] " if port["width"] > 1 else ""
            ports.append(f"  {port['direction']} wire {width}{outer}")
            connections.append(f"    .{port['name']}({outer})")
        body.append(f"  {manifest['top']} u{index} (\n" + ",\n".join(connections) + "\n  );")
    return "module user_design (\n" + ",\n".join(ports) + "\n);\n" + "\n".join(body) + "\nendmodule\n"


def test_five_generated_modules_lint_together_in_one_top(tmp_path, capsys):
    for block, sets in DESIGN:
        _generate(tmp_path, block, sets)
    manifests = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("*.json"))]
    modules = sorted(manifest["top"] for manifest in manifests)
    assert len(set(modules)) == len(DESIGN), modules
    assert "skid_buffer" in modules and "fp_add" in modules  # defaults keep the block's own name
    assert "\\fp_add." in (tmp_path / "fp_add.v").read_text()  # an inner module, renamed with its top
    for manifest in manifests:
        text = (tmp_path / manifest["verilog"]).read_text()
        assert f"\nmodule {manifest['top']}(" in text
        assert "module top(" not in text and "\\top." not in text  # inner modules carry the top's name
    (tmp_path / "user_design.v").write_text(_wrapper(manifests))
    sources = [str(tmp_path / "user_design.v")] + [str(tmp_path / m["verilog"]) for m in manifests]
    lint = subprocess.run([verilator_executable(), "--lint-only", *LINT_FLAGS, "--top-module", "user_design",
                           *sources], capture_output=True, text=True, env=environment_with_verilator())
    assert lint.returncode == 0 and "%Warning" not in lint.stderr, lint.stderr


def test_the_manifest_states_clock_reset_and_each_port_role(tmp_path):
    (path,) = _generate(tmp_path, "skid_buffer", ("width=8",))
    manifest = json.loads(path.read_text())
    assert manifest["clock"] == {"port": "clk", "edge": "rising"}
    assert manifest["reset"] == {"port": "rst", "synchronous": True, "active": "high"}
    roles = {port["name"]: port["role"] for port in manifest["ports"]}
    assert roles["i__valid"].startswith("stream valid") and roles["o__ready"].startswith("stream ready")
    assert roles["i__payload"].startswith("stream payload") and "synchronous, active-high" in roles["rst"]
    assert manifest["params"] == {"width": 8} and manifest["top"].startswith("skid_buffer_")


def test_the_parameter_hash_names_the_parameters_not_the_call(tmp_path):
    """Same parameters, same name (set explicitly to the default or left out); others differ."""
    first = _generate(tmp_path / "a", "stream_fifo", ("width=32",))
    second = _generate(tmp_path / "b", "stream_fifo", ())
    third = _generate(tmp_path / "c", "stream_fifo", ("width=33",))
    assert first[0].name == second[0].name == "stream_fifo.json"
    assert third[0].name.startswith("stream_fifo_") and third[0].name != first[0].name


def test_name_sets_the_module_name(tmp_path):
    (path,) = _generate(tmp_path, "skid_buffer", ("width=16",), name="my_slice")
    assert path.name == "my_slice.json"
    assert "\nmodule my_slice(" in (tmp_path / "my_slice.v").read_text()


@pytest.mark.parametrize("name", ["9lives", "has-dash", "a.b", ""])
def test_a_name_that_is_no_verilog_identifier_is_one_line_exit_2(tmp_path, capsys, name):
    assert main(["generate", "skid_buffer", "-o", str(tmp_path), "--name", name]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--name" in err and "Verilog identifier" in err
    assert not list(tmp_path.iterdir())


def test_renaming_gives_the_text_amaranth_writes_with_that_name():
    """The rename of the cached ``top`` text is what Amaranth itself writes under the name."""
    from rtl.elaborate import to_verilog
    from rtl.registry import get_block
    from scripts.flow.elaboration import rename_top

    for block_name in ("skid_buffer", "fp_add"):
        block = get_block(block_name)
        native = to_verilog(block.build(), name="user_name")
        assert rename_top(to_verilog(block.build()), "user_name") == native


def test_the_readme_example_names_the_module_generate_writes():
    """README's instantiation example names the module `generate` gives skid_buffer at width 64."""
    import re

    from rtl.registry import get_block
    from scripts.flow.elaboration import module_name

    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    block = get_block("skid_buffer")
    name = module_name("skid_buffer", block.resolve({"width": 64}), block.resolve())
    shown = set(re.findall(r"skid_buffer_[0-9a-f]{6}", readme))
    assert shown == {name}, f"README shows {shown}, generate writes {name}"


def _fusesoc(tmp_path, module, target):
    """Run FuseSoC's ``target`` of the generated core ``neartrain:blocks:<module>``."""
    import os
    import shutil

    env = environment_with_verilator()
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    # edalize calls `verilator` by name: the one the project installs goes first on the path.
    env["PATH"] = os.pathsep.join([str(pathlib.Path(verilator_executable()).parent), env.get("PATH", "")])
    fusesoc = shutil.which("fusesoc", path=str(pathlib.Path(sys.executable).parent)) or "fusesoc"
    return subprocess.run([fusesoc, "--cores-root", str(tmp_path / "gen"), "run", "--target", target,
                           "--build-root", str(tmp_path / f"build-{target}"), f"neartrain:blocks:{module}"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)


def test_fusesoc_lints_a_generated_core(tmp_path):
    assert main(["generate", "fp_add", "--set", "fmt=bf16", "-o", str(tmp_path / "gen"), "--fusesoc"]) == 0
    (core,) = (tmp_path / "gen").glob("*.core")
    module = core.stem
    assert module.startswith("fp_add_") and (tmp_path / "gen" / f"{module}.v").exists()
    lint = _fusesoc(tmp_path, module, "lint")
    assert lint.returncode == 0, lint.stdout[-3000:] + lint.stderr[-3000:]
    # The lint really ran Verilator on the block: its make file names the lint-only mode and the top.
    (makefile,) = (tmp_path / "build-lint").glob("*/lint-verilator/Makefile")
    assert "lint-only" in makefile.read_text()
    (options,) = (tmp_path / "build-lint").glob("*/lint-verilator/*.vc")
    assert f"--top-module {module}" in options.read_text()


@pytest.mark.slow
def test_fusesoc_sim_target_builds_and_runs_the_model(tmp_path):
    assert main(["generate", "skid_buffer", "-o", str(tmp_path / "gen"), "--fusesoc"]) == 0
    sim = _fusesoc(tmp_path, "skid_buffer", "sim")
    assert sim.returncode == 0 and "Running simulation" in sim.stdout + sim.stderr, sim.stderr[-3000:]


@pytest.mark.parametrize("block, table", [("axi_lite_control", "axi-register-map"),
                                          ("adam_updater", "optim-register-map")])
def test_the_c_header_compiles_and_agrees_with_the_docs_register_map(tmp_path, block, table):
    """Every register of the docs table (docs/data/<table>.json, written by the bench) has its
    offset and width in the header, checked by the C compiler itself."""
    import re

    assert main(["generate", block, "-o", str(tmp_path), "--c-header"]) == 0
    header = tmp_path / f"{block}_regs.h"
    data = pathlib.Path(__file__).parents[1] / "docs" / "data" / f"{table}.json"
    rows = json.loads(data.read_text())["rows"]
    checks = []
    for offset, name, width, *_ in rows:
        macro = f'{block.upper()}_{re.sub(r"[^A-Za-z0-9]+", "_", name).upper()}'
        checks.append(f'static_assert({macro}_OFFSET == {offset}u && {macro}_WIDTH == {width}u, "{name}");')
    ctrl = f"{block.upper()}_CTRL"
    checks.append(f'static_assert({ctrl}_AP_START == 1u && {ctrl}_AUTO_RESTART == 0x80u, "CTRL bits");')
    source = tmp_path / "check.cpp"
    source.write_text(f'#include "{header.name}"\n' + "\n".join(checks) + "\n")
    # g++ is a prerequisite of the project (Verilator builds with it); the header is plain C as well.
    compiled = subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-fsyntax-only", str(source)],
                              capture_output=True, text=True, cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    assert len(checks) == len(rows) + 1 and len(rows) > 5
