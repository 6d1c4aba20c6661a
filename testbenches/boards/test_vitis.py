"""``neartrain vitis``: the generated tree is consistent with the Verilog, the register map and Tcl.

Nothing here can run Vivado, v++ or XRT. What is checked instead, for the Adam updater
kernel (shared and separate ports) and for a small copy kernel built here from
``rtl/bus`` parts:

* ``kernel.xml`` parses; its ports and data widths are the wrapper's AXI ports, its
  arguments' offsets and sizes are the component's register map (computed again here from
  the component, not from the generator's output);
* the wrapper and the Amaranth Verilog go through Yosys ``hierarchy -check`` (every port
  of the wrapper's instance exists on the core), and the port list Yosys reports is the
  one the kernel.xml ports need;
* ``package_kernel.tcl`` runs under a real Tcl interpreter (Python's ``tkinter.Tcl()``,
  Tcl 8.6) with every Vivado command replaced by a recorder: the script is valid Tcl, its
  files exist, and the registers it declares are the register map;
* the ``v++`` link configurations name existing ports and each platform's banks;
* ``host.cpp`` compiles (``g++ -fsyntax-only``) against stand-in XRT headers that declare
  the part of XRT's native C++ API it uses, with XRT's signatures;
* a block that is not kernel-shaped is refused with one line and exit status 2.
"""

import configparser
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from boards.vitis_platforms import VITIS_PLATFORMS
from rtl.bus.axi import AXI4LiteSignature, AXI4Signature
from rtl.bus.axi_burst_reader import AXIBurstReader
from rtl.bus.axi_burst_writer import AXIBurstWriter
from rtl.bus.axi_lite_control import AXILiteControl
from rtl.registry import get_block
from scripts.flow.synth import _yosys_executable
from scripts.vitis import KernelShapeError, describe_kernel, write_kernel_tree


class CopyKernel(wiring.Component):
    """Copies ``beats`` beats from ``source_address`` to ``destination_address`` (a test kernel).

    One burst reader and one burst writer from ``rtl/bus`` behind an :class:`AXILiteControl`;
    ``beats`` must be at least 1.
    """

    def __init__(self, *, data_width=128):
        self._data_width = data_width
        self._registers = {"arguments": "source_address:64,destination_address:64,beats:32",
                           "status": "copies:32"}
        super().__init__({
            "s_axi_control": In(AXI4LiteSignature(address_width=12, data_width=32)),
            "irq": Out(1),
            "m_axi_source": Out(AXI4Signature(address_width=64, data_width=data_width)),
            "m_axi_destination": Out(AXI4Signature(address_width=64, data_width=data_width)),
        })

    def register_map(self):
        control = AXILiteControl(**self._registers)
        control._MustUse__silence = True
        return control.register_map()

    def elaborate(self, platform):
        m = Module()
        m.submodules.control = control = AXILiteControl(**self._registers)
        m.submodules.reader = reader = AXIBurstReader(data_width=self._data_width, max_burst=16)
        m.submodules.writer = writer = AXIBurstWriter(data_width=self._data_width, max_burst=16)
        wiring.connect(m, wiring.flipped(self.s_axi_control), control.s_axi_control)
        wiring.connect(m, reader.m_axi, wiring.flipped(self.m_axi_source))
        wiring.connect(m, writer.m_axi, wiring.flipped(self.m_axi_destination))
        m.d.comb += self.irq.eq(control.irq)
        m.d.comb += [writer.data.valid.eq(reader.data.valid),
                     writer.data.payload.eq(reader.data.payload.data),
                     reader.data.ready.eq(writer.data.ready)]
        running, copies = Signal(), Signal(32)
        m.d.comb += [control.idle.eq(~running), control.status.copies.eq(copies),
                     reader.cmd.payload.address.eq(control.args.source_address),
                     reader.cmd.payload.length.eq(control.args.beats),
                     writer.cmd.payload.address.eq(control.args.destination_address),
                     writer.cmd.payload.length.eq(control.args.beats)]
        with m.If(control.start):
            m.d.sync += [running.eq(1), reader.cmd.valid.eq(1), writer.cmd.valid.eq(1)]
        with m.If(reader.cmd.ready):
            m.d.sync += reader.cmd.valid.eq(0)
        with m.If(writer.cmd.ready):
            m.d.sync += writer.cmd.valid.eq(0)
        finished = running & writer.done & ~writer.cmd.valid
        m.d.comb += [control.done.eq(finished), control.ready.eq(control.start)]
        with m.If(finished):
            m.d.sync += [running.eq(0), copies.eq(copies + 1)]
        return m


