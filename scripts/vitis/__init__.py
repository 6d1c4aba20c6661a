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

The text files are Jinja2 templates in ``scripts/vitis/templates/``; ``kernel.xml`` is built
with ElementTree.
"""

import json
import pathlib
import xml.etree.ElementTree as ET

import jinja2
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
# The text files are Jinja2 templates in templates/; kernel.xml is built as XML.
_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(pathlib.Path(__file__).resolve().parent / "templates"),
    keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
    autoescape=False)


def _tcl_word(text):
    """``text`` as one brace-quoted Tcl word (register descriptions have no braces)."""
    if "{" in text or "}" in text or "\\" in text:
        raise ValueError(f"cannot brace-quote {text!r} for Tcl")
    return "{" + text + "}"


_TEMPLATES.filters["tcl_word"] = _tcl_word


def _render(template, description, **extra):
    return _TEMPLATES.get_template(template).render(**description, vendor=VENDOR, library=LIBRARY, **extra)


def wrapper_verilog(description):
    """The Vitis-facing Verilog module around ``<kernel>_core``."""
    return _render("wrapper.v.j2", description)


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


def package_tcl(description, verilog_files):
    """The Vivado batch script that packages the IP and calls ``package_xo``."""
    pointer_ports = {a["name"]: a["port"] for a in description["arguments"] if a["pointer"]}
    return _render("package_kernel.tcl.j2", description, verilog_files=verilog_files,
                   pointer_ports=pointer_ports)


def link_config(description, platform, compute_units=1):
    """A ``v++ -l`` configuration: the platform, compute units and memory banks."""
    return _render("link.cfg.j2", description, platform=platform, compute_units=compute_units)


def host_cpp(description):
    """A short XRT host program that runs the kernel once."""
    status = [entry for entry in description["registers"] if entry["kind"] == "status"]
    return _render("host.cpp.j2", description, status=status)


def readme(description, block_name, params, platforms):
    return _render("README.md.j2", description, block_name=block_name, platforms=list(platforms),
                   params_json=json.dumps(params, sort_keys=True))


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
