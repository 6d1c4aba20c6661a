"""``neartrain list``, ``generate`` and ``synth``: the registered blocks, their Verilog and resources.

Every command reads the block registry (:mod:`rtl.registry`), so a newly registered block is
available everywhere without changes here.
"""

import gc
import json
import warnings

from .common import (
    build_component,
    format_resource_table,
    lookup_block,
    package_version,
    parse_sets,
    writable_folder,
)
from .progress import elapsed

__all__ = ["register", "generate_verilog", "block_files", "TESTED_TOGETHER"]


# Blocks tested in another block's file rather than testbenches/<family>/test_<stem>.py, and why.
TESTED_TOGETHER = {
    # The loopback top wires the transmitter into the receiver; every test checks both ends.
    "uart_rx": "testbenches/bus/test_uart.py",
    "uart_tx": "testbenches/bus/test_uart.py",
    # The cluster is the global control unit's testbench: the leaves are cocotb models on its ports.
    "gcu_cluster": "testbenches/collective/test_gcu.py",
    # The regional units are tested between their region switches and the root, in the two-level cluster.
    "region_unit": "testbenches/collective/test_tiered.py",
    "tiered_cluster": "testbenches/collective/test_tiered.py",
    # The ring nodes are tested on their cluster's switch, which is the ring's only topology.
    "ring_node": "testbenches/collective/test_ring.py",
    "ring_cluster": "testbenches/collective/test_ring.py",
}


def block_files(registered):
    """``{name: {"rtl", "golden", "no_golden", "tests"}}``, paths relative to the repository.

    Nothing is searched: the rtl file is the component's module, the golden entry point is the
    one the block registers (``"golden.<module>:<name>"``, or ``None`` with the reason in
    ``no_golden``), and the test is ``testbenches/<family>/test_<rtl file stem>.py`` (or the
    shared file in :data:`TESTED_TOGETHER`).
    """
    import inspect
    import pathlib

    from rtl.registration import NO_GOLDEN

    root = pathlib.Path(__file__).resolve().parents[2]
    files = {}
    for name, block in registered.items():
        rtl = pathlib.Path(inspect.getsourcefile(block.component)).resolve().relative_to(root)
        test = TESTED_TOGETHER.get(name, f"testbenches/{rtl.parts[1]}/test_{rtl.stem}.py")
        none = isinstance(block.golden, NO_GOLDEN)
        files[name] = {"rtl": rtl.as_posix(), "golden": None if none else block.golden,
                       "no_golden": block.golden.reason if none else None, "tests": [test]}
    return files


def command_list(args):
    from rtl.registry import blocks

    registered = blocks()
    files = block_files(registered)
    if args.json:
        print(json.dumps({name: {
            "family": block.family, "summary": block.summary,
            **files[name],
            "params": [{"name": p.name, "type": p.type.__name__, "default": p.default,
                        "range": p.describe_range(), "help": p.help} for p in block.params],
        } for name, block in registered.items()}, indent=1))
        return
    for family in sorted({block.family for block in registered.values()}):
        print(f"[{family}]")
        for name, block in registered.items():
            if block.family != family:
                continue
            print(f"  {name:<22} {block.summary}")
            print(f"      {'rtl':<20} {files[name]['rtl']}")
            print(f"      {'golden':<20} {files[name]['golden'] or 'none: ' + files[name]['no_golden']}")
            print(f"      {'tests':<20} {', '.join(files[name]['tests'])}")
            for p in block.params:
                print(f"      {p.name:<20} {p.type.__name__:<5} default={p.default!s:<8} "
                      f"range={p.describe_range():<16} {p.help}")


# What each kind of port member is, for the manifest (the Amaranth flattening names the port).
_STREAM_ROLES = {
    "valid": "stream valid: the source holds it, and the payload, until the transfer",
    "ready": "stream ready: a transfer happens on a rising clock edge with valid and ready both high",
    "payload": "stream payload: the data, read when valid and ready are both high",
}


def _port_role(component, path, member):
    """A short description of the port at ``path``: a stream handshake member, a bus channel
    signal, or a plain input or status output."""
    from amaranth.lib import stream, wiring

    from rtl.bus.axi import AXI4LiteSignature, AXI4Signature

    outer = component.signature.members[path[0]]
    inner = outer.signature if outer.is_signature else None
    if isinstance(inner, stream.Signature):
        return _STREAM_ROLES[str(path[-1])]
    for kind, label in ((AXI4LiteSignature, "AXI4-Lite"), (AXI4Signature, "AXI4")):
        if isinstance(inner, kind):
            side = "manager" if outer.flow == wiring.Out else "subordinate"
            return f"{label} {side} signal {path[-1]}"
    if inner is not None:
        return f"{type(inner).__name__} member {'.'.join(str(part) for part in path[1:])}"
    return "input (level, sampled every clock)" if member.flow == wiring.In else "output (status or result)"


def _manifest(block, params, component, module):
    from rtl.elaborate import describe_timing, port_members, port_table, source_hash, tool_versions

    # port_table lists clk and rst, then the members of port_members in their order.
    roles = ["clock: every register updates on its rising edge",
             "reset: synchronous, active-high, to the clk domain"]
    roles += [_port_role(component, path, member) for path, member, _ in port_members(component)]
    ports = [{**port, "role": role} for port, role in zip(port_table(component), roles, strict=True)]
    return {
        "block": block.name,
        "family": block.family,
        "top": module,
        "verilog": f"{module}.v",
        "clock": {"port": "clk", "edge": "rising"},
        "reset": {"port": "rst", "synchronous": True, "active": "high"},
        "params": params,
        "ports": ports,
        "timing": describe_timing(component),
        "source_sha256": source_hash(),
        "tools": tool_versions(),
    }


