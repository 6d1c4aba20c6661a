"""Scatter-add into DRAM: one read-modify-write per pair, with an in-flight hazard table."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4Signature, check_data_width, drive_address_constants
from ..fp.fp_add import FloatAdder
from ..registration import check_int
from .flat_pair_parser import flat_pair_layout

__all__ = ["DRAMReadModifyWrite"]


class DRAMReadModifyWrite(wiring.Component):
    """Adds each pair's f32 value into its element of a dense f32 region in memory.

    For each pair on ``i``: a single-beat read of the beat holding element ``index`` (at
    ``base + (index // E) * data_width / 8``, ``E = data_width // 32``), one f32 RNE add
    ``old + value`` (:class:`~rtl.fp.fp_add.FloatAdder`, latency 6), and a single-beat write of
    the sum whose byte strobe covers only that element, so the other elements of the beat are
    left alone whatever else is in flight.

    **Hazard table.** Up to ``depth`` RMWs are in flight. Entry ``e`` holds the element index
    and value of one RMW from its AR until its B response; entries are allocated round robin.
    A pair whose element is in the table waits on ``i`` until that entry retires, so every add
    reads the previous add's written result: updates of one element happen in pair order, as
    :func:`golden.compress.scatter` defines. All transfers use ID 0, so R and B come back in
    issue order and name their entry implicitly.

    **Errors.** An R beat with SLVERR or DECERR sets the sticky ``read_error``; that pair is not
    written back (its entry retires at once). B responses are not checked here: the caller sees
    ``bresp`` on its port.

    Parameters
    ----------
    address_width : int
        Byte address width, 12 to 64.
    data_width : int
        Memory data width, a power of two from 64 to 1024 bits.
    depth : int
        Table entries (RMWs in flight), a power of two from 2 to 64.

    Attributes
    ----------
    i : In(stream.Signature(flat_pair_layout()))
        Pairs, already checked (``index`` inside the region), f32 values.
    base : In(address_width)
        Byte address of element 0, beat aligned; held while ``busy``.
    m_axi : Out(AXI4Signature(address_width, data_width))
        Single-beat INCR reads and writes. ``rready`` and ``bready`` stay high: the adder and
        the write queue hold at most ``depth`` results between them, so nothing backs up into R.
    read_error : Out(1)
        Sticky: a read response failed. Cleared by ``clear``.
    clear : In(1)
    busy : Out(1)
        An entry is in the table (an RMW is between its AR and its B).

    Notes
    -----
    Throughput: one pair per cycle while ``depth`` covers the round trip (AR, memory read
    latency, 1 + 6 adder cycles, AW/W, write response), and pairs do not repeat an element in
    flight; a chain on one element runs at one pair per round trip.
    """

    def __init__(self, *, address_width=64, data_width=512, depth=16):
        self._address_width = check_int("address_width", address_width, 12, 64)
        self._data_width = check_data_width(data_width, 64)
        self._depth = check_int("depth", depth, 2, 64)
        if depth & (depth - 1):
            raise ValueError(f"depth must be a power of two, not {depth}")
        super().__init__({
            "i": In(stream.Signature(flat_pair_layout())),
            "base": In(address_width),
            "m_axi": Out(AXI4Signature(address_width=address_width, data_width=data_width)),
            "read_error": Out(1),
            "clear": In(1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        depth = self._depth
        per_beat = self._data_width // 32
        offset_bits = per_beat.bit_length() - 1
        beat_shift = (self._data_width // 8).bit_length() - 1
        id_bits = depth.bit_length() - 1
        axi = self.m_axi
        m.submodules.adder = adder = FloatAdder(fmt="f32", tag_width=id_bits + 1)
        drive_address_constants(m, axi, "ar", self._data_width)
        drive_address_constants(m, axi, "aw", self._data_width)

        def beat_address(index):
            return self.base + (index[offset_bits:] << beat_shift)

        table_index = Signal(data.ArrayLayout(32, depth))
        table_value = Signal(data.ArrayLayout(32, depth))
        live = Signal(depth)
        alloc = Signal(id_bits)
        read_next = Signal(id_bits)        # entry of the next R beat

        # AR: a new pair issues when its element is not in the table and its entry is free.
        pair = self.i.payload
        hazard = Cat(live[e] & (table_index[e] == pair.index) for e in range(depth)).any()
        issue = Signal()
        m.d.comb += [
            issue.eq(self.i.valid & ~hazard & ~live.bit_select(alloc, 1) & (~axi.arvalid | axi.arready)),
            self.i.ready.eq(issue),
        ]
        set_live = Signal(depth)
        with m.If(issue):
            m.d.comb += set_live.eq(1 << alloc)
            m.d.sync += [
                table_index[alloc].eq(pair.index),
                table_value[alloc].eq(pair.value),
                alloc.eq(alloc + 1),
                axi.arvalid.eq(1),
                axi.araddr.eq(beat_address(pair.index)),
                axi.arlen.eq(0),
            ]
        with m.Elif(axi.arready):
            m.d.sync += axi.arvalid.eq(0)

        # R: the old element and the pair's value into the adder.
        offset = table_index[read_next][:offset_bits]
        m.d.comb += [
            axi.rready.eq(adder.i.ready),
            adder.i.valid.eq(axi.rvalid),
            adder.i.payload.a.eq(axi.rdata.word_select(offset, 32)),
            adder.i.payload.b.eq(table_value[read_next]),
            adder.i.payload.tag.eq(Cat(read_next, axi.rresp[1])),
        ]
        with m.If(axi.rvalid & axi.rready):
            m.d.sync += read_next.eq(read_next + 1)
            with m.If(axi.rresp[1]):
                m.d.sync += self.read_error.eq(1)
        with m.If(self.clear):
            m.d.sync += self.read_error.eq(0)

        # Sums queue for AW/W; the entries awaiting B queue for their responses.
        m.submodules.writes = writes = SyncFIFO(width=32 + id_bits + 1, depth=depth)
        m.submodules.responses = responses = SyncFIFO(width=id_bits, depth=depth)
        m.d.comb += [
            writes.w_en.eq(adder.o.valid),
            writes.w_data.eq(Cat(adder.o.payload.result, adder.o.payload.tag)),
            adder.o.ready.eq(writes.w_rdy),
        ]
        head_sum = writes.r_data[:32]
        head_id = writes.r_data[32:32 + id_bits]
        head_failed = writes.r_data[32 + id_bits]
        aw_fire = axi.awvalid & axi.awready
        w_fire = axi.wvalid & axi.wready
        w_free = (~axi.awvalid | aw_fire) & (~axi.wvalid | w_fire)
        send = writes.r_rdy & ~head_failed & w_free & responses.w_rdy
        drop = writes.r_rdy & head_failed          # a failed read is not written back
        m.d.comb += [
            writes.r_en.eq(send | drop),
            responses.w_en.eq(send),
            responses.w_data.eq(head_id),
            responses.r_en.eq(axi.bvalid),
            axi.bready.eq(1),
            axi.wlast.eq(1),
            axi.awlen.eq(0),
        ]
        with m.If(aw_fire):
            m.d.sync += axi.awvalid.eq(0)
        with m.If(w_fire):
            m.d.sync += axi.wvalid.eq(0)
        with m.If(send):
            m.d.sync += [
                axi.awvalid.eq(1),
                axi.awaddr.eq(beat_address(table_index[head_id])),
                axi.wvalid.eq(1),
                axi.wdata.eq(Cat(head_sum for _ in range(per_beat))),
                axi.wstrb.eq(Const(0xF, len(axi.wstrb)) << (table_index[head_id][:offset_bits] << 2)),
            ]

        # Entries retire on their B response, or at once after a failed read.
        clear_live = Signal(depth)
        with m.If(drop):
            m.d.comb += clear_live.eq(1 << head_id)
        retire = Signal(depth)
        with m.If(axi.bvalid):
            m.d.comb += retire.eq(1 << responses.r_data)
        m.d.sync += live.eq((live | set_live) & ~clear_live & ~retire)
        m.d.comb += self.busy.eq(live != 0)
        return m