_ADAM = {"lanes": 1, "data_width": 64, "chunk_elements": 64, "arithmetic": False}
CASES = {
    "adam-shared": lambda: ("adam_updater", get_block("adam_updater").build({**_ADAM, "ports": "shared"})),
    "adam-separate": lambda: ("adam_updater",
                              get_block("adam_updater").build({**_ADAM, "ports": "separate"})),
    "copy": lambda: ("copy_kernel", CopyKernel()),
    "topk": lambda: ("topk_updater", get_block("topk_updater").build({**_ADAM, "ports": "shared"})),
}


# The part of XRT's native API (xrt/xrt_device.h, xrt_bo.h, xrt_kernel.h) host.cpp uses.
_XRT_STAND_IN = """
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
enum xclBOSyncDirection { XCL_BO_SYNC_BO_TO_DEVICE, XCL_BO_SYNC_BO_FROM_DEVICE };
namespace xrt {
struct uuid {};
using memory_group = uint32_t;
class device { public: explicit device(unsigned int index); uuid load_xclbin(const std::string &path); };
class bo {
  public:
    bo(const device &device, size_t size, memory_group group);
    void write(const void *source);
    void read(void *destination);
    void sync(xclBOSyncDirection direction);
    size_t size() const;
};
class kernel {
  public:
    enum class cu_access_mode : uint8_t { exclusive = 0, shared = 1, none = 2 };
    kernel(const device &device, const uuid &xclbin, const std::string &name, cu_access_mode mode);
    memory_group group_id(int argno) const;
    uint32_t read_register(uint32_t offset) const;
};
class run {
  public:
    explicit run(const kernel &kernel);
    template <typename ArgType> void set_arg(int index, ArgType &&arg);
    void start();
    void wait();
};
}  // namespace xrt
"""