def generate_verilog(name, folder, overrides=None, module=None, fusesoc=False, c_header=False):
    """Write ``<module>.v`` and its JSON manifest ``<module>.json`` into ``folder``; returns the
    Verilog's path.

    ``module`` names the top module (and prefixes the inner ones); by default it is the block's
    name at default parameters, and the name with a short hash of the parameters otherwise
    (:func:`scripts.flow.elaboration.module_name`), so that any set of generated blocks can sit
    in one design. With ``fusesoc``, a FuseSoC core ``<module>.core`` (lint and sim targets for
    Verilator) goes beside them (:mod:`scripts.flow.fusesoc`); with ``c_header``, the register
    map as ``<module>_regs.h`` (:mod:`scripts.flow.c_header`), for a block with an AXI4-Lite
    control block.
    """
    from amaranth.hdl import UnusedElaboratable

    from scripts.flow.elaboration import check_module_name, module_name, registered_verilog, rename_top

    from .common import UsageError

    block = lookup_block(name)
    overrides = dict(overrides or {})
    if module is not None:
        try:
            check_module_name(module)
        except ValueError as error:
            raise UsageError(f"--name: {error}") from None
    component = build_component(block, overrides)
    if c_header and not callable(getattr(component, "register_map", None)):
        raise UsageError(f"--c-header: {block.name} has no AXI4-Lite control block, so no register map")
    folder = writable_folder(folder)
    params = block.resolve(overrides)
    module = module or module_name(block.name, params, block.resolve())
    text = rename_top(registered_verilog(block.name, params, lambda built=component: built), module)
    verilog_path = folder / f"{module}.v"
    verilog_path.write_text(text)
    manifest = _manifest(block, params, component, module)
    (folder / f"{module}.json").write_text(json.dumps(manifest, indent=1) + "\n")
    if fusesoc:
        from scripts.flow.fusesoc import write_core

        write_core(folder, module, block, package_version())
    if c_header:
        from scripts.flow.c_header import c_header as header_text

        command = f"neartrain generate {block.name}" + "".join(f" --set {k}={v}"
                                                               for k, v in overrides.items())
        (folder / f"{module}_regs.h").write_text(header_text(module, block.name, component.register_map(),
                                                             command + " --c-header"))
    # With the Verilog from the cache, the component (built for its ports) is never elaborated.
    # A component in a reference cycle outlives `del`: collect it here, under the filter, or its
    # sub-blocks warn later from wherever the collector happens to run.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        del component
        gc.collect()
    return verilog_path


def command_generate(args):
    block = lookup_block(args.block)
    from scripts.flow.cache import BUILD

    verilog_path = generate_verilog(args.block, args.output or BUILD / "verilog", parse_sets(block, args.set),
                                    module=args.name, fusesoc=args.fusesoc, c_header=args.c_header)
    print(f"{verilog_path}\n{verilog_path.with_suffix('.json')}")
    if args.fusesoc:
        print(verilog_path.with_suffix(".core"))
    if args.c_header:
        print(verilog_path.with_name(f"{verilog_path.stem}_regs.h"))


def command_synth(args):
    from scripts.flow.synth import SynthesisError, synthesize

    from .common import UsageError

    block = lookup_block(args.block)
    overrides = parse_sets(block, args.set)
    component = build_component(block, overrides)
    try:
        with elapsed(f"synth {block.name} ({args.target}, Yosys)"):
            resources = synthesize(component, args.target, use_cache=not args.no_cache)
    except SynthesisError as error:
        raise UsageError(str(error)) from None
    params = block.resolve(overrides)
    if args.json:
        print(json.dumps({"block": block.name, "target": args.target, "params": params,
                          "resources": resources}, indent=1))
        return
    label = block.name + "".join(f" {k}={v}" for k, v in overrides.items())
    print(format_resource_table([(label, resources)], args.target))


def register(commands):
    """Add ``list``, ``generate`` and ``synth``."""
    from boards.targets import TARGETS

    listing = commands.add_parser("list", help="show the registered blocks and their parameters")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=command_list)

    generate = commands.add_parser("generate", help="write Verilog and a JSON manifest")
    generate.add_argument("block")
    generate.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a block parameter")
    generate.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/verilog)")
    generate.add_argument("--name", metavar="MODULE",
                          help="the top module's name (default: the block's, with a parameter hash "
                               "when parameters are set)")
    generate.add_argument("--fusesoc", action="store_true",
                          help="also write a FuseSoC core (CAPI2) with Verilator lint and sim targets")
    generate.add_argument("--c-header", action="store_true",
                          help="also write the AXI4-Lite register map as a C header (<module>_regs.h)")
    generate.set_defaults(handler=command_generate)

    synth = commands.add_parser("synth", help="print a resource table from Yosys")
    synth.add_argument("block")
    synth.add_argument("--target", required=True, choices=TARGETS)
    synth.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a block parameter")
    synth.add_argument("--json", action="store_true", help="machine-readable output")
    synth.add_argument("--no-cache", action="store_true", help="synthesise again even if cached")
    synth.set_defaults(handler=command_synth)
