"""Pipelining pieces for timing: a memory read port with an output register, a registered-grant arbiter.

Both end a long path at a register at the price of a cycle: the read port puts the register that a
block RAM has on its output (so the RAM's clock-to-out is not followed by the reader's logic), the
arbiter registers its grant (so the round-robin choice is not followed by the granted transfer).
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RegisteredReadPort", "PipelinedArbiter"]


class RegisteredReadPort:
    """A synchronous read port of ``memory`` followed by a register on its data (builds into ``m``).

    An ``addr`` given in a cycle with ``en`` high is on ``data`` after the second enabled clock edge
    from then (one edge later than the bare port): both stages (the port and the register) advance
    together when ``en`` is high and hold when it is low, so a reader that stalls keeps its two reads
    in flight.

    Parameters
    ----------
    m : Module
    memory : amaranth.lib.memory.Memory
        The memory (already a submodule of ``m`` or of a module above it).
    name : str
        Prefix of the signal names.
    transparent_for : tuple of write ports
        As for :meth:`~amaranth.lib.memory.Memory.read_port`.

    Attributes
    ----------
    addr : Signal
        The read address (driven by the block).
    en : Signal, init 1
        Advance both stages (driven by the block; high when left alone).
    data : Signal of ``memory.shape``
        The registered word.
    """

    def __init__(self, m, memory, name, *, transparent_for=()):
        self.port = memory.read_port(transparent_for=transparent_for)
        self.addr = self.port.addr
        self.en = Signal(init=1, name=f"{name}_en")
        self.data = Signal(memory.shape, name=f"{name}_data")
        m.d.comb += self.port.en.eq(self.en)
        with m.If(self.en):
            m.d.sync += self.data.eq(self.port.data)


class PipelinedArbiter(wiring.Component):
    """A round-robin arbiter among ``count`` requesters whose grant is a register.

    While no grant is held, or in a cycle with ``advance`` high (the holder is done), the grant
    register takes the next winner among ``requests``: the first requester at or after the one
    after the last winner, else the first one, so a requester that keeps asking wins within
    ``count`` grants. A grant is seen the cycle after the request it answers; it stays until
    ``advance``, whether or not the holder still asks. No request: no grant (``grant`` is 0).

    Parameters
    ----------
    count : int
        Number of requesters, at least 1.

    Attributes
    ----------
    requests : In(count)
        One bit per requester.
    advance : In(1)
        The holder of the grant is done; load the next grant.
    grant : Out(count)
        The held grant, one-hot (a register).
    index : Out(range(count))
        The index of the held grant (a register; meaningful while ``grant`` is nonzero).
    """

    def __init__(self, count):
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a positive integer, not {count!r}")
        self._count = count
        super().__init__({"requests": In(count), "advance": In(1), "grant": Out(count),
                          "index": Out(range(count))})

    def elaborate(self, platform):
        m = Module()
        count = self._count
        pointer = Signal(range(count))
        chosen = Signal(range(count))
        # Later assignments win: the first requester overall, overridden by the first at or after
        # the pointer.
        for at_pointer in (False, True):
            for index in reversed(range(count)):
                later = (pointer <= index) if at_pointer else Const(1, 1)
                with m.If(self.requests[index] & later):
                    m.d.comb += chosen.eq(index)
        with m.If(self.advance | ~self.grant.any()):
            m.d.sync += self.grant.eq(0)
            with m.If(self.requests.any()):
                m.d.sync += [self.grant.eq((Const(1, count) << chosen)[:count]), self.index.eq(chosen),
                             pointer.eq(Mux(chosen == count - 1, 0, chosen + 1))]
        return m
