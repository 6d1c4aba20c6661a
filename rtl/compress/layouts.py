"""Payload layouts shared by the compress blocks, and the exact float16 -> float32 widening.

Three streams connect the blocks of this family:

* the **wire stream** (:func:`wire_layout`): ``lanes`` 64-bit words of the wire format of
  :mod:`golden.compress.layout` per beat, ``count`` of them valid (``words[0:count]``), and ``last``
  at the end of the transfer (AXI-Stream TLAST);
* the **scatter stream** (:func:`scatter_layout`): ``lanes`` pair slots per beat, each with its own
  ``valid``, an ``index`` inside the chunk and the raw ``value``; ``last`` ends a chunk and carries
  the chunk's ``length`` in elements. Slot order is pair order (lane 0 first), holes are allowed;
* the **dense stream** (:func:`dense_layout`): ``lanes`` float32 bit patterns per beat, element
  ``n * lanes + m`` of the chunk in lane ``m`` of beat ``n``; ``last`` marks the chunk's final beat.
  This is the f32 gradient lane stream an optimizer updater consumes.
"""

from amaranth.hdl import Cat, Const, Mux
from amaranth.lib import data

from ..fp.shift import count_leading_zeros
from ..registration import Param, check_choice

__all__ = ["VALUE_WIDTHS", "WORD_WIDTH", "value_width", "pair_slot_layout", "scatter_layout", "dense_layout",
           "wire_layout", "feed_wire", "widen_f16", "VALUE_FORMAT_PARAM"]

WORD_WIDTH = 64
VALUE_WIDTHS = {"f32": 32, "f16": 16}
# The pair value format as a block parameter (every block that reads pairs has it).
VALUE_FORMAT_PARAM = Param("value_format", str, "f32", "pair value format", choices=tuple(VALUE_WIDTHS))


def value_width(value_format):
    """Bits of a pair value on the scatter stream: 32 for ``"f32"``, 16 for ``"f16"``."""
    return VALUE_WIDTHS[check_choice("value_format", value_format, tuple(VALUE_WIDTHS))]


def pair_slot_layout(index_width, value_format):
    """One pair slot of the scatter stream: ``valid``, ``index`` (inside the chunk), raw ``value``."""
    return data.StructLayout({"valid": 1, "index": index_width, "value": value_width(value_format)})


def scatter_layout(lanes, index_width, value_format):
    """Scatter-stream beat: ``pairs`` (``lanes`` slots), ``last`` (ends a chunk), chunk ``length``.

    ``length`` (elements, ``index_width + 1`` bits) is read only on ``last`` beats.
    """
    return data.StructLayout({
        "pairs": data.ArrayLayout(pair_slot_layout(index_width, value_format), lanes),
        "last": 1,
        "length": index_width + 1,
    })


def dense_layout(lanes):
    """Dense-stream beat: ``data`` (``lanes`` float32 bit patterns) and ``last`` (end of a chunk)."""
    return data.StructLayout({"data": data.ArrayLayout(32, lanes), "last": 1})


def wire_layout(lanes):
    """Wire-stream beat: ``words`` (``lanes`` 64-bit words), ``count`` valid words, ``last`` (TLAST)."""
    return data.StructLayout({
        "words": data.ArrayLayout(WORD_WIDTH, lanes),
        "count": range(lanes + 1),
        "last": 1,
    })


def feed_wire(m, beats, wire, remaining, empty, lanes, empty_valid):
    """Cut a read of ``remaining`` words, arriving as ``lanes``-word AXI data beats on the stream
    ``beats``, into beats of the wire stream ``wire``: every beat but the final one is full.

    ``remaining`` (words still to send) and ``empty`` (the read has no words: one empty ``last``
    beat, offered while ``empty_valid``, stands for it) are the caller's registers, loaded with a
    new read; a beat taken from ``wire`` counts ``remaining`` down and clears ``empty``.
    """
    final = remaining <= lanes
    payload = wire.payload
    for k in range(lanes):
        m.d.comb += payload.words[k].eq(beats.payload.data[WORD_WIDTH * k:WORD_WIDTH * (k + 1)])
    m.d.comb += [
        wire.valid.eq(Mux(empty, empty_valid, beats.valid)),
        beats.ready.eq(~empty & wire.ready),
        payload.count.eq(Mux(empty, 0, Mux(final, remaining, lanes))),
        payload.last.eq(empty | final),
    ]
    with m.If(wire.valid & wire.ready):
        m.d.sync += [empty.eq(0), remaining.eq(Mux(final, 0, remaining - lanes))]


def widen_f16(bits):
    """Exact float16 -> float32 conversion of raw ``bits`` as a combinational expression.

    Normal numbers are rebiased, subnormals normalised (every float16 subnormal is a normal
    float32), zeros, infinities and NaN payloads kept. NaN payloads do not matter downstream: the
    scatter adds every value to the buffer, and the adder returns the canonical NaN.
    """
    sign, exponent, fraction = bits[15], bits[10:15], bits[0:10]
    # A subnormal's leading one sits ``zeros`` places below bit 9; shifting it out of the 10-bit field
    # leaves the float32 fraction's top bits.
    zeros = count_leading_zeros(fraction)
    subnormal_fraction = (fraction << (zeros + 1))[:10]
    wide_exponent = Mux(exponent == 0x1F, Const(0xFF, 8),
                        Mux(exponent != 0, exponent + (127 - 15),
                            Mux(fraction != 0, (127 - 15) - zeros, 0)))
    wide_fraction = Mux((exponent == 0) & (fraction != 0), subnormal_fraction, fraction)
    return Cat(Const(0, 13), wide_fraction, wide_exponent[:8], sign)
