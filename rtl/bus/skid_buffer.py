"""A stream pipeline register whose ready path is registered too."""

from amaranth.hdl import Module, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import NO_DROPS, NO_GOLDEN, Param, Parameterized, register_block

__all__ = ["SkidBuffer"]


class SkidBuffer(Parameterized, wiring.Component):
    """Stream pipeline register with a registered ``ready`` (a two-entry skid buffer).

    Every output of the block (``o.valid``, ``o.payload`` and ``i.ready``) comes straight
    from a flip-flop, so it breaks both the forward data path and the backward ready path
    between two blocks. When the output stalls, the one transfer already accepted on the
    input is parked in the skid register instead of being dropped.

    Parameters
    ----------
    width : int
        Payload width in bits, 1 to 4096. Ignored when ``payload_shape`` is given.
    payload_shape : ShapeLike, optional
        Payload shape (for example a ``data.StructLayout``) for use from other blocks.

    Attributes
    ----------
    i : In(stream.Signature(payload))
        Input stream.
    o : Out(stream.Signature(payload))
        Output stream, in the same order, nothing lost or duplicated.

    Notes
    -----
    Latency: 1 cycle. Throughput: 1 transfer per cycle when the output never stalls.
    """

    PARAMS = (
        Param("width", int, 32, "payload width in bits", minimum=1, maximum=4096),
    )

    def __init__(self, *, width=32, payload_shape=None):
        if payload_shape is None:
            payload_shape = width
        self._payload_shape = payload_shape
        super().__init__({
            "i": In(stream.Signature(payload_shape)),
            "o": Out(stream.Signature(payload_shape)),
        })

    latency = 1
    throughput = 1

    def elaborate(self, platform):
        m = Module()

        skid_payload = Signal(Shape.cast(self._payload_shape))
        skid_valid = Signal()

        # Input is accepted whenever the skid register is empty, so `i.ready` is a register.
        m.d.comb += self.i.ready.eq(~skid_valid)
        output_free = ~self.o.valid | self.o.ready

        with m.If(output_free):
            with m.If(skid_valid):
                m.d.sync += [
                    self.o.payload.eq(skid_payload),
                    self.o.valid.eq(1),
                    skid_valid.eq(0),
                ]
            with m.Else():
                m.d.sync += [
                    self.o.payload.eq(self.i.payload),
                    self.o.valid.eq(self.i.valid),
                ]
        with m.Elif(self.i.valid & self.i.ready):
            m.d.sync += [
                skid_payload.eq(self.i.payload),
                skid_valid.eq(1),
            ]
        return m


register_block(
    "skid_buffer", SkidBuffer, family="bus",
    summary="Stream pipeline register with registered valid, payload and ready.",
    golden=NO_GOLDEN("plumbing: a pipeline register, the output stream is the input stream"),
    drops=NO_DROPS,
)
