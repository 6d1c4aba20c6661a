"""The task classifier: pops the receive queues and hands each packet to its type's handler."""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..net.packet import KERNEL_IDS, Packet, PacketType, checksum
from ..registration import Param, Parameterized, check_int, register_block
from .common import ConfigSignature

__all__ = ["TaskClassifier", "CLASSIFIER_DROPS", "DEFAULT_KERNELS", "check_kernels"]

CLASSIFIER_DROPS = ("check", "type", "node", "task_id")
# Kernel ids attached by default: 2 sparse x dense, 5 activation, 6 aggregation.
DEFAULT_KERNELS = (1 << 2) | (1 << 5) | (1 << 6)
_TYPES = ("task", "rdma", "data")


def check_kernels(kernels):
    """Validate a kernel-id bit mask (bit *i*: kernel id *i* of Table 4.1 is attached)."""
    check_int("kernels", kernels, 0, (1 << len(KERNEL_IDS)) - 1)
    return kernels


class TaskClassifier(Parameterized, wiring.Component):
    """Checks the packet at the head of each receive queue and routes it to its handler.

    The three receive queues are the network's virtual channels (task, RDMA, data). Each
    cycle the classifier pops at most one packet: the highest-priority queue (data, then RDMA,
    then task) whose head is bad or whose handler register is free. A good packet goes to its
    handler's output register; a bad one is dropped and counted. Checks, in order (the first
    failure is the counted reason, as in :func:`golden.runtime.protocol.classify`):

    1. ``check``: the XOR of the 64 bytes is not zero (integrity);
    2. ``type``: ``ptype`` is 3 or differs from the queue's channel;
    3. ``node``: ``dst`` is not this node, or ``src`` is not below the node count;
    4. ``task_id``: a task whose kernel id is not attached (``kernels``).

    Parameters
    ----------
    kernels : int
        Bit mask of the attached kernel ids (bit *i*: Table 4.1 id *i*).

    Attributes
    ----------
    config : In(ConfigSignature())
    rx_task, rx_rdma, rx_data : In(stream.Signature(Packet))
        The receive queues' heads.
    task, rdma, data : Out(stream.Signature(Packet))
        To the task responder, the RDMA responder and the data handler (registered).
    accepted : Out(3)
        One-cycle pulses, a packet of type task / RDMA / data was accepted (for the counters).
    dropped : Out(4)
        One-cycle pulses, a packet was dropped, bit per reason in ``CLASSIFIER_DROPS`` order.

    Notes
    -----
    Latency: 1 cycle. Throughput: one packet per cycle in total, as the link's.
    """

    PARAMS = (
        Param("kernels", int, DEFAULT_KERNELS, "bit mask of attached kernel ids (Table 4.1)",
                  minimum=0, maximum=127),
    )

    def __init__(self, *, kernels=DEFAULT_KERNELS):
        self._kernels = check_kernels(kernels)
        members = {"config": In(ConfigSignature())}
        members.update({f"rx_{name}": In(stream.Signature(Packet)) for name in _TYPES})
        members.update({name: Out(stream.Signature(Packet)) for name in _TYPES})
        members.update({"accepted": Out(3), "dropped": Out(len(CLASSIFIER_DROPS))})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        config = self.config
        attached = Signal(8)
        m.d.comb += attached.eq(self._kernels)
        taken = None
        accepted = Signal(3)
        dropped = Signal(len(CLASSIFIER_DROPS))
        # Highest priority first: data replies, RDMA requests, tasks.
        for index in (2, 1, 0):
            name = _TYPES[index]
            head = getattr(self, f"rx_{name}")
            out = getattr(self, name)
            header = head.payload.header
            reasons = [Signal(name=f"{name}_bad_{reason}") for reason in CLASSIFIER_DROPS]
            m.d.comb += [
                reasons[0].eq(checksum(head.payload) != 0),
                reasons[1].eq(header.ptype != PacketType(index)),
                reasons[2].eq((header.dst != config.node) | ((header.src & ~config.node_mask) != 0)),
                reasons[3].eq(attached.bit_select(header.task_id.as_value(), 1) == 0
                              if index == 0 else 0),
            ]
            bad = Signal(name=f"{name}_bad")
            m.d.comb += bad.eq(reasons[0] | reasons[1] | reasons[2] | reasons[3])
            free = ~out.valid | out.ready
            go = Signal(name=f"{name}_go")
            m.d.comb += go.eq(head.valid & (bad | free) & (~taken if taken is not None else 1))
            with m.If(out.ready):
                m.d.sync += out.valid.eq(0)
            # The payload register loads whenever it is free, whatever the checks say: only its
            # valid waits for them, so the 512 enables do not hang off the 64-byte XOR (the
            # block's ECP5 critical path ran from the header through the check to those enables).
            with m.If(free):
                m.d.sync += out.payload.eq(head.payload)
            with m.If(go):
                m.d.comb += head.ready.eq(1)
                with m.If(bad):
                    earlier = Const(0, 1)
                    for bit in range(len(CLASSIFIER_DROPS)):
                        m.d.comb += dropped[bit].eq(reasons[bit] & ~earlier)
                        earlier = earlier | reasons[bit]
                with m.Else():
                    m.d.comb += accepted[index].eq(1)
                    m.d.sync += out.valid.eq(1)
            taken = go if taken is None else (taken | go)
        m.d.sync += [self.accepted.eq(accepted), self.dropped.eq(dropped)]
        return m


register_block(
    "runtime_classifier", TaskClassifier, family="runtime",
    summary="FCsN task classifier: checks and routes receive-queue heads to the task/RDMA/data handlers.",
    golden="golden.runtime.protocol:classify",
    drops={"dropped": "packets dropped, bit per reason (CLASSIFIER_DROPS: check, type, node, task_id)"},
)
