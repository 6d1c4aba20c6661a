"""`neartrain list` names each block's rtl file, golden entry point and tests, without searching.

The listing derives them: the rtl file from the component's module, the golden entry point from
the registration, the test from ``testbenches/<family>/test_<rtl stem>.py`` (or the shared file of
``TESTED_TOGETHER``). Here each derived path must exist, each golden entry point must import and
resolve, and each test file must actually name its block (as ``run_cocotb("name", ...)``, its class
or its module): so the listing cannot drift from the files.
"""

import json
import pathlib
import re
import sys

# Every module a registration names as its golden entry point, imported here (not by name at run
# time) so that the layering test's import graph sees these arrows.
import golden.aggregate.pipeline  # noqa: F401
import golden.bus.bursts  # noqa: F401
import golden.collective.barrier  # noqa: F401
import golden.collective.delayed_update  # noqa: F401
import golden.collective.reduction  # noqa: F401
import golden.collective.ring  # noqa: F401
import golden.compress.parse  # noqa: F401
import golden.compress.scatter  # noqa: F401
import golden.dlrm.cache  # noqa: F401
import golden.dlrm.reduction  # noqa: F401
import golden.fp.arith  # noqa: F401
import golden.fp.compare  # noqa: F401
import golden.fp.convert  # noqa: F401
import golden.optim.axpby  # noqa: F401
import golden.optim.host  # noqa: F401
import golden.optim.transfers  # noqa: F401
import golden.runtime.kernels  # noqa: F401
import golden.runtime.packet  # noqa: F401
import golden.runtime.protocol  # noqa: F401
import golden.systolic.block_fp  # noqa: F401
import golden.systolic.numerics  # noqa: F401
import golden.systolic.sparse  # noqa: F401
from rtl.registry import blocks
from scripts.cli.blocks import TESTED_TOGETHER, block_files
from scripts.cli.main import main

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_listed_rtl_and_test_file_exists():
    missing = []
    for name, files in block_files(blocks()).items():
        assert files["rtl"].startswith("rtl/"), (name, files["rtl"])
        paths = (files["rtl"], *files["tests"])
        missing += [f"{name}: {path}" for path in paths if not (ROOT / path).is_file()]
    assert not missing, f"listed files that do not exist: {missing}"


def test_each_test_file_names_its_block():
    registered = blocks()
    silent = []
    for name, files in block_files(registered).items():
        component = registered[name].component
        quoted = re.compile(rf"[\"']{re.escape(name)}[\"']|\b{component.__name__}\b|"
                            rf"{re.escape(component.__module__)}\b")
        silent += [f"{name}: {path}" for path in files["tests"]
                   if not quoted.search((ROOT / path).read_text())]
    assert not silent, f"test files that never name their block: {silent}"


def test_golden_entry_points_resolve():
    unresolved, unexplained = [], []
    for name, files in block_files(blocks()).items():
        if files["golden"] is None:
            if not (files["no_golden"] or "").strip():
                unexplained.append(name)
            continue
        module, _, attribute = files["golden"].partition(":")
        if module not in sys.modules:
            unresolved.append(f"{name}: {module} is not a golden module (or not imported at the top here)")
            continue
        if not callable(getattr(sys.modules[module], attribute, None)):
            unresolved.append(f"{name}: {files['golden']}")
    assert not unresolved, f"golden entry points that do not resolve to a callable: {unresolved}"
    assert not unexplained, f"blocks with no golden model and no reason: {unexplained}"


def test_shared_test_files_are_only_for_blocks_without_their_own():
    """A block listed in TESTED_TOGETHER has no test file of its own by the convention."""
    files = block_files(blocks())
    for name in TESTED_TOGETHER:
        rtl = pathlib.PurePosixPath(files[name]["rtl"])
        own = ROOT / "testbenches" / rtl.parts[1] / f"test_{rtl.stem}.py"
        assert not own.exists(), f"{name} has {own.relative_to(ROOT)}: drop it from TESTED_TOGETHER"


def test_list_prints_the_files(capsys):
    assert main(["list", "--json"]) in (0, None)
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) == len(blocks())
    assert listed["skid_buffer"]["rtl"] == "rtl/bus/skid_buffer.py"
    assert listed["skid_buffer"]["tests"] == ["testbenches/bus/test_skid_buffer.py"]
    assert listed["skid_buffer"]["golden"] is None and listed["skid_buffer"]["no_golden"]
    assert listed["fp_add"]["golden"] == "golden.fp.arith:add"
    assert listed["fp_add"]["tests"] == ["testbenches/fp/test_fp_add.py"]


# A block's name is its rtl file's stem, so that a name leads to its file and its test. Two families
# name every block with a prefix that the file leaves out (rtl/runtime/classifier.py registers
# ``runtime_classifier``; the network's switch and interface kept the runtime's prefix when they
# moved to rtl/net), and one component is registered once per optimizer.
FAMILY_PREFIX = {"runtime": "runtime_", "net": "runtime_", "compress": "topk_"}
VARIANTS = {"adam_updater": "updater_kernel", "sgd_updater": "updater_kernel",
            "adagrad_updater": "updater_kernel"}


def test_block_names_are_their_file_stems():
    wrong = []
    for name, files in block_files(blocks()).items():
        rtl = pathlib.PurePosixPath(files["rtl"])
        family, stem = rtl.parts[1], rtl.stem
        if VARIANTS.get(name, name) not in (stem, FAMILY_PREFIX.get(family, "") + stem):
            wrong.append(f"{name}: {rtl}")
    assert not wrong, "blocks whose name is not their file's stem:\n" + "\n".join(wrong)
