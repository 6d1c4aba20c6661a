"""The AXI4-Lite control register file a Vitis RTL kernel expects (``ap_ctrl_hs``)."""

import functools
import keyword
import operator

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..registration import NO_DROPS, NO_GOLDEN, Param, Parameterized, register_block
from .axi import AXI4LiteSignature, Resp

__all__ = ["AXILiteControl", "parse_register_list", "ARGUMENT_BASE", "SLOT_BYTES"]

ARGUMENT_BASE = 0x10
SLOT_BYTES = 8

# CTRL (0x00) bits, as in Vitis HLS's generated control interface.
AP_START, AP_DONE, AP_IDLE, AP_READY, AUTO_RESTART = 0, 1, 2, 3, 7

_FIXED_REGISTERS = (
    ("CTRL", 0x00, "RW", "bit 0 ap_start (RW: the host writes 1, cleared when the kernel takes the start); "
                         "bit 1 ap_done (RO, clear on read); bit 2 ap_idle (RO); "
                         "bit 3 ap_ready (RO, clear on read); bit 7 auto_restart (RW)"),
    ("GIE", 0x04, "RW", "bit 0 global interrupt enable"),
    ("IER", 0x08, "RW", "bit 0 ap_done interrupt enable; bit 1 ap_ready interrupt enable"),
    ("ISR", 0x0C, "RW", "bit 0 ap_done interrupt, bit 1 ap_ready interrupt; set by hardware when "
                        "enabled in IER, each bit toggled by writing 1"),
)
_RESERVED_NAMES = {"signature", "s_axi_control", "start", "done", "idle", "ready", "irq", "args",
                   "status"} | {name.lower() for name, *_ in _FIXED_REGISTERS}


def parse_register_list(what, spec, widths):
    """Normalise a register list to a tuple of ``(name, width, description)``.

    Parameters
    ----------
    what : str
        Parameter name, for error messages.
    spec : str or sequence
        ``"name:width,name:width"`` (the command-line form), or a sequence of
        ``(name, width)`` or ``(name, width, description)``.
    widths : container of int
        Allowed widths.
    """
    if isinstance(spec, str):
        items = []
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, sep, width = part.partition(":")
            if not sep:
                raise ValueError(f"{what}: {part!r} is not name:width")
            try:
                items.append((name.strip(), int(width, 0)))
            except ValueError:
                raise ValueError(f"{what}: width of {name!r} must be an integer, not {width!r}") from None
    else:
        items = list(spec)
    result = []
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise ValueError(f"{what}: each entry must be (name, width[, description]), not {item!r}")
        name, width = item[0], item[1]
        description = item[2] if len(item) == 3 else ""
        if (not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name)
                or name.startswith("_") or name.lower() in _RESERVED_NAMES):
            raise ValueError(f"{what}: {name!r} is not a usable register name")
        if isinstance(width, bool) or width not in widths:
            allowed = "32 or 64" if set(widths) == {32, 64} else f"{min(widths)}..{max(widths)}"
            raise ValueError(f"{what}: width of {name!r} must be {allowed}, not {width!r}")
        result.append((name, width, description))
    return tuple(result)


