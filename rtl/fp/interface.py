"""The one interface every floating-point unit shares.

Every unit in :mod:`rtl.fp` is a :class:`wiring.Component` with exactly two ports:

``i`` : ``In(stream.Signature(operand_layout(...)))``
    Operands, named ``a``, ``b`` (and ``c`` for fused multiply-add), each as raw bits
    of the input format, plus an optional ``tag`` of user side-band bits.
``o`` : ``Out(stream.Signature(result_layout(...)))``
    ``result`` as raw bits of the output format, ``flags`` (5 bits, SoftFloat's values:
    inexact 1, underflow 2, overflow 4, divide-by-zero 8, invalid 16) and the ``tag``
    that entered with the operands.

The pipeline is a fixed-latency shift of ``latency`` register stages with one global
advance condition, ``advance = ~o.valid | o.ready``, and ``i.ready = advance``. A new
operation is accepted every cycle (II = 1) whenever the output is not stalled, and a
unit whose ``o.ready`` is tied high has no enable logic at all. This lets the updaters
and arrays chain units stream-to-stream with :func:`wiring.connect`, or run a whole
datapath ungated with a credit-managed output FIFO.
"""

from amaranth.lib import data

__all__ = ["FLAG_INEXACT", "FLAG_UNDERFLOW", "FLAG_OVERFLOW", "FLAG_DIVIDE_BY_ZERO", "FLAG_INVALID",
           "FLAGS_WIDTH", "operand_layout", "result_layout"]

FLAG_INEXACT = 1
FLAG_UNDERFLOW = 2
FLAG_OVERFLOW = 4
FLAG_DIVIDE_BY_ZERO = 8
FLAG_INVALID = 16
FLAGS_WIDTH = 5


def operand_layout(width, operands=("a", "b"), tag_width=0):
    """Payload layout of a unit's ``i`` stream: one ``width``-bit field per operand, then ``tag``."""
    fields = {name: width for name in operands}
    if tag_width:
        fields["tag"] = tag_width
    return data.StructLayout(fields)


def result_layout(width, tag_width=0, result_shape=None):
    """Payload layout of a unit's ``o`` stream: ``result``, ``flags`` and ``tag``.

    ``result_shape`` overrides the ``width``-bit unsigned result, e.g. a 1-bit result
    for comparisons.
    """
    fields = {"result": width if result_shape is None else result_shape, "flags": FLAGS_WIDTH}
    if tag_width:
        fields["tag"] = tag_width
    return data.StructLayout(fields)
