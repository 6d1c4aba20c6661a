"""``neartrain vitis BLOCK -o DIR``: package a kernel-shaped block as a Vitis RTL kernel source tree.

A block is kernel-shaped when its ports are exactly: one AXI4-Lite slave ``s_axi_control``
(:class:`rtl.bus.axi.AXI4LiteSignature`, flipped), any number of AXI4 masters
``m_axi_<name>`` (:class:`rtl.bus.axi.AXI4Signature`), and optionally a one-bit ``irq``;
and it describes its control registers with ``register_map()`` (the format of
:meth:`rtl.bus.axi_lite_control.AXILiteControl.register_map`). Everything written is
derived from the component object and that map: nothing about a particular kernel is
written here.

The tree:

``<kernel>_core.v``
    The Amaranth Verilog, top module ``<kernel>_core`` (ports ``clk``, ``rst``,
    ``s_axi_control__awaddr``, ...).
``<kernel>.v``
    The Vitis-facing wrapper: ``ap_clk``, ``ap_rst_n`` (active low, synchronous),
    ``s_axi_control_AWADDR``-style AXI names that Vivado infers bus interfaces from, and
    ``interrupt``.
``kernel.xml``
    Ports, argument offsets and sizes, ``hwControlProtocol="ap_ctrl_hs"``.
``package_kernel.tcl``
    ``vivado -mode batch -source package_kernel.tcl -tclargs <kernel>.xo``: IP packaging
    with the register map, then ``package_xo``.
``link_<board>.cfg``
    ``v++ -l --config link_<board>.cfg`` for every platform in
    :data:`boards.vitis_platforms.VITIS_PLATFORMS`.
``host.cpp``
    A short XRT native-API host that sets the arguments, runs the kernel once and reads the
    status registers.
``register_map.json``, ``README.md``
    The map as data, and how to build and run.
"""

import json
import pathlib
import xml.etree.ElementTree as ET

from amaranth.hdl import Shape
from amaranth.lib import wiring

__all__ = ["KernelShapeError", "describe_kernel", "write_kernel_tree", "wrapper_port_name"]

VENDOR = "neartrain.org"
LIBRARY = "kernel"
VERSION = "1.0"


class KernelShapeError(ValueError):
    """The component is not an RTL kernel: wrong ports, or no register map."""


def wrapper_port_name(path):
    """Vitis name of a flattened port: ``("m_axi_gmem", "awaddr")`` -> ``m_axi_gmem_AWADDR``."""
    if path == ("irq",):
        return "interrupt"
    if path == ("clk",):
        return "ap_clk"
    if path == ("rst",):
        return "ap_rst_n"
    interface, field = path
    return f"{interface}_{field.upper()}"


def _pointer_port(component, argument, masters):
    """The m_axi port a pointer argument ``<tensor>_address`` addresses."""
    tensor = argument[:-len("_address")]
    # A kernel with several tensors per port says which port carries which tensor.
    port_tensors = getattr(component, "port_tensors", None)
    if isinstance(port_tensors, dict):
        for port, groups in port_tensors.items():
            if any(tensor in group for group in groups) and f"m_axi_{port}" in masters:
                return f"m_axi_{port}"
    if f"m_axi_{tensor}" in masters:
        return f"m_axi_{tensor}"
    if len(masters) == 1:
        return next(iter(masters))
    raise KernelShapeError(f"cannot tell which of {', '.join(masters)} the pointer argument {argument!r} "
                           f"addresses (name a master m_axi_{tensor}, or give the component port_tensors)")