class AXILiteControl(Parameterized, wiring.Component):
    """Vitis ``ap_ctrl_hs`` control registers, kernel arguments and status on an AXI4-Lite port.

    Register map (byte offsets, 32-bit registers):

    ====== ============ =======================================================
    0x00   CTRL         bit 0 ap_start, 1 ap_done, 2 ap_idle, 3 ap_ready, 7 auto_restart
    0x04   GIE          bit 0 global interrupt enable
    0x08   IER          bit 0 done, bit 1 ready interrupt enable
    0x0C   ISR          bit 0 done, bit 1 ready interrupt status, toggle on write
    0x10   arguments    argument *i* at ``0x10 + 8 i``; a 64-bit one has its low word
                        there and its high word at ``+4``; a 32-bit one reads 0 at ``+4``
    ...    status       status *j* at ``0x10 + 8 (len(arguments) + j)``, read only,
                        laid out like the arguments
    ====== ============ =======================================================

    Behaviour: the host sets ap_start by writing 1 to CTRL bit 0. When ap_start is set and
    ``idle`` is high the block pulses ``start`` for one cycle and clears ap_start (the
    kernel took the start). A ``done`` pulse sets ap_done, a ``ready`` pulse sets ap_ready;
    both clear when CTRL is read. With auto_restart set, a ``done`` pulse sets ap_start
    again. ISR bits are set by ``done`` / ``ready`` pulses when enabled in IER (an event
    wins over a toggle in the same cycle); ``irq`` = GIE and any ISR bit. Reading the
    low word of a 64-bit status register latches its high word, which the next read of
    ``+4`` returns, so a running counter is read without tearing.

    AXI4-Lite: AW and W are accepted independently, in either order, and the write happens
    once both are held; ``wstrb`` is honoured per byte for arguments (CTRL, GIE, IER and
    ISR use byte 0). Every response is OKAY; unmapped addresses read as zero and ignore
    writes, as the Vitis HLS control interface does.

    Parameters
    ----------
    arguments : str or sequence
        Argument registers, ``"name:width,..."`` or ``[(name, width[, description]), ...]``,
        width 32 or 64.
    status : str or sequence
        Read-only status inputs, same forms, width 1 to 64.
    address_width : int
        AXI4-Lite address width, 5 to 16 (Vitis uses 12); the map must fit.

    Attributes
    ----------
    s_axi_control : In(AXI4LiteSignature(address_width, 32))
        The host's register port (Vitis name).
    start : Out(1)
        One-cycle start pulse to the kernel.
    done, ready : In(1)
        One-cycle pulses from the kernel: finished a run; took its arguments.
    idle : In(1)
        Kernel is idle (level); a start is only issued while it is high.
    irq : Out(1)
        Level interrupt to the host: the Vitis ``interrupt`` port. (Verilator's ``-Wall``
        rejects a port called ``interrupt`` as a common C++ word, SYMRSVDWORD, so the
        kernel top renames it.)
    args : Out(Signature({name: Out(width)}))
        One register output per argument (Verilog ``args__<name>``).
    status : In(Signature({name: Out(width)}))
        One input per status register (Verilog ``status__<name>``).

    Notes
    -----
    Latency: a write takes effect two cycles after both AW and W are offered; a read
    answers in the cycle after AR is accepted. ``start`` follows ap_start and ``idle`` by
    one cycle. Throughput: at best one write and one read every two cycles.
    """

    PARAMS = (
        Param("arguments", str, "source:64,destination:64,length:32",
              "argument registers name:width (32 or 64), comma separated", accepts=(list, tuple)),
        Param("status", str, "error:2,cycles:64", "read-only status inputs name:width (1..64)",
              accepts=(list, tuple)),
        Param("address_width", int, 12, "AXI4-Lite address width", minimum=5, maximum=16),
    )

    def __init__(self, *, arguments="", status="", address_width=12):
        self._arguments = parse_register_list("arguments", arguments, (32, 64))
        self._status = parse_register_list("status", status, range(1, 65))
        names = [name for name, *_ in self._arguments + self._status]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"register names must be unique, repeated: {', '.join(duplicates)}")
        end = ARGUMENT_BASE + SLOT_BYTES * len(names)
        if end > 1 << address_width:
            raise ValueError(f"the register map needs {end} bytes, more than address_width={address_width} "
                             f"covers")
        super().__init__({
            "s_axi_control": In(AXI4LiteSignature(address_width=address_width, data_width=32)),
            "start": Out(1),
            "done": In(1),
            "idle": In(1),
            "ready": In(1),
            "irq": Out(1),
            "args": Out(wiring.Signature({name: Out(width) for name, width, _ in self._arguments})),
            "status": In(wiring.Signature({name: Out(width) for name, width, _ in self._status})),
        })

    def register_map(self):
        """The register map as data: a list of dicts, in address order.

        Each dict has ``name``, ``offset`` (bytes), ``width`` (bits; 64-bit registers take
        the words at ``offset`` and ``offset + 4``, low first), ``access`` (``"RW"`` or
        ``"RO"``), ``kind`` (``"control"``, ``"argument"`` or ``"status"``) and
        ``description``.
        """
        entries = [{"name": name, "offset": offset, "width": 32, "access": access, "kind": "control",
                    "description": description} for name, offset, access, description in _FIXED_REGISTERS]
        slots = [("argument", "RW", reg) for reg in self._arguments]
        slots += [("status", "RO", reg) for reg in self._status]
        for index, (kind, access, (name, width, description)) in enumerate(slots):
            words = "low word here, high word at +4" if width > 32 else "one word"
            entries.append({
                "name": name, "offset": ARGUMENT_BASE + SLOT_BYTES * index, "width": width,
                "access": access, "kind": kind,
                "description": description or f"{kind} {name}, {width} bits ({words})",
            })
        return entries

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axi_control

        ap_start = Signal()
        ap_done = Signal()
        ap_ready = Signal()
        auto_restart = Signal()
        gie = Signal()
        ier = Signal(2)
        isr = Signal(2)

        # Write channel: AW and W are held independently; the write happens once both are.
        aw_held = Signal()
        aw_addr = Signal(self._address_width)
        w_held = Signal()
        w_data = Signal(32)
        w_strb = Signal(4)
        m.d.comb += [bus.awready.eq(~aw_held), bus.wready.eq(~w_held), bus.bresp.eq(Resp.OKAY)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_held.eq(1), aw_addr.eq(bus.awaddr)]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_held.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]
        write = Signal()
        m.d.comb += write.eq(aw_held & w_held & ~bus.bvalid)
        with m.If(write):
            m.d.sync += [aw_held.eq(0), w_held.eq(0), bus.bvalid.eq(1)]
        with m.Elif(bus.bready):
            m.d.sync += bus.bvalid.eq(0)

        # Read channel: one request at a time, answered from a register.
        read = Signal()
        m.d.comb += [
            bus.arready.eq(~bus.rvalid),
            read.eq(bus.arvalid & bus.arready),
            bus.rresp.eq(Resp.OKAY),
        ]
        with m.If(read):
            m.d.sync += bus.rvalid.eq(1)
        with m.Elif(bus.rready):
            m.d.sync += bus.rvalid.eq(0)

        read_word = bus.araddr[2:]
        write_word = aw_addr[2:]

        def merged(old):
            """``old`` (32 bits) with the bytes of ``w_data`` enabled in ``w_strb`` replaced."""
            return Cat(*(Mux(w_strb[i], w_data[8 * i:8 * i + 8], old[8 * i:8 * i + 8]) for i in range(4)))

        # Readable words as (word index, value); an unmapped address matches none and reads zero.
        # The decode is an AND-OR of comparisons rather than a switch, so that the Verilog has
        # no incomplete case statements.
        ctrl = Signal(32)
        m.d.comb += [
            ctrl[AP_START].eq(ap_start),
            ctrl[AP_DONE].eq(ap_done),
            ctrl[AP_IDLE].eq(self.idle),
            ctrl[AP_READY].eq(ap_ready),
            ctrl[AUTO_RESTART].eq(auto_restart),
        ]
        readable = [(0x00 >> 2, ctrl), (0x04 >> 2, gie), (0x08 >> 2, ier), (0x0C >> 2, isr)]
        for entry in self.register_map()[len(_FIXED_REGISTERS):]:
            low = entry["offset"] >> 2
            value = getattr(self.args if entry["kind"] == "argument" else self.status, entry["name"])
            high = value[32:]
            if entry["kind"] == "status" and entry["width"] > 32:
                # The high word comes from a copy taken when the low word is read.
                high = Signal(entry["width"] - 32, name=f"{entry['name']}_high")
                with m.If(read & (read_word == low)):
                    m.d.sync += high.eq(value[32:])
            readable.append((low, value[:32]))
            if entry["width"] > 32:
                readable.append((low + 1, high))
        read_data = Signal(32)
        m.d.comb += read_data.eq(functools.reduce(
            operator.or_, (Mux(read_word == index, value, 0) for index, value in readable)))
        with m.If(read):
            m.d.sync += bus.rdata.eq(read_data)
        cor = Signal()  # this read clears ap_done and ap_ready
        m.d.comb += cor.eq(read & (read_word == 0x00 >> 2))

        # Register writes from the bus; an unmapped address matches none and is ignored.
        ctrl_byte = write & w_strb[0]
        toggle = Signal(2)
        with m.If(ctrl_byte & (write_word == 0x00 >> 2)):
            m.d.sync += auto_restart.eq(w_data[AUTO_RESTART])
        with m.If(ctrl_byte & (write_word == 0x04 >> 2)):
            m.d.sync += gie.eq(w_data[0])
        with m.If(ctrl_byte & (write_word == 0x08 >> 2)):
            m.d.sync += ier.eq(w_data[:2])
        with m.If(ctrl_byte & (write_word == 0x0C >> 2)):
            m.d.comb += toggle.eq(w_data[:2])
        for entry in self.register_map()[len(_FIXED_REGISTERS):]:
            if entry["kind"] == "argument":
                register = getattr(self.args, entry["name"])
                for word in range(entry["width"] // 32):
                    with m.If(write & (write_word == (entry["offset"] >> 2) + word)):
                        part = register[32 * word:32 * word + 32]
                        m.d.sync += part.eq(merged(part))


        # ap_ctrl_hs handshake with the kernel.
        host_start = ctrl_byte & (write_word == 0x00 >> 2) & w_data[AP_START]
        take = ap_start & self.idle & ~self.start
        m.d.sync += self.start.eq(take)
        with m.If(host_start | (self.done & auto_restart)):
            m.d.sync += ap_start.eq(1)
        with m.Elif(take):
            m.d.sync += ap_start.eq(0)
        # A kernel event in the same cycle as a clearing read survives for the next read.
        for bit, event in ((ap_done, self.done), (ap_ready, self.ready)):
            with m.If(event):
                m.d.sync += bit.eq(1)
            with m.Elif(cor):
                m.d.sync += bit.eq(0)

        events = Cat(self.done & ier[0], self.ready & ier[1])
        for i in range(2):
            with m.If(events[i]):
                m.d.sync += isr[i].eq(1)
            with m.Elif(toggle[i]):
                m.d.sync += isr[i].eq(~isr[i])
        m.d.comb += self.irq.eq(gie & isr.any())
        return m


register_block(
    "axi_lite_control", AXILiteControl, family="bus",
    summary="Vitis ap_ctrl_hs AXI4-Lite register file: CTRL/GIE/IER/ISR, argument and status registers.",
    golden=NO_GOLDEN("plumbing: a register file over AXI4-Lite"),
    drops=NO_DROPS,
)