def _check_host_compiles(folder):
    compiler = shutil.which("g++")
    assert compiler, "g++ is a prerequisite of the repository (README)"
    include = folder / "xrt_stand_in" / "xrt"
    include.mkdir(parents=True, exist_ok=True)
    for header in ("xrt_bo.h", "xrt_device.h", "xrt_kernel.h"):
        (include / header).write_text(_XRT_STAND_IN)
    result = subprocess.run([compiler, "-std=c++17", "-Wall", "-Werror", "-fsyntax-only",
                             f"-I{include.parent}", str(folder / "host.cpp")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _yosys_ports(folder, name):
    """The wrapper's ports as Yosys sees them, after ``hierarchy -check`` against the core."""
    script = (f"read_verilog {name}_core.v; read_verilog {name}.v; hierarchy -check -top {name}; "
              f"select {name}; write_json -noscopeinfo -selected ports.json")
    result = subprocess.run([_yosys_executable(), "-q", "-p", script], cwd=folder, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    module = json.loads((folder / "ports.json").read_text())["modules"][name]
    return {port: (info["direction"], len(info["bits"])) for port, info in module["ports"].items()}


class _TclRecorder:
    """A Tcl interpreter in which every Vivado command the script uses only records its call."""

    VIVADO = ("create_project", "add_files", "update_compile_order", "current_fileset", "set_property",
              "get_property", "close_project", "package_xo", "ipx::package_project", "ipx::unload_core",
              "ipx::edit_ip_in_project", "ipx::current_core", "ipx::get_user_parameters",
              "ipx::remove_user_parameter", "ipx::associate_bus_interfaces", "ipx::add_memory_map",
              "ipx::add_address_block", "ipx::add_register", "ipx::add_register_parameter",
              "ipx::get_bus_interfaces", "ipx::create_xgui_files", "ipx::update_checksums",
              "ipx::check_integrity", "ipx::save_core")

    def __init__(self):
        import tkinter

        self.tcl = tkinter.Tcl()
        self.calls = []
        self.tcl.createcommand("_record", self._record)
        self.tcl.eval("namespace eval ipx {}")
        for command in self.VIVADO:
            # Each stub returns a handle naming the call, so `set reg [ipx::add_register ...]`
            # gives later calls something to refer to.
            self.tcl.eval(f"proc {command} args {{ return [_record {command} {{*}}$args] }}")
        # A command outside the list (a typo or an unexpected Vivado call) is an error.
        self.tcl.eval("rename unknown _tcl_unknown")
        self.tcl.eval("proc unknown args { error \"not a stubbed command: $args\" }")

    def _record(self, *words):
        self.calls.append(words)
        return f"handle{len(self.calls)}"

    def source(self, path, argv):
        self.tcl.eval(f"set argv [list {argv}]; set argc 1")
        self.tcl.eval(f"source {{{path}}}")


def _check_tree(folder, component, name):
    folder = folder.resolve()
    description = describe_kernel(component, name)
    registers = component.register_map()

    # kernel.xml parses and agrees with the register map.
    root = ET.parse(folder / "kernel.xml").getroot()
    kernel = root.find("kernel")
    assert kernel.get("name") == name and kernel.get("hwControlProtocol") == "ap_ctrl_hs"
    xml_ports = {p.get("name"): p for p in kernel.find("ports")}
    arguments = {a.get("name"): a for a in kernel.find("args")}
    expected_args = [r for r in registers if r["kind"] == "argument"]
    assert list(arguments) == [r["name"] for r in expected_args]
    for index, entry in enumerate(expected_args):
        arg = arguments[entry["name"]]
        assert int(arg.get("offset"), 16) == entry["offset"], entry
        assert int(arg.get("size"), 16) * 8 == entry["width"], entry
        assert int(arg.get("id")) == index
        assert arg.get("port") in xml_ports
        pointer = arg.get("addressQualifier") == "1"
        assert pointer == (arg.get("port") != "s_axi_control")
        if pointer:
            assert entry["width"] == 64
    # Offsets are 32-bit aligned, distinct, and leave CTRL/GIE/IER/ISR alone.
    offsets = [r["offset"] for r in registers]
    assert offsets == sorted(set(offsets)) and all(o % 4 == 0 for o in offsets)
    assert min(int(a.get("offset"), 16) for a in arguments.values()) >= 0x10

    # The wrapper elaborates against the core, and its ports are what kernel.xml declares.
    ports = _yosys_ports(folder, name)
    assert ports.pop("ap_clk") == ("input", 1) and ports.pop("ap_rst_n") == ("input", 1)
    assert (ports.pop("interrupt", None) is not None) == (kernel.get("interrupt") == "true")
    interfaces = {}
    for port, (direction, width) in ports.items():
        prefix, field = re.fullmatch(r"(s_axi_control|m_axi_[a-z0-9_]+?)_([A-Z]+)", port).groups()
        interfaces.setdefault(prefix, {})[field] = (direction, width)
    assert set(interfaces) == set(xml_ports)
    for port_name, element in xml_ports.items():
        fields = interfaces[port_name]
        data_width = int(element.get("dataWidth"))
        if element.get("mode") == "slave":
            assert fields["AWADDR"] == ("input", (int(element.get("range"), 16) - 1).bit_length())
            assert fields["WDATA"] == ("input", data_width) and fields["RDATA"] == ("output", data_width)
            assert {f.lower() for f in fields} == set(AXI4LiteSignature().members.keys())
        else:
            assert fields["AWADDR"] == ("output", int(element.get("range"), 16).bit_length())
            assert fields["WDATA"] == ("output", data_width) and fields["RDATA"] == ("input", data_width)
            assert fields["WSTRB"] == ("output", data_width // 8)
            assert {f.lower() for f in fields} == set(AXI4Signature().members.keys())
    # Every pointer argument addresses a master that exists.
    for arg in arguments.values():
        if arg.get("addressQualifier") == "1":
            assert xml_ports[arg.get("port")].get("mode") == "master"

    # The TCL runs; the registers it declares are the map; its files exist.
    recorder = _TclRecorder()
    recorder.source(folder / "package_kernel.tcl", f"{folder}/{name}.xo")
    calls = recorder.calls
    declared = [c[2] for c in calls if c[:2] == ("ipx::add_register", "-quiet")]
    assert declared == [r["name"] for r in registers]
    offsets = [int(c[2], 16) for c in calls if c[:2] == ("set_property", "address_offset")]
    assert offsets == [r["offset"] for r in registers]
    added = next(c for c in calls if c[0] == "add_files")[-1].split()
    assert sorted(p.rsplit("/", 1)[-1] for p in added) == sorted([f"{name}.v", f"{name}_core.v"])
    assert all((folder / p.rsplit("/", 1)[-1]).exists() for p in added)
    buses = {c[2] for c in calls if c[0] == "ipx::associate_bus_interfaces"}
    assert buses == set(xml_ports)
    associated = [c[2] for c in calls if c[:2] == ("set_property", "value")]
    assert associated == [a.get("port") for a in arguments.values() if a.get("addressQualifier") == "1"]
    package = next(c for c in calls if c[0] == "package_xo")
    assert package[package.index("-kernel_name") + 1] == name
    assert package[package.index("-xo_path") + 1] == f"{folder}/{name}.xo"
    assert (folder / package[package.index("-kernel_xml") + 1].rsplit("/", 1)[-1]).exists()

    # v++ link configurations: one per platform, ports that exist, the platform's banks.
    for platform in VITIS_PLATFORMS.values():
        config = configparser.ConfigParser(strict=False, allow_no_value=False)
        config.optionxform = str
        text = (folder / f"link_{platform.board}.cfg").read_text()
        # v++ allows keys before the first section (configparser needs one) and repeats sp=.
        config.read_string("[global]\n" + text)
        assert config["global"]["platform"] == platform.platform
        sps = re.findall(r"^sp=(\w+)\.(\w+):(\S+)$", text, re.M)
        assert {port for _, port, _ in sps} == set(description["masters"])
        assert all(unit == f"{name}_1" and bank in platform.banks for unit, _, bank in sps)
        assert config["connectivity"]["nk"] == f"{name}:1:{name}_1"

    # The host program knows every argument, with its id, and compiles.
    host = (folder / "host.cpp").read_text()
    for arg in arguments.values():
        assert f'{{"{arg.get("name")}", {arg.get("id")}, ' in host
    _check_host_compiles(folder)


@pytest.mark.parametrize("case", list(CASES))
def test_vitis_tree(case, tmp_path):
    name, component = CASES[case]()
    write_kernel_tree(component, name=name, output=tmp_path, block_name=name)
    _check_tree(tmp_path, component, name)


def test_vitis_separate_ports_spread_over_banks(tmp_path):
    name, component = CASES["adam-separate"]()
    write_kernel_tree(component, name=name, output=tmp_path)
    text = (tmp_path / "link_alveo-u280.cfg").read_text()
    banks = re.findall(r"^sp=\S+:(\S+)$", text, re.M)
    assert len(banks) == len(component.port_tensors) and len(set(banks)) == len(banks)


def _unused(component):
    component._MustUse__silence = True  # built only to be described
    return component


def test_vitis_refuses_a_block_that_is_not_a_kernel():
    component = _unused(get_block("skid_buffer").build({}))
    with pytest.raises(KernelShapeError, match="not part of an RTL kernel"):
        describe_kernel(component, "skid_buffer")


def test_vitis_cli(tmp_path, capsys):
    from scripts.cli import main

    assert main(["vitis", "skid_buffer", "-o", str(tmp_path / "bad")]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and "not part of an RTL kernel" in error
    assert main(["vitis", "adam_updater", *(f"--set={k}={v}" for k, v in _ADAM.items()),
                 "-o", str(tmp_path / "adam")]) == 0
    _check_tree(tmp_path / "adam", _unused(get_block("adam_updater").build(_ADAM)), "adam_updater")


@pytest.mark.parametrize("file,old,new", [
    ("kernel.xml", 'offset="0x18"', 'offset="0x1c"'),                       # an argument moved
    ("package_kernel.tcl", "address_offset 0x020", "address_offset 0x024"),  # a register moved
    ("copy_kernel.v", "s_axi_control_WDATA", "s_axi_control_WDAT"),          # a port renamed
    ("package_kernel.tcl", "ipx::save_core $core", "ipx::save_cor $core"),   # a typo
    ("package_kernel.tcl", "set core [ipx::current_core]", "set core [ipx::current_core"),  # bad Tcl
])
def test_vitis_check_catches_an_inconsistent_tree(file, old, new, tmp_path):
    """The consistency check fails on a tree that is wrong in one place."""
    name, component = CASES["copy"]()
    write_kernel_tree(component, name=name, output=tmp_path)
    path = tmp_path / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(Exception):  # noqa: B017  (an assertion, a Tcl error or a Yosys failure)
        _check_tree(tmp_path, component, name)