def describe_kernel(component, name):
    """Everything the tree is generated from, as data.

    Returns
    -------
    dict
        ``name``; ``control`` (``address_width``, ``data_width``); ``masters`` (ordered
        ``{port: {address_width, data_width, id_width}}``); ``interrupt`` (bool);
        ``registers`` (the register map); ``arguments`` (kernel.xml arguments: ``id``,
        ``name``, ``offset``, ``size`` in bytes, ``port``, ``pointer``, ``type``);
        ``ports`` (the wrapper's ports: ``name``, ``core`` (the core's port), ``direction``,
        ``width``).
    """
    from rtl.bus.axi import AXI4LiteSignature, AXI4Signature
    from rtl.elaborate import port_table

    if not name.isidentifier():
        raise KernelShapeError(f"kernel name must be a C identifier, not {name!r}")
    control = None
    masters = {}
    interrupt = False
    for member_name, member in component.signature.members.items():
        signature = member.signature if member.is_signature else None
        if (member_name == "s_axi_control" and member.flow == wiring.In
                and isinstance(signature, AXI4LiteSignature)):
            control = {"address_width": signature.address_width, "data_width": signature.data_width}
        elif (member_name.startswith("m_axi_") and member.flow == wiring.Out
              and isinstance(signature, AXI4Signature)):
            masters[member_name] = {"address_width": signature.address_width,
                                    "data_width": signature.data_width, "id_width": signature.id_width}
        elif (member_name == "irq" and member.is_port and member.flow == wiring.Out
              and Shape.cast(member.shape).width == 1):
            interrupt = True
        else:
            raise KernelShapeError(f"port {member_name!r} is not part of an RTL kernel (allowed: an "
                                   f"AXI4-Lite slave s_axi_control, AXI4 masters m_axi_<name>, "
                                   f"a one-bit irq)")
    if control is None:
        raise KernelShapeError("a kernel needs an AXI4-Lite slave port s_axi_control")
    if not masters:
        raise KernelShapeError("a kernel needs at least one AXI4 master port m_axi_<name>")
    if not callable(getattr(component, "register_map", None)):
        raise KernelShapeError(f"{type(component).__name__} has no register_map(); the control registers "
                               f"cannot be described")
    registers = component.register_map()

    arguments = []
    for entry in registers:
        if entry["kind"] != "argument":
            continue
        pointer = entry["width"] == 64 and entry["name"].endswith("_address")
        port = _pointer_port(component, entry["name"], masters) if pointer else "s_axi_control"
        size = entry["width"] // 8
        arguments.append({
            "id": len(arguments), "name": entry["name"], "offset": entry["offset"], "size": size,
            "port": port, "pointer": pointer,
            "type": "void*" if pointer else {4: "uint", 8: "ulong"}[size],
            "description": entry["description"],
        })

    ports = []
    for row in port_table(component):
        path = tuple(row["name"].split("__"))
        ports.append({"name": wrapper_port_name(path), "core": row["name"], "direction": row["direction"],
                      "width": row["width"]})
    return {"name": name, "control": control, "masters": masters, "interrupt": interrupt,
            "registers": registers, "arguments": arguments, "ports": ports}


# ---------------------------------------------------------------------------- files
def wrapper_verilog(description):
    """The Vitis-facing Verilog module around ``<kernel>_core``."""
    name = description["name"]
    lines = [f"// Vitis RTL kernel {name}: generated by `neartrain vitis`; do not edit.",
             f"// Wraps the Amaranth module {name}_core with the port names Vivado infers AXI",
             "// interfaces from, and the active-low reset Vitis provides.",
             "`default_nettype none",
             f"module {name} ("]
    declarations = []
    for port in description["ports"]:
        direction = port["direction"]
        width = f"[{port['width'] - 1}:0] " if port["width"] > 1 else ""
        declarations.append(f"    {direction:<6} wire {width}{port['name']}")
    lines.append(",\n".join(declarations))
    lines.append(");")
    lines.append(f"    {name}_core core (")
    connections = []
    for port in description["ports"]:
        signal = "~ap_rst_n" if port["name"] == "ap_rst_n" else port["name"]
        connections.append(f"        .{port['core']}({signal})")
    lines.append(",\n".join(connections))
    lines.append("    );")
    lines.append("endmodule")
    lines.append("`default_nettype wire")
    return "\n".join(lines) + "\n"


