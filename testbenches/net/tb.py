"""What the network tests share: a node model attached to a switch port."""

import cocotb
from cocotb.triggers import Event, RisingEdge

__all__ = ["SwitchPort"]


class SwitchPort:
    """A node attached to switch port ``p<port>``: a credit-limited sender and a (slow) receiver.

    Flits queued in ``outbound`` as ``(vc, word)`` go out only with a credit for the switch's input
    buffer of their channel (``depth`` to start with); channel 3 needs none. Every flit the switch
    sends is appended to ``received`` as ``(vc, word)`` and its credit goes back after a random
    delay (up to 30 cycles when ``slow``), never more than ``rx_credits`` held at once. ``gaps``
    idles the sender on 30 % of the cycles. ``arrived`` is set on every received flit.
    """

    def __init__(self, tb, port, rng, gaps, slow, *, depth, rx_credits):
        self.tb, self.port, self.rng, self.gaps, self.slow = tb, port, rng, gaps, slow
        self.dut = tb.dut
        self.depth, self.rx_credits = depth, rx_credits
        self.arrived = Event()
        self.clear()
        getattr(self.dut, f"p{port}_in__valid").value = 0
        getattr(self.dut, f"p{port}_out__ready").value = 1
        getattr(self.dut, f"p{port}_out_credit").value = 0
        cocotb.start_soon(self._run())

    def clear(self):
        """Forget everything (reset): the switch's buffers are empty, so every credit is here;
        credit pulses of the next two cycles were sent before the reset and are ignored."""
        self.stale = 2
        self.credits = [self.depth] * 3
        self.outbound = []  # (vc, word)
        self.holding = [0] * 3
        self.returns = []
        self.received = []  # (vc, word)

    async def _run(self):
        dut, port = self.dut, self.port
        while True:
            await RisingEdge(self.tb.clock)
            credit = int(getattr(dut, f"p{port}_in_credit").value)
            if self.stale:
                self.stale -= 1
                credit = 0
            for vc in range(3):
                self.credits[vc] += credit >> vc & 1
                assert self.credits[vc] <= self.depth, f"port {port} got too many credits"
            if int(getattr(dut, f"p{port}_out__valid").value):
                word = int(getattr(dut, f"p{port}_out__payload").value)
                vc = word >> 512
                self.holding[vc] += 1
                assert self.holding[vc] <= self.rx_credits, f"port {port} channel {vc} overran its credits"
                self.received.append((vc, word & ((1 << 512) - 1)))
                self.arrived.set()
                delay = int(self.rng.integers(1, 30 if self.slow else 3))
                self.returns.append((self.tb.cycle + delay, vc))
            pulses = 0
            for entry in [entry for entry in self.returns if entry[0] <= self.tb.cycle]:
                if not pulses >> entry[1] & 1:
                    pulses |= 1 << entry[1]
                    self.returns.remove(entry)
                    self.holding[entry[1]] -= 1
            getattr(dut, f"p{port}_out_credit").value = pulses
            getattr(dut, f"p{port}_in__valid").value = 0
            if self.outbound and not (self.gaps and self.rng.random() < 0.3):
                vc, word = self.outbound[0]
                if vc == 3 or self.credits[vc]:
                    self.outbound.pop(0)
                    if vc < 3:
                        self.credits[vc] -= 1
                    getattr(dut, f"p{port}_in__payload").value = word | vc << 512
                    getattr(dut, f"p{port}_in__valid").value = 1
