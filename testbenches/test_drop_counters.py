"""Every drop is counted: each registered block says where it can discard input, and the host
can read a counter or a sticky error bit for each such place (``docs/runtime.md`` §4, applied to
every family).

A block declares this once, in its registration (``drops=``, see
:attr:`rtl.registration.Block.drops`): a mapping from an output port to what it counts, or
``NO_DROPS`` for a block that discards nothing (every input is back-pressured or used). This
test walks the registry: a block with no declaration fails, and so does a declared port that the
block, built at its defaults, does not have as an output.
"""

from amaranth.lib import wiring

from rtl.registry import blocks


def _output_ports(component):
    return {"__".join(str(part) for part in path)
            for path, member, _ in component.signature.flatten(component) if member.flow == wiring.Out}


def test_every_block_declares_its_drops():
    undeclared = sorted(name for name, block in blocks().items() if block.drops is None)
    assert not undeclared, f"blocks that do not declare where they drop (register_block drops=): {undeclared}"


def test_every_declared_drop_counter_is_an_output_port():
    missing = []
    for name, block in blocks().items():
        if not block.drops:
            continue
        outputs = _output_ports(block.build())
        missing += [f"{name}.{port}" for port in block.drops
                    if port not in outputs and not any(out.startswith(port + "__") for out in outputs)]
    assert not missing, f"declared drop counters that are not output ports: {missing}"


def test_list_the_drop_counters():
    """The table a reviewer reads (``pytest -s``): each block, and what it counts when it discards.
    Every declared port says what it counts."""
    vague = []
    for name, block in sorted(blocks().items()):
        for port, what in (block.drops or {}).items():
            print(f"{name}.{port}: {what}")
            if len(what.split()) < 2:
                vague.append(f"{name}.{port}")
    assert not vague, f"drop ports that do not say what they count: {vague}"
