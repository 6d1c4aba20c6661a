"""An N-port packet switch for the runtime network: routes by destination node, three virtual channels."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..lib.counters import pulse_count
from ..lib.streams import Queue, any_of_chain
from ..registration import NO_GOLDEN, Param, Parameterized, register_block
from .packet import NODE_BITS, VC, Flit

__all__ = ["Switch", "SWITCH_NODES", "SWITCH_DEPTH_PARAM"]

SWITCH_NODES = (2, 4, 8, 16)
# The switch depth as a parameter of a block that holds a switch (the cluster blocks).
SWITCH_DEPTH_PARAM = Param("switch_depth", int, 4, "switch input buffer entries per channel", minimum=2,
                           maximum=1024)


class Switch(Parameterized, wiring.Component):
    """Routes each flit to the port of its header's ``dst``, with per-port per-channel input buffers.

    Every input port has one buffer of ``depth`` flits per virtual channel (task, RDMA, data);
    the node attached to it sends only with a credit for that buffer, and each pop returns one
    (``p<i>_in_credit``), so the switch never drops a flit for lack of room. Every output port
    holds ``rx_credits`` credits per channel for the attached node's receive queues and sends a
    flit only with one. Each cycle, each output takes the head of one input buffer destined to
    it: the highest-priority channel (data, then RDMA, then task) that has a waiting head and a
    credit, and among the inputs of that channel the next one in round-robin order. Channels
    never block each other: a task waiting for credits at its output does not hold up RDMA
    requests or data replies behind it, which is what keeps the runtime deadlock-free (see
    ``docs/runtime.md``).

    A flit whose ``dst`` is not below ``nodes``, or that arrives on channel 3, cannot be routed:
    it is dropped and counted (``dropped``), and its credit is returned. A flit that finds its
    input buffer full (its sender ignored its credits: never between RTL blocks) is lost, and
    raises that port's sticky ``overflow`` bit.

    Parameters
    ----------
    nodes : int
        Ports: 2, 4, 8 or 16.
    depth : int
        Input buffer entries per port and channel (the credits a node starts with), 2 to 1024.
    rx_credits : int
        Receive queue entries per channel of each attached node, 1 to 1024.

    Attributes
    ----------
    p<i>_in : In(stream.Signature(Flit))
        From node *i* (``ready`` is always high; the node respects its credits).
    p<i>_in_credit : Out(3)
        One-cycle pulses per channel: an input buffer entry of port *i* was freed.
    p<i>_out : Out(stream.Signature(Flit))
        To node *i* (registered).
    p<i>_out_credit : In(3)
        Node *i* freed a receive queue entry of that channel.
    dropped : Out(range(4 * nodes + 1))
        Flits dropped as unroutable in the previous cycle (registered count).
    overflow : Out(nodes)
        Bit *i*, sticky until reset: port *i* sent a flit into a full input buffer (it was lost).

    Notes
    -----
    Latency: 3 cycles from ``p<i>_in`` to ``p<j>_out`` with no contention (2 in the input
    buffer, 1 in the output register). Throughput: one flit per cycle per output port, and per
    input port and channel.
    """

    PARAMS = (
        Param("nodes", int, 4, "ports", choices=SWITCH_NODES),
        Param("depth", int, 4, "input buffer entries per port and channel", minimum=2, maximum=1024),
        Param("rx_credits", int, 8, "receive queue entries per channel of each node",
              minimum=1, maximum=1024),
    )

    def __init__(self, *, nodes=4, depth=4, rx_credits=8):
        members = {}
        for port in range(nodes):
            members.update({
                f"p{port}_in": In(stream.Signature(Flit)),
                f"p{port}_in_credit": Out(3),
                f"p{port}_out": Out(stream.Signature(Flit)),
                f"p{port}_out_credit": In(3),
            })
        members["dropped"] = Out(range(4 * nodes + 1))
        members["overflow"] = Out(nodes)
        super().__init__(members)

    def port(self, index, name):
        return getattr(self, f"p{index}_{name}")

    def elaborate(self, platform):
        m = Module()
        nodes = self._nodes
        heads = {}  # (input, vc) -> read side of its buffer
        popped = {}  # (input, vc) -> Signal: popped by some output this cycle
        drop_terms = []
        for port in range(nodes):
            incoming = self.port(port, "in")
            m.d.comb += incoming.ready.eq(1)
            flit = incoming.payload
            channel_3 = Signal(name=f"channel3_{port}")
            m.d.comb += channel_3.eq(incoming.valid & (flit.vc.as_value() == 3))
            drop_terms.append(channel_3)
            overflows = []
            for vc in range(3):
                queue = Queue(m, f"in{port}_vc{vc}", Flit, self._depth, credited=True)
                m.d.comb += [queue.w.valid.eq(incoming.valid & (flit.vc == VC(vc))), queue.w.payload.eq(flit)]
                overflows.append(queue.overflow)
                heads[port, vc] = queue.r
                popped[port, vc] = Signal(name=f"pop{port}_vc{vc}")
                # Unroutable heads are dropped as soon as they reach the front.
                bad = Signal(name=f"bad{port}_vc{vc}")
                if nodes < 1 << NODE_BITS:  # with 16 ports every destination is routable
                    m.d.comb += bad.eq(queue.r.valid & (queue.r.payload.packet.header.dst >= nodes))
                drop_terms.append(bad)
                m.d.comb += queue.r.ready.eq(popped[port, vc] | bad)
            m.d.comb += self.overflow[port].eq(Cat(*overflows).any())
        for port in range(nodes):
            m.d.sync += self.port(port, "in_credit").eq(
                sum((heads[port, vc].valid & heads[port, vc].ready) << vc for vc in range(3)))
        m.d.sync += self.dropped.eq(pulse_count(*drop_terms))

        grants = {key: [] for key in heads}
        for out_port in range(nodes):
            out = self.port(out_port, "out")
            with m.If(out.ready):
                m.d.sync += out.valid.eq(0)
            free = ~out.valid | out.ready
            pointer = Signal(range(nodes), name=f"rr{out_port}")
            credits = [Signal(range(self._rx_credits + 1), init=self._rx_credits,
                              name=f"credit{out_port}_vc{vc}") for vc in range(3)]
            chosen_any = Const(0, 1)
            sent = [Signal(name=f"sent{out_port}_vc{vc}") for vc in range(3)]
            for vc in (2, 1, 0):
                requests = [heads[port, vc].valid & (heads[port, vc].payload.packet.header.dst == out_port)
                            for port in range(nodes)]
                usable = free & (credits[vc] != 0) & ~chosen_any
                # Round robin: the first requester at or after the pointer, else the first one.
                hits = [[] for _ in range(nodes)]
                taken = Const(0, 1)
                for phase in (0, 1):
                    for port in range(nodes):
                        eligible = (pointer <= port) if phase == 0 and port < nodes - 1 else Const(1, 1)
                        hit = Signal(name=f"hit{out_port}_vc{vc}_in{port}_{phase}")
                        m.d.comb += hit.eq(requests[port] & eligible & ~taken)
                        hits[port].append(hit)
                        step = Signal(name=f"taken{out_port}_vc{vc}_in{port}_{phase}")
                        m.d.comb += step.eq(taken | hit)
                        taken = step
                grant = [Signal(name=f"grant{out_port}_vc{vc}_in{port}") for port in range(nodes)]
                for port in range(nodes):
                    m.d.comb += grant[port].eq(hits[port][0] | hits[port][1])
                any_request = taken
                for port in range(nodes):
                    go = Signal(name=f"go{out_port}_vc{vc}_in{port}")
                    m.d.comb += go.eq(grant[port] & usable)
                    grants[port, vc].append(go)
                    with m.If(go):
                        m.d.sync += [out.valid.eq(1), out.payload.eq(heads[port, vc].payload),
                                     pointer.eq(port + 1 if port + 1 < nodes else 0)]
                m.d.comb += sent[vc].eq(any_request & usable)
                chosen = Signal(name=f"chosen{out_port}_vc{vc}")
                m.d.comb += chosen.eq(chosen_any | sent[vc])
                chosen_any = chosen
            returned = self.port(out_port, "out_credit")
            for vc in range(3):
                with m.If(sent[vc] & ~returned[vc]):
                    m.d.sync += credits[vc].eq(credits[vc] - 1)
                with m.Elif(returned[vc] & ~sent[vc]):
                    m.d.sync += credits[vc].eq(credits[vc] + 1)
        for key, terms in grants.items():
            m.d.comb += popped[key].eq(any_of_chain(terms))
        return m


register_block(
    "runtime_switch", Switch, family="net",
    summary="FCsN runtime network: N-port switch routing by destination node, three credit-based virtual "
            "channels, never dropping a routable flit.",
    golden=NO_GOLDEN("plumbing: routes packets by destination, contents unchanged"),
    drops={"dropped": "unroutable flits (dst not a port, or channel 3), per cycle",
           "overflow": "per port, sticky: a flit lost to a full input buffer (its sender ignored credits)"},
)
