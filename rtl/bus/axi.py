"""AXI4 and AXI4-Lite interface signatures, and the AXI constants the bus blocks share.

Members are named exactly like the AXI signals, in lower case, with directions as seen
from the manager (master): a component's manager port is ``Out(AXI4Signature(...))`` and
a subordinate (slave) port is ``In(...)``. Amaranth flattens a port ``m_axi`` into the
Verilog ports ``m_axi__awaddr``, ``m_axi__wdata`` and so on; cocotbext-axi joins its
prefix and the signal name with ``_``, so ``AxiBus.from_prefix(dut, "m_axi_")`` finds them
(the trailing underscore of the prefix supplies the second one).
"""

import enum

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..registration import check_int

__all__ = ["AXI4Signature", "AXI4LiteSignature", "Burst", "Resp", "PAGE_BYTES", "CACHE_NORMAL",
           "check_data_width", "drive_address_constants"]

# AXI forbids a burst to cross a 4 KB address boundary (AXI spec A3.4.1).
PAGE_BYTES = 4096


class Burst(enum.IntEnum):
    """``AxBURST`` encodings."""

    FIXED = 0
    INCR = 1
    WRAP = 2


class Resp(enum.IntEnum):
    """``xRESP`` encodings; bit 1 set means the transfer failed."""

    OKAY = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


def check_data_width(data_width, minimum):
    """Validate an AXI data width: a power of two from ``minimum`` to 1024 bits."""
    check_int("data_width", data_width, minimum, 1024)
    if data_width & (data_width - 1):
        raise ValueError(f"data_width must be a power of two, not {data_width}")
    return data_width


class _WidthSignature(wiring.Signature):
    """An AXI signature fixed by its widths, named in ``_WIDTHS`` and each kept as ``_<name>``:
    equal, hashed and printed by them."""

    _WIDTHS = ("address_width", "data_width")

    def _widths(self):
        return tuple(getattr(self, f"_{name}") for name in self._WIDTHS)

    @property
    def address_width(self):
        return self._address_width

    @property
    def data_width(self):
        return self._data_width

    def __eq__(self, other):
        return type(other) is type(self) and other._widths() == self._widths()

    def __hash__(self):
        return hash((type(self), *self._widths()))

    def __repr__(self):
        pairs = zip(self._WIDTHS, self._widths(), strict=True)
        widths = ", ".join(f"{name}={value}" for name, value in pairs)
        return f"{type(self).__name__}({widths})"


class AXI4Signature(_WidthSignature):
    """Signature of a full AXI4 memory-mapped interface, from the manager's side.

    Parameters
    ----------
    address_width : int
        Byte address width, 12 to 64.
    data_width : int
        Data bus width in bits, a power of two from 8 to 1024.
    id_width : int
        Transaction ID width, 1 to 16 (Verilog has no zero-width ports, so at least 1).

    Members
    -------
    awid, awaddr, awlen, awsize, awburst, awcache, awprot, awvalid : Out
        Write address channel (``awlen`` 8 bits, ``awsize`` 3, ``awburst`` 2, ``awcache`` 4,
        ``awprot`` 3).
    awready : In(1)
    wdata, wstrb, wlast, wvalid : Out
        Write data channel (``wstrb`` has one bit per data byte).
    wready : In(1)
    bid, bresp, bvalid : In
        Write response channel.
    bready : Out(1)
    arid, araddr, arlen, arsize, arburst, arcache, arprot, arvalid : Out
        Read address channel, as the write address channel.
    arready : In(1)
    rid, rdata, rresp, rlast, rvalid : In
        Read data channel.
    rready : Out(1)
    """

    _WIDTHS = ("address_width", "data_width", "id_width")

    def __init__(self, *, address_width=64, data_width=512, id_width=1):
        self._address_width = check_int("address_width", address_width, 12, 64)
        self._data_width = check_data_width(data_width, 8)
        self._id_width = check_int("id_width", id_width, 1, 16)
        members = {}
        for prefix in ("aw", "ar"):
            members.update({
                f"{prefix}id": Out(id_width),
                f"{prefix}addr": Out(address_width),
                f"{prefix}len": Out(8),
                f"{prefix}size": Out(3),
                f"{prefix}burst": Out(2),
                f"{prefix}cache": Out(4),
                f"{prefix}prot": Out(3),
                f"{prefix}valid": Out(1),
                f"{prefix}ready": In(1),
            })
        members.update({
            "wdata": Out(data_width),
            "wstrb": Out(data_width // 8),
            "wlast": Out(1),
            "wvalid": Out(1),
            "wready": In(1),
            "bid": In(id_width),
            "bresp": In(2),
            "bvalid": In(1),
            "bready": Out(1),
            "rid": In(id_width),
            "rdata": In(data_width),
            "rresp": In(2),
            "rlast": In(1),
            "rvalid": In(1),
            "rready": Out(1),
        })
        super().__init__(members)

    @property
    def id_width(self):
        return self._id_width


class AXI4LiteSignature(_WidthSignature):
    """Signature of an AXI4-Lite interface, from the manager's side.

    Parameters
    ----------
    address_width : int
        Byte address width, 4 to 64.
    data_width : int
        32 or 64.

    Members
    -------
    awaddr, awprot, awvalid : Out; awready : In(1)
    wdata, wstrb, wvalid : Out; wready : In(1)
    bresp, bvalid : In; bready : Out(1)
    araddr, arprot, arvalid : Out; arready : In(1)
    rdata, rresp, rvalid : In; rready : Out(1)
    """

    def __init__(self, *, address_width=12, data_width=32):
        self._address_width = check_int("address_width", address_width, 4, 64)
        if data_width not in (32, 64):
            raise ValueError(f"data_width must be 32 or 64, not {data_width!r}")
        self._data_width = data_width
        super().__init__({
            "awaddr": Out(address_width),
            "awprot": Out(3),
            "awvalid": Out(1),
            "awready": In(1),
            "wdata": Out(data_width),
            "wstrb": Out(data_width // 8),
            "wvalid": Out(1),
            "wready": In(1),
            "bresp": In(2),
            "bvalid": In(1),
            "bready": Out(1),
            "araddr": Out(address_width),
            "arprot": Out(3),
            "arvalid": Out(1),
            "arready": In(1),
            "rdata": In(data_width),
            "rresp": In(2),
            "rvalid": In(1),
            "rready": Out(1),
        })


# Vitis HLS drives AxCACHE = 0b0011 (normal, non-cacheable, bufferable, modifiable): the
# interconnect may merge or split transfers, which the DDR controller needs for full bandwidth.
CACHE_NORMAL = 0b0011


def drive_address_constants(m, bus, prefix, data_width):
    """Drive the fixed fields of the ``prefix`` ("ar" or "aw") address channel of ``bus``.

    ID 0 (every transfer is in order), full-width beats, INCR bursts, normal bufferable
    memory, unprivileged secure data access.
    """
    beat_bytes_log2 = (data_width // 8).bit_length() - 1
    m.d.comb += [
        getattr(bus, f"{prefix}id").eq(0),
        getattr(bus, f"{prefix}size").eq(beat_bytes_log2),
        getattr(bus, f"{prefix}burst").eq(Burst.INCR),
        getattr(bus, f"{prefix}cache").eq(CACHE_NORMAL),
        getattr(bus, f"{prefix}prot").eq(0),
    ]