def kernel_xml(description):
    """``kernel.xml`` as text (RTL kernel description, version 1.6 as written by Vitis)."""
    name = description["name"]
    root = ET.Element("root", versionMajor="1", versionMinor="6")
    kernel = ET.SubElement(root, "kernel", name=name, language="ip_c",
                           vlnv=f"{VENDOR}:{LIBRARY}:{name}:{VERSION}", attributes="",
                           preferredWorkGroupSizeMultiple="0", workGroupSize="1",
                           interrupt="true" if description["interrupt"] else "false",
                           hwControlProtocol="ap_ctrl_hs")
    ports = ET.SubElement(kernel, "ports")
    control = description["control"]
    ET.SubElement(ports, "port", name="s_axi_control", mode="slave", range=hex(1 << control["address_width"]),
                  dataWidth=str(control["data_width"]), portType="addressable", base="0x0")
    for port, master in description["masters"].items():
        ET.SubElement(ports, "port", name=port, mode="master", range=hex((1 << master["address_width"]) - 1),
                      dataWidth=str(master["data_width"]), portType="addressable", base="0x0")
    args = ET.SubElement(kernel, "args")
    for argument in description["arguments"]:
        ET.SubElement(args, "arg", name=argument["name"],
                      addressQualifier="1" if argument["pointer"] else "0",
                      id=str(argument["id"]), port=argument["port"], size=hex(argument["size"]),
                      offset=hex(argument["offset"]), type=argument["type"], hostOffset="0x0",
                      hostSize=hex(argument["size"]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _tcl_word(text):
    """``text`` as one brace-quoted Tcl word (register descriptions have no braces)."""
    if "{" in text or "}" in text or "\\" in text:
        raise ValueError(f"cannot brace-quote {text!r} for Tcl")
    return "{" + text + "}"


def package_tcl(description, verilog_files):
    """The Vivado batch script that packages the IP and calls ``package_xo``."""
    name = description["name"]
    out = [
        f"# Package the Vitis RTL kernel {name} into an .xo (generated by `neartrain vitis`).",
        f"#   vivado -mode batch -source package_kernel.tcl -tclargs {name}.xo",
        "set kernel_name " + name,
        "set src_dir [file dirname [file normalize [info script]]]",
        "if {[llength $argv] > 0} {set xo_path [file normalize [lindex $argv 0]]} "
        "else {set xo_path [file join $src_dir ${kernel_name}.xo]}",
        "set build_dir [file join $src_dir _vivado]",
        "set ip_dir [file join $build_dir ip]",
        "file delete -force $build_dir",
        "create_project -force kernel_pack [file join $build_dir project]",
        "add_files -norecurse [list " + " ".join(f"[file join $src_dir {f}]" for f in verilog_files) + "]",
        "set_property top $kernel_name [current_fileset]",
        "update_compile_order -fileset sources_1",
        f"ipx::package_project -root_dir $ip_dir -vendor {VENDOR} -library {LIBRARY} -taxonomy /KernelIP "
        "-import_files -set_current false",
        "ipx::unload_core [file join $ip_dir component.xml]",
        "ipx::edit_ip_in_project -upgrade true -name tmp_edit_project -directory $ip_dir "
        "[file join $ip_dir component.xml]",
        "set core [ipx::current_core]",
        "set_property core_revision 1 $core",
        "foreach up [ipx::get_user_parameters -of_objects $core] {",
        "    ipx::remove_user_parameter [get_property NAME $up] $core",
        "}",
        "# Every AXI interface runs on ap_clk; ap_rst_n is its reset.",
    ]
    for port in ["s_axi_control", *description["masters"]]:
        out.append(f"ipx::associate_bus_interfaces -busif {port} -clock ap_clk $core")
    out += [
        "set mem_map [ipx::add_memory_map -quiet s_axi_control $core]",
        "set addr_block [ipx::add_address_block -quiet reg0 $mem_map]",
        f"set_property range {1 << description['control']['address_width']} $addr_block",
    ]
    for entry in description["registers"]:
        out += [
            f"set reg [ipx::add_register -quiet {entry['name']} $addr_block]",
            f"set_property address_offset 0x{entry['offset']:03x} $reg",
            f"set_property size {entry['width'] if entry['kind'] != 'control' else 32} $reg",
            f"set_property description {_tcl_word(entry['description'])} $reg",
        ]
        argument = next((a for a in description["arguments"] if a["name"] == entry["name"]), None)
        if argument is not None and argument["pointer"]:
            out += ["set busif [ipx::add_register_parameter -quiet ASSOCIATED_BUSIF $reg]",
                    f"set_property value {argument['port']} $busif"]
    out += [
        "set_property slave_memory_map_ref s_axi_control "
        "[ipx::get_bus_interfaces -of_objects $core s_axi_control]",
        "set_property xpm_libraries {XPM_CDC XPM_MEMORY XPM_FIFO} $core",
        "set_property sdx_kernel true $core",
        "set_property sdx_kernel_type rtl $core",
        "set_property supported_families {} $core",
        "set_property auto_family_support_level level_2 $core",
        "ipx::create_xgui_files $core",
        "ipx::update_checksums $core",
        "ipx::check_integrity -kernel $core",
        "ipx::save_core $core",
        "close_project -delete",
        "package_xo -force -xo_path $xo_path -kernel_name $kernel_name -ip_directory $ip_dir "
        "-kernel_xml [file join $src_dir kernel.xml]",
        'puts "wrote $xo_path"',
    ]
    return "\n".join(out) + "\n"


def link_config(description, platform, compute_units=1):
    """A ``v++ -l`` configuration: the platform, compute units and memory banks."""
    name = description["name"]
    lines = [f"# v++ -l -t hw --config link_{platform.board}.cfg {name}.xo -o {name}.xclbin",
             f"# Platform and banks: {platform.source}.",
             f"platform={platform.platform}",
             "",
             "[connectivity]",
             f"nk={name}:{compute_units}:" + ",".join(f"{name}_{i + 1}" for i in range(compute_units))]
    bank = 0
    for unit in range(compute_units):
        for port in description["masters"]:
            # Separate ports go to separate banks when the card has them, so each gets its own bandwidth.
            lines.append(f"sp={name}_{unit + 1}.{port}:{platform.banks[bank % len(platform.banks)]}")
            bank += 1
    return "\n".join(lines) + "\n"


def host_cpp(description):
    """A short XRT host program that runs the kernel once."""
    name = description["name"]
    table = ",\n".join(
        f'    {{"{a["name"]}", {a["id"]}, {str(a["pointer"]).lower()}, {a["size"]}}}'
        for a in description["arguments"])
    status = ",\n".join(f'    {{"{e["name"]}", 0x{e["offset"]:03x}, {e["width"]}}}'
                        for e in description["registers"] if e["kind"] == "status") or '    {"", 0, 0}'
    return f"""\
// Run the Vitis RTL kernel {name} once through XRT's native API (generated by `neartrain vitis`).
//
//   g++ -std=c++17 host.cpp -I$XILINX_XRT/include -L$XILINX_XRT/lib -lxrt_coreutil -pthread -o host
//   ./host {name}.xclbin name=value ... name=@file.bin ... name=+BYTES ...
//
// A scalar argument takes its raw register value (decimal or 0x hex; for the optimizer
// scalars, the binary32 bits from golden.optim.host.scalar_bits). A pointer argument takes
// a file, copied into a device buffer and written back to file.bin.out after the run, or
// +BYTES for a zeroed buffer written back to <name>.out. Arguments not given are 0.
#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

struct Argument {{ const char *name; int id; bool pointer; unsigned size; }};
static const Argument arguments[] = {{
{table}
}};
struct Status {{ const char *name; unsigned offset; unsigned width; }};
static const Status status[] = {{
{status}
}};

int main(int argc, char **argv) {{
    if (argc < 2) {{
        std::fprintf(stderr, "usage: %s {name}.xclbin [name=value|name=@file|name=+bytes ...]\\n", argv[0]);
        return 2;
    }}
    std::map<std::string, std::string> given;
    for (int i = 2; i < argc; ++i) {{
        std::string text(argv[i]);
        auto eq = text.find('=');
        if (eq == std::string::npos) {{
            std::fprintf(stderr, "expected name=value: %s\\n", argv[i]);
            return 2;
        }}
        given[text.substr(0, eq)] = text.substr(eq + 1);
    }}
    xrt::device device(0);
    auto uuid = device.load_xclbin(argv[1]);
    // Exclusive access: the status registers are read with read_register after the run.
    xrt::kernel kernel(device, uuid, "{name}", xrt::kernel::cu_access_mode::exclusive);
    xrt::run run(kernel);
    std::vector<std::pair<xrt::bo, std::string>> buffers;
    for (const auto &a : arguments) {{
        auto it = given.find(a.name);
        std::string value = it == given.end() ? "0" : it->second;
        if (!a.pointer) {{
            uint64_t number = std::stoull(value, nullptr, 0);
            if (a.size == 4) run.set_arg(a.id, static_cast<uint32_t>(number));
            else run.set_arg(a.id, number);
            continue;
        }}
        std::vector<char> bytes;
        std::string out = std::string(a.name) + ".out";
        if (!value.empty() && value[0] == '@') {{
            std::ifstream in(value.substr(1), std::ios::binary);
            bytes.assign(std::istreambuf_iterator<char>(in), {{}});
            out = value.substr(1) + ".out";
        }} else if (!value.empty() && value[0] == '+') {{
            bytes.assign(std::stoull(value.substr(1), nullptr, 0), 0);
        }}
        if (bytes.empty()) bytes.assign(4096, 0);  // a valid address even for an unused pointer
        xrt::bo bo(device, bytes.size(), kernel.group_id(a.id));
        bo.write(bytes.data());
        bo.sync(XCL_BO_SYNC_BO_TO_DEVICE);
        run.set_arg(a.id, bo);
        buffers.emplace_back(bo, out);
    }}
    run.start();
    run.wait();
    for (auto &[bo, out] : buffers) {{
        bo.sync(XCL_BO_SYNC_BO_FROM_DEVICE);
        std::vector<char> bytes(bo.size());
        bo.read(bytes.data());
        std::ofstream(out, std::ios::binary).write(bytes.data(), bytes.size());
    }}
    for (const auto &s : status) {{
        if (s.width == 0) continue;
        uint64_t value = kernel.read_register(s.offset);
        if (s.width > 32) value |= static_cast<uint64_t>(kernel.read_register(s.offset + 4)) << 32;
        std::printf("%-20s 0x%llx\\n", s.name, static_cast<unsigned long long>(value));
    }}
    return 0;
}}
"""


def readme(description, block_name, params, platforms):
    name = description["name"]
    rows = "\n".join(f"| 0x{e['offset']:03x} | {e['name']} | {e['width']} | {e['access']} | "
                     f"{e['description']} |"
                     for e in description["registers"])
    links = "\n".join(f"v++ -l -t hw --config link_{p.board}.cfg {name}.xo -o {name}_{p.board}.xclbin"
                      for p in platforms)
    return f"""# Vitis RTL kernel `{name}`

Generated by `neartrain vitis {block_name}` with parameters `{json.dumps(params, sort_keys=True)}`.

```sh
vivado -mode batch -source package_kernel.tcl -tclargs {name}.xo
{links}
g++ -std=c++17 host.cpp -I$XILINX_XRT/include -L$XILINX_XRT/lib -lxrt_coreutil -pthread -o host
./host {name}_smartssd.xclbin n=1024 param_address=@param.bin ...
```

Ports: `ap_clk`, `ap_rst_n`, `s_axi_control` (AXI4-Lite, {description['control']['address_width']}-bit
addresses), {', '.join(f"`{p}` ({m['data_width']}-bit)" for p, m in description['masters'].items())}
{', `interrupt`' if description['interrupt'] else ''}.

## Register map (`s_axi_control`, byte offsets)

| offset | name | bits | access | meaning |
|---|---|---:|---|---|
{rows}
"""


def write_kernel_tree(component, *, name, output, block_name=None, params=None):
    """Write the whole tree for ``component`` into ``output``; return the paths written."""
    from boards.vitis_platforms import VITIS_PLATFORMS
    from rtl.elaborate import to_verilog

    description = describe_kernel(component, name)
    output = pathlib.Path(output)
    output.mkdir(parents=True, exist_ok=True)
    files = {
        f"{name}_core.v": to_verilog(component, name=f"{name}_core"),
        f"{name}.v": wrapper_verilog(description),
        "kernel.xml": kernel_xml(description),
    }
    files["package_kernel.tcl"] = package_tcl(description, [f"{name}.v", f"{name}_core.v"])
    for platform in VITIS_PLATFORMS.values():
        files[f"link_{platform.board}.cfg"] = link_config(description, platform)
    files["host.cpp"] = host_cpp(description)
    files["register_map.json"] = json.dumps({"kernel": name, "block": block_name, "params": params,
                                             "registers": description["registers"],
                                             "arguments": description["arguments"],
                                             "ports": description["ports"]}, indent=1) + "\n"
    files["README.md"] = readme(description, block_name or name, params or {}, VITIS_PLATFORMS.values())
    written = []
    for filename, text in files.items():
        path = output / filename
        path.write_text(text)
        written.append(path)
    return written
