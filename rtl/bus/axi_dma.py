"""What the AXI4 read and write DMA engines share: parameters, common ports, status logic."""

from amaranth.hdl import ResetInserter, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..registration import Param, Parameterized
from .axi import AXI4Signature, check_data_width
from .axi_burst_planner import AXIBurstPlanner, command_layout

__all__ = ["AXIDMAEngine", "dma_params", "beat_layout"]


def beat_layout(data_width):
    """A data beat with ``last``: the reader's output payload (``last`` ends a command), the writer's W."""
    return data.StructLayout({"data": data_width, "last": 1})


def dma_params(outstanding_help):
    """The registry parameters of a DMA engine; ``outstanding_help`` says what is counted."""
    return [
        Param("address_width", int, 64, "byte address width", minimum=12, maximum=64),
        Param("data_width", int, 512, "AXI data width in bits (power of two)", minimum=32, maximum=1024),
        Param("id_width", int, 1, "AXI ID width", minimum=1, maximum=16),
        Param("max_burst", int, 64, "longest burst in beats", minimum=1, maximum=256),
        Param("max_outstanding", int, 4, outstanding_help, minimum=2, maximum=64),
        Param("length_width", int, 32, "width of the command beat count", minimum=1, maximum=32),
        Param("back_to_back", bool, False, "the planner takes one-burst commands one per cycle"),
    ]


class AXIDMAEngine(Parameterized, wiring.Component):
    """Base of :class:`AXIBurstReader` and :class:`AXIBurstWriter` (not a block by itself).

    Validates the shared parameters and declares the shared ports: ``cmd``, ``m_axi``,
    ``busy``, ``done``, ``error``, ``error_resp``, ``clear`` and ``cancel`` (see the
    engines), plus the engine's own, from its ``_ports()``.

    Parameters
    ----------
    address_width : int
        Byte address width, 12 to 64.
    data_width : int
        AXI data width and beat width in bits, a power of two from 32 to 1024.
    id_width : int
        AXI ID width (the engine always uses ID 0).
    max_burst : int
        Longest burst in beats, 1 to 256.
    max_outstanding : int
        Bursts in flight at most, 2 to 64 (each engine says which it counts).
    length_width : int
        Width of the command's beat count, 1 to 32.
    back_to_back : bool
        Passed to :class:`~rtl.bus.axi_burst_planner.AXIBurstPlanner`: commands of one burst
        are then taken one per cycle, not one per two.

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout(address_width, length_width)))
        Commands: ``address`` in bytes, ``length`` in beats of ``data_width // 8`` bytes.
    error_resp : Out(2)
        The first failing response code (2 SLVERR, 3 DECERR), 0 while ``error`` is low.
    clear : In(1)
        Clears ``error`` and ``error_resp``; honoured only while ``busy`` is low.
    cancel : In(1)
        Drops all work and closes the open bursts (see the engines); tie low if unused.
    """

    PARAMS = tuple(dma_params("bursts in flight"))
    throughput = 1

    @classmethod
    def check_params(cls, values):
        """The data width is a power of two."""
        check_data_width(values["data_width"], 32)

    def __init__(self, *, address_width=64, data_width=512, id_width=1, max_burst=64, max_outstanding=4,
                 length_width=32, back_to_back=False):
        self._length_width = length_width
        super().__init__({
            "cmd": In(stream.Signature(command_layout(address_width, length_width))),
            "m_axi": Out(AXI4Signature(address_width=address_width, data_width=data_width,
                                       id_width=id_width)),
            "busy": Out(1),
            "done": Out(1),
            "error": Out(1),
            "error_resp": Out(2),
            "clear": In(1),
            "cancel": In(1),
            **self._ports(),
        })

    def _ports(self):
        """The engine's own ports, by name (the parameters are set by then)."""
        raise NotImplementedError

    def planner(self, m, stop):
        """Add the burst planner fed from ``cmd`` to ``m``; return it.

        While ``stop`` is high the planner is held in reset (the command being cut is
        dropped) and ``cmd`` is not accepted.
        """
        planner = AXIBurstPlanner(
            address_width=self._address_width, data_width=self._data_width,
            max_burst=self._max_burst, length_width=self._length_width, back_to_back=self._back_to_back)
        m.submodules.planner = ResetInserter(stop)(planner)
        m.d.comb += [
            planner.cmd.valid.eq(self.cmd.valid & ~stop),
            planner.cmd.payload.eq(self.cmd.payload),
            self.cmd.ready.eq(planner.cmd.ready & ~stop),
        ]
        return planner

    def address_request(self, m, prefix, issue, burst):
        """The registered request on the ``prefix`` ("ar" or "aw") channel.

        ``issue`` loads it with the burst on ``burst`` (also in the cycle the previous request
        is accepted); it is dropped once accepted.
        """
        axi = self.m_axi
        valid = getattr(axi, f"{prefix}valid")
        with m.If(issue):
            m.d.sync += [
                valid.eq(1),
                getattr(axi, f"{prefix}addr").eq(burst.payload.address),
                getattr(axi, f"{prefix}len").eq(burst.payload.beats - 1),
            ]
        with m.Elif(getattr(axi, f"{prefix}ready")):
            m.d.sync += valid.eq(0)

    def cancel_drain(self, m, bus_idle):
        """The cancel state: returns ``(stop, draining)``.

        ``cancel`` starts a drain that lasts until ``bus_idle`` (no burst open on the bus);
        ``stop`` is high in the cycle of ``cancel`` and throughout the drain.
        """
        draining = Signal()
        stop = Signal()
        # An expression, not m.If: in a kernel that ties `cancel` low an If would print as a
        # case on a constant, which Verilator -Wall rejects (CASEINCOMPLETE).
        m.d.sync += draining.eq(self.cancel | (draining & ~bus_idle))
        m.d.comb += stop.eq(self.cancel | draining)
        return stop, draining

    def error_and_status(self, m, busy, failed, resp):
        """The sticky error (set by ``failed`` with code ``resp``), ``busy``, ``done`` and ``clear``.

        Returns the sticky error signal, which the engine uses to stop issuing bursts.
        """
        error = Signal()
        error_resp = Signal(2)
        busy_before = Signal()
        with m.If(failed & ~error):
            m.d.sync += [error.eq(1), error_resp.eq(resp)]
        with m.If(self.clear & ~busy):
            m.d.sync += [error.eq(0), error_resp.eq(0)]
        m.d.sync += busy_before.eq(busy)
        m.d.comb += [
            self.busy.eq(busy),
            self.done.eq(busy_before & ~busy),
            self.error.eq(error),
            self.error_resp.eq(error_resp),
        ]
        return error
