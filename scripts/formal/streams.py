"""The stream rules, written once, and the harness that puts any block inside them.

AXI-Stream style rules, as :mod:`amaranth.lib.stream` states them: once ``valid`` rises it
stays up until the transfer (``valid & ready``), and the payload is stable while ``valid &
~ready``. :func:`stream_rules_harness` wraps a component: every input of it is free
(``AnySeq``), its input streams are *assumed* to keep the rules (a well-behaved producer),
and its output streams are *asserted* to keep them, whatever the consumer's ``ready`` does,
and *covered* stalling (``valid & ~ready``), so that a proof in which an output never stalls
fails instead of passing vacuously.
The streams are enumerated from the component's :class:`wiring.Signature` (members that are
:class:`stream.Signature`, at any depth), so no output stream can be forgotten.
"""

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Const, Cover, Module, ResetSignal, Signal, Value
from amaranth.lib import stream, wiring

from .flow import FormalError

__all__ = ["stream_ports", "drive_free", "stream_rules", "stream_cover", "stream_harness",
           "stream_rules_harness", "transfer_counter", "COVER"]

# The message of an output's cover is "<path>" followed by this; :mod:`.flow` reads the path back.
COVER = ": valid & ~ready"


def _walk(signature, obj, path, flipped):
    for name, member in signature.members.items():
        if not member.is_signature:
            continue
        value = getattr(obj, name) if isinstance(name, str) else obj[name]
        outward = (member.flow == wiring.Out) != flipped
        items = [((f"{name}[{index}]",), item) for index, item in enumerate(value)] \
            if member.dimensions else [((name,), value)]
        for suffix, item in items:
            if isinstance(member.signature, stream.Signature):
                yield ".".join(path + suffix), item, outward
            else:
                yield from _walk(member.signature, item, path + suffix, not outward)


def stream_ports(component):
    """``(inputs, outputs)``: the component's input and output streams, ``{path: interface}``."""
    inputs, outputs = {}, {}
    for path, port, outward in _walk(component.signature, component, (), False):
        (outputs if outward else inputs)[path] = port
    return inputs, outputs


def drive_free(m, component, keep=()):
    """Drive every input signal of ``component`` with a free value (``AnySeq``), except ``keep``.

    ``keep`` holds signals the harness drives itself. Constant members (a stream that is
    ``always_ready``) are left alone.
    """
    kept = {id(Value.cast(signal)) for signal in keep}
    for _path, member, value in component.signature.flatten(component):
        value = Value.cast(value)
        if member.flow == wiring.In and isinstance(value, Signal) and id(value) not in kept:
            m.d.comb += value.eq(AnySeq(len(value)))


def stream_rules(m, port, name, check):
    """State the two rules on ``port`` with ``check`` (``Assert`` for outputs, ``Assume`` for inputs)."""
    payload = Value.cast(port.payload)
    was_stalled = Signal(name=f"{name.replace('.', '_')}_was_stalled")
    was_payload = Signal(len(payload), name=f"{name.replace('.', '_')}_was_payload")
    m.d.sync += [was_stalled.eq(port.valid & ~port.ready), was_payload.eq(payload)]
    with m.If(was_stalled):
        m.d.comb += [check(port.valid, f"{name}: valid held until the transfer"),
                     check(payload == was_payload, f"{name}: payload stable while stalled")]


def stream_cover(m, port, name):
    """``Cover(valid & ~ready)`` on the output ``port``: the cycle after it, its rules are checked.

    A stream rule can only fail in the cycle after a stall, so a bounded proof in which no
    output ever stalls proves nothing; the cover task beside the proof (:mod:`.flow`) shows
    at which step each output first stalls. An ``always_ready`` output cannot stall (its
    rules hold trivially); its cover is ``valid`` alone, so that it is at least seen moving.
    """
    ready = Value.cast(port.ready)
    stalled = port.valid if isinstance(ready, Const) else port.valid & ~ready
    m.d.comb += Cover(stalled, f"{name}{COVER}")


def transfer_counter(m, port, width, name):
    """A ``width``-bit count of the transfers on ``port`` so far (before this cycle's)."""
    count = Signal(width, name=name)
    with m.If(port.valid & port.ready):
        m.d.sync += count.eq(count + 1)
    return count


def stream_harness(component, *, keep=(), cover=False):
    """A module with ``component`` inside: free inputs, the rules assumed on inputs and asserted on outputs.

    Returns ``(m, inputs, outputs)``, the streams by path. ``keep`` holds inputs the caller
    drives itself. With ``cover``, every output stream also carries its :func:`stream_cover`,
    so that a proof of the harness fails when one of them never stalls within its depth.
    """
    inputs, outputs = stream_ports(component)
    m = Module()
    m.submodules.dut = component
    drive_free(m, component, keep)
    m.d.comb += Assume(~ResetSignal("sync"), "no reset after the initial state")
    for path, port in inputs.items():
        stream_rules(m, port, path, Assume)
    for path, port in outputs.items():
        stream_rules(m, port, path, Assert)
        if cover:
            stream_cover(m, port, path)
    return m, inputs, outputs


def stream_rules_harness(component, *, environment=None, keep=()):
    """A harness checking the stream rules on every output stream of ``component``.

    Every output stream also carries its :func:`stream_cover`: :func:`.flow.run_proof` runs
    a cover task beside the proof and fails it unless each output stalls within the bound.

    Parameters
    ----------
    component : wiring.Component
    environment : callable, optional
        ``environment(m, component)`` adds the assumptions the block documents about its
        other inputs (for example: no ``start`` while a run flows).
    keep : iterable of signals
        Inputs that ``environment`` drives itself.

    Raises
    ------
    FormalError
        When the component has no output stream: its rules would be proved vacuously.
    """
    if not stream_ports(component)[1]:
        raise FormalError(f"{type(component).__name__} has no output stream to check")
    m, _inputs, _outputs = stream_harness(component, keep=keep, cover=True)
    if environment is not None:
        environment(m, component)
    return m
