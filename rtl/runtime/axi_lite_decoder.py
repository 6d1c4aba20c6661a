"""One AXI4-Lite host port fanned out to N register files by the high address bits."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4LiteSignature, Resp
from ..registration import NO_GOLDEN, Param, Parameterized, register_block

__all__ = ["AXILiteDecoder"]


class AXILiteDecoder(Parameterized, wiring.Component):
    """Routes AXI4-Lite transactions to ``ports`` subordinates of ``2**address_width`` bytes each.

    Subordinate *i* answers addresses ``i << address_width`` to ``((i + 1) << address_width) - 1``
    (the host address has ``address_width + ceil(log2(ports))`` bits; addresses past the last port,
    when ``ports`` is not a power of two, belong to no one: a read returns 0 and a write is
    discarded, each answered DECERR, so the host sees the error). One write and one read are
    in flight at a time.

    Parameters
    ----------
    ports : int
        Subordinates, 1 to 64.
    address_width : int
        Byte address width of each subordinate, 4 to 24.

    Attributes
    ----------
    s_axi : In(AXI4LiteSignature(address_width + select bits, 32))
    m<i>_axi : Out(AXI4LiteSignature(address_width, 32))
    """

    PARAMS = (
        Param("ports", int, 4, "subordinate ports", minimum=1, maximum=64),
        Param("address_width", int, 12, "byte address width per port", minimum=4, maximum=24),
    )

    def __init__(self, *, ports=4, address_width=12):
        self._select_bits = max(1, (ports - 1).bit_length())
        host_width = address_width + self._select_bits
        members = {"s_axi": In(AXI4LiteSignature(address_width=host_width, data_width=32))}
        members.update({f"m{port}_axi": Out(AXI4LiteSignature(address_width=address_width, data_width=32))
                        for port in range(ports)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axi
        low = self._address_width
        targets = [getattr(self, f"m{port}_axi") for port in range(self._ports)]

        # Writes: hold AW and W, forward both to the selected port, return its B.
        names = ("aw_held", "w_held", "aw_sent", "w_sent", "waiting_b")
        aw_held, w_held, aw_sent, w_sent, waiting_b = (Signal(name=name) for name in names)
        aw_addr = Signal(len(bus.awaddr))
        w_data, w_strb = Signal(32), Signal(4)
        # A new write is taken only once the previous one has been answered.
        idle_b = ~waiting_b & ~bus.bvalid
        m.d.comb += [bus.awready.eq(~aw_held & idle_b), bus.wready.eq(~w_held & idle_b)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_held.eq(1), aw_addr.eq(bus.awaddr)]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_held.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]
        forwarding = aw_held & w_held & ~waiting_b & ~bus.bvalid
        write_select = aw_addr[low:]
        any_write_target = Signal()
        for port, target in enumerate(targets):
            chosen = write_select == port
            m.d.comb += [
                target.awaddr.eq(aw_addr[:low]), target.wdata.eq(w_data), target.wstrb.eq(w_strb),
                target.awvalid.eq(forwarding & chosen & ~aw_sent),
                target.wvalid.eq(forwarding & chosen & ~w_sent),
                target.bready.eq(waiting_b & chosen),
            ]
            with m.If(chosen):
                m.d.comb += any_write_target.eq(1)
                with m.If(target.awvalid & target.awready):
                    m.d.sync += aw_sent.eq(1)
                with m.If(target.wvalid & target.wready):
                    m.d.sync += w_sent.eq(1)
                with m.If(target.bvalid & target.bready):
                    m.d.sync += [waiting_b.eq(0), bus.bvalid.eq(1), bus.bresp.eq(target.bresp)]
        with m.If(forwarding & (~any_write_target | (aw_sent & w_sent))):
            m.d.sync += [aw_held.eq(0), w_held.eq(0), aw_sent.eq(0), w_sent.eq(0)]
            with m.If(any_write_target):
                m.d.sync += waiting_b.eq(1)
            with m.Else():
                m.d.sync += [bus.bvalid.eq(1), bus.bresp.eq(Resp.DECERR)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)

        # Reads: hold AR, forward it, return the R.
        ar_held, ar_sent = Signal(), Signal()
        ar_addr = Signal(len(bus.araddr))
        m.d.comb += bus.arready.eq(~ar_held & ~bus.rvalid)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [ar_held.eq(1), ar_addr.eq(bus.araddr), ar_sent.eq(0)]
        read_select = ar_addr[low:]
        any_read_target = Signal()
        for port, target in enumerate(targets):
            chosen = read_select == port
            m.d.comb += [
                target.araddr.eq(ar_addr[:low]),
                target.arvalid.eq(ar_held & chosen & ~ar_sent),
                target.rready.eq(ar_held & chosen & ar_sent),
            ]
            with m.If(chosen):
                m.d.comb += any_read_target.eq(1)
                with m.If(target.arvalid & target.arready):
                    m.d.sync += ar_sent.eq(1)
                with m.If(target.rvalid & target.rready):
                    m.d.sync += [ar_held.eq(0), bus.rvalid.eq(1), bus.rdata.eq(target.rdata),
                                 bus.rresp.eq(target.rresp)]
        with m.If(ar_held & ~any_read_target):
            m.d.sync += [ar_held.eq(0), bus.rvalid.eq(1), bus.rdata.eq(0), bus.rresp.eq(Resp.DECERR)]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        return m


register_block(
    "runtime_axi_lite_decoder", AXILiteDecoder, family="runtime",
    summary="AXI4-Lite 1-to-N decoder by high address bits (the cluster's per-node control registers).",
    golden=NO_GOLDEN("plumbing: AXI4-Lite address decoding"),
    drops={"s_axi": "an access to an address no port answers (ports not a power of two): the write is "
                     "discarded and the read returns 0, each answered DECERR on bresp / rresp"},
)
